//go:build !linux

package dataplane

// setThreadNice does nothing outside Linux (authnice_linux.go): there the checks run at the
// proxy's own priority whatever --auth-check-nice says, as documented.
func setThreadNice(int) error { return nil }
