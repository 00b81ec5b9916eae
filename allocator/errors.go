package allocator

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one or more of them, with a
// message saying what to change; test with errors.Is.
var (
	// ErrPoolExhausted: every usable address of the candidate pools is taken.
	ErrPoolExhausted = errors.New("allocator: pool exhausted")
	// ErrInUse: a requested address is held by another Service that does not share it.
	ErrInUse = errors.New("allocator: address in use")
	// ErrNotInPool: a requested (or restored) address is in no pool, or in no pool eligible
	// for the Service.
	ErrNotInPool = errors.New("allocator: address not in any eligible pool")
	// ErrFamilyUnavailable: no eligible pool has addresses of the wanted family, or dual
	// stack is required and no eligible pool has both families.
	ErrFamilyUnavailable = errors.New("allocator: address family unavailable")
	// ErrSharingRefused: both Services allow sharing but cannot share this address
	// (different sharing keys, overlapping ports, or different backends with
	// externalTrafficPolicy Local).
	ErrSharingRefused = errors.New("allocator: address sharing refused")
	// ErrNoSuchPool: the requested pool name is unknown.
	ErrNoSuchPool = errors.New("allocator: no such pool")
	// ErrPoolNotEligible: the requested pool exists but its serviceAllocation excludes the
	// Service.
	ErrPoolNotEligible = errors.New("allocator: pool not eligible for service")
	// ErrInvalidPool: SetPools was given a pool it cannot use.
	ErrInvalidPool = errors.New("allocator: invalid pool")
	// ErrInvalidAddress: an address or address range cannot be parsed or is not allowed.
	ErrInvalidAddress = errors.New("allocator: invalid address")
	// ErrInvalidRequest: a Request is malformed (no key, unknown family or policy).
	ErrInvalidRequest = errors.New("allocator: invalid request")
)

// Error is the error type returned by this package: a message with context followed by the
// text of its first sentinel; errors.Is matches every sentinel it carries.
type Error struct {
	msg       string
	sentinels []error
}

func (e *Error) Error() string { return e.msg + ": " + e.sentinels[0].Error() }

// Unwrap returns the sentinels the error carries.
func (e *Error) Unwrap() []error { return e.sentinels }

// errorf builds an *Error carrying sentinel, with the message fmt.Sprintf(format, args...).
func errorf(sentinel error, format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...), sentinels: []error{sentinel}}
}
