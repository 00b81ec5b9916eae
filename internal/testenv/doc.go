// Package testenv is the kit metalgate's tests share: a real kube-apiserver + etcd started
// from KUBEBUILDER_ASSETS (Start for one test, Main for a package's TestMain), a
// controller-runtime manager on it for one test (NewManager, StartManager), one way to wait
// for something to become true (Eventually; EventuallyOn when the system says it changed;
// PollEvery where the test must not fail at once, as in a goroutine; Receive for a channel;
// Holds and HoldsEvery for "nothing happens within d"), and the output a test keeps (Buffer,
// Logger). It is imported by _test.go files only; internal/ keeps it out of the
// production tree.
//
// Tests do not sleep to synchronise: they wait for the event or poll until a deadline. A sleep
// is left only where the time itself is the behaviour under test, with a comment saying so.
//
// An API-server test skips itself only when KUBEBUILDER_ASSETS is unset, and then says why and
// how to run it (make test-integration exports KUBEBUILDER_ASSETS, so CI never skips these).
// KUBEBUILDER_ASSETS set but wrong — a directory without kube-apiserver, etcd or kubectl — is a
// failure, never a skip: someone asked for the real API server and did not get it.
package testenv
