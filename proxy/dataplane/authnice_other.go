//go:build !linux

package dataplane

import (
	"fmt"
	"runtime"
)

// setThreadNice is Linux only (authnice_linux.go); elsewhere the checks run at the proxy's
// own priority.
func setThreadNice(nice int) error {
	return fmt.Errorf("set a thread's nice value to %d: not supported on %s", nice, runtime.GOOS)
}
