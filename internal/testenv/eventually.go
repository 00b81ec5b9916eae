package testenv

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is the longest Eventually waits between two checks.
const Interval = 100 * time.Millisecond

// HoldsInterval is how often Holds checks its condition: often enough that a violation that
// lasts a moment is seen.
const HoldsInterval = 20 * time.Millisecond

// firstInterval is Eventually's first wait between checks; each later wait is half as long
// again, up to Interval: what settles at once is seen at once, and a long wait does not spin
// (a check may run kubectl or list objects on a machine the tests share).
const firstInterval = 10 * time.Millisecond

// Eventually checks cond until it returns nil; when timeout passes first it fails the test
// with what and cond's last error. Use it instead of a sleep: the deadline is generous and the
// wait is as short as the system allows. Call it from the test's goroutine (it calls
// t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	EventuallyOn(t, timeout, what, nil, cond)
}

// EventuallyEvery is Eventually at a fixed pace: cond every interval (a check that is costly —
// kubectl, vtysh in a lab — or one that is timed and must be seen within a few milliseconds).
func EventuallyEvery(t testing.TB, interval, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := PollEvery(interval, timeout, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// PollEvery checks cond every interval until it returns nil, and returns nil then; when timeout
// passes first it returns cond's last error, saying so. It is EventuallyEvery for where a test
// must not fail at once: a goroutine (which may not call t.Fatalf), a cleanup that only logs,
// a helper that returns its error.
func PollEvery(interval, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not so after %v: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}

// EventuallyOn is Eventually that also checks cond whenever wake delivers, for a system that
// says when it changed (a nil wake is never ready).
func EventuallyOn(t testing.TB, timeout time.Duration, what string, wake <-chan struct{}, cond func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	wait := firstInterval
	tick := time.NewTimer(wait)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case _, ok := <-wake:
			if !ok {
				wake = nil // closed: it will not say anything again
			}
		case <-tick.C:
			wait = min(wait*3/2, Interval)
			tick.Reset(wait)
		case <-deadline.C:
			if err = cond(); err == nil {
				return
			}
			t.Fatalf("%s: not so after %v: %v", what, timeout, err)
		}
	}
}

// Holds checks cond every HoldsInterval for d and fails the test with what and cond's error the
// first time it does not return nil. It is for "nothing happens within d": waiting the whole
// of d is the behaviour under test, and a violation at any moment in it is caught.
func Holds(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	HoldsEvery(t, HoldsInterval, d, what, cond)
}

// HoldsEvery is Holds checking every interval, for a check that is costly (vtysh, kubectl, an
// API write) or that itself acts at a pace the scenario sets.
func HoldsEvery(t testing.TB, interval, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s: broken after %v: %v", what, d-time.Until(deadline), err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(interval, time.Until(deadline)))
	}
}

// Receive returns the next value from ch (the zero value once ch is closed, so a closed
// "done" channel counts), failing the test with what when nothing arrives within timeout.
func Receive[T any](t testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("%s: nothing within %v", what, timeout)
	}
	panic("unreachable")
}

// True adapts a yes/no condition for Eventually and Holds: its error says only "false", so
// prefer a cond that says what it saw when there is something to say.
func True(cond func() bool) func() error {
	return func() error {
		if !cond() {
			return errFalse
		}
		return nil
	}
}

var errFalse = errors.New("false")
