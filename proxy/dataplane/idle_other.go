//go:build !linux

package dataplane

import "syscall"

type idleResult int

const (
	idleOK idleResult = iota
	idleClosed
	idleUnsolicited
)

// idleCheck cannot look at a connection without reading it here: bytes sent while it was
// idle are caught only as they come with the next response (br.Buffered or a bad status line).
type idleCheck struct{}

func newIdleCheck(syscall.RawConn) *idleCheck { return nil }

func (c *idleCheck) state() idleResult { return idleOK }
