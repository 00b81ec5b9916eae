package dataplane

import (
	"errors"
	"syscall"
)

type idleResult int

const (
	idleOK          idleResult = iota // nothing to read: the connection may carry a request
	idleClosed                        // the backend closed it, or it failed
	idleUnsolicited                   // bytes arrived while it was idle
)

// idleState looks at a pooled connection without reading from it (MSG_PEEK, MSG_DONTWAIT):
// one system call, no goroutine per connection.
func idleState(raw syscall.RawConn) idleResult {
	if raw == nil {
		return idleOK
	}
	var n int
	var err error
	if cerr := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); cerr != nil {
		return idleClosed
	}
	switch {
	case n > 0:
		return idleUnsolicited
	case err == nil:
		return idleClosed // 0 bytes: EOF
	case errors.Is(err, syscall.EAGAIN):
		return idleOK
	default:
		return idleClosed
	}
}
