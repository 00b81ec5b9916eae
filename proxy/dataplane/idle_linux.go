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

// idleCheck looks at a pooled connection without reading from it (MSG_PEEK, MSG_DONTWAIT):
// one system call, no goroutine per connection. It is made once per connection, so that a
// check allocates nothing.
type idleCheck struct {
	raw  syscall.RawConn
	n    int
	err  error
	peek func(fd uintptr) bool
}

func newIdleCheck(raw syscall.RawConn) *idleCheck {
	c := &idleCheck{raw: raw}
	c.peek = func(fd uintptr) bool {
		var b [1]byte
		c.n, _, c.err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}
	return c
}

func (c *idleCheck) state() idleResult {
	if c == nil || c.raw == nil {
		return idleOK
	}
	if err := c.raw.Read(c.peek); err != nil {
		return idleClosed
	}
	switch {
	case c.n > 0:
		return idleUnsolicited
	case c.err == nil:
		return idleClosed // 0 bytes: EOF
	case errors.Is(c.err, syscall.EAGAIN):
		return idleOK
	default:
		return idleClosed
	}
}
