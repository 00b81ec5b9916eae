package testenv

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the test that uses it.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

// run calls f with a recorder and returns what it failed with ("" when it did not).
func run(t *testing.T, f func(testing.TB)) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	f(r)
	return ""
}

func TestEventually(t *testing.T) {
	var calls atomic.Int32
	tests := []struct {
		name     string
		cond     func() error
		wantFail string // substring; "" means it must return
	}{
		{name: "true at once", cond: func() error { return nil }},
		{name: "true on the third check", cond: func() error {
			if calls.Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		}},
		{name: "never true names what and the last error", cond: func() error { return errors.New("still 2 replicas") },
			wantFail: "pool drained: not so after 100ms: still 2 replicas"},
		{name: "a yes/no condition", cond: True(func() bool { return calls.Add(1) >= 2 })},
		{name: "a yes/no condition never true", cond: True(func() bool { return false }), wantFail: "pool drained: not so after 100ms: false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			got := run(t, func(tb testing.TB) { Eventually(tb, 100*time.Millisecond, "pool drained", tc.cond) })
			if tc.wantFail == "" && got != "" || !strings.Contains(got, tc.wantFail) {
				t.Errorf("failed with %q, want %q", got, tc.wantFail)
			}
		})
	}
}

// TestEventuallyEvery: checks at its interval (not more often), returns once true, and fails
// naming what with the last error.
func TestEventuallyEvery(t *testing.T) {
	var calls atomic.Int32
	start := time.Now()
	got := run(t, func(tb testing.TB) {
		EventuallyEvery(tb, 30*time.Millisecond, time.Second, "route learned", func() error {
			if calls.Add(1) < 4 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if got != "" || calls.Load() != 4 || time.Since(start) < 90*time.Millisecond {
		t.Errorf("failed %q after %d checks in %v; want success on the 4th check, ≥ 90ms", got, calls.Load(), time.Since(start))
	}
	got = run(t, func(tb testing.TB) {
		EventuallyEvery(tb, 10*time.Millisecond, 50*time.Millisecond, "route learned", func() error { return errors.New("no route") })
	})
	if !strings.Contains(got, "route learned: not so after 50ms: no route") {
		t.Errorf("failed with %q", got)
	}
}

// TestPollEvery: returns nil once cond holds, and cond's last error — still matching it with
// errors.Is, and saying how long it waited — when it never does; it never fails the test.
func TestPollEvery(t *testing.T) {
	var calls atomic.Int32
	err := PollEvery(5*time.Millisecond, time.Minute, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Errorf("PollEvery = %v after %d checks, want nil on the 3rd", err, calls.Load())
	}
	gone := errors.New("Service still terminating")
	err = PollEvery(5*time.Millisecond, 30*time.Millisecond, func() error { return gone })
	if !errors.Is(err, gone) || !strings.Contains(err.Error(), "not so after 30ms: Service still terminating") {
		t.Errorf("PollEvery = %v, want the last error wrapped, naming the timeout", err)
	}
}

// TestEventuallyOnWakes: a wake makes it check again; a closed wake channel does not spin it
// into a failure.
func TestEventuallyOnWakes(t *testing.T) {
	wake := make(chan struct{}, 1)
	var ready atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyOn(t, time.Minute, "ready", wake, func() error {
			if !ready.Load() {
				return errors.New("not ready")
			}
			return nil
		})
	}()
	ready.Store(true)
	wake <- struct{}{}
	Receive(t, 30*time.Second, "EventuallyOn returns once the condition holds", done)
}

func TestHolds(t *testing.T) {
	if got := run(t, func(tb testing.TB) { Holds(tb, 60*time.Millisecond, "quiet", func() error { return nil }) }); got != "" {
		t.Errorf("a condition that holds failed: %q", got)
	}
	start := time.Now()
	got := run(t, func(tb testing.TB) {
		Holds(tb, time.Minute, "no second writer", func() error {
			if time.Since(start) > 50*time.Millisecond {
				return errors.New("writer b wrote")
			}
			return nil
		})
	})
	if !strings.Contains(got, "no second writer: broken after") || !strings.Contains(got, "writer b wrote") {
		t.Errorf("failed with %q, want the violation named", got)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("Holds waited out its minute after the violation")
	}
}

// TestHoldsEvery: checks at its interval, not more often, for the whole window; the first
// violation fails it at once.
func TestHoldsEvery(t *testing.T) {
	var calls atomic.Int32
	if got := run(t, func(tb testing.TB) {
		HoldsEvery(tb, 40*time.Millisecond, 100*time.Millisecond, "no session", func() error { calls.Add(1); return nil })
	}); got != "" {
		t.Errorf("a condition that holds failed: %q", got)
	}
	if n := calls.Load(); n < 2 || n > 5 {
		t.Errorf("checked %d times in 100ms at 40ms, want 2 to 5 (start, each interval, the end)", n)
	}
	calls.Store(0)
	got := run(t, func(tb testing.TB) {
		HoldsEvery(tb, time.Millisecond, time.Minute, "no session", func() error {
			if calls.Add(1) == 3 {
				return errors.New("Established")
			}
			return nil
		})
	})
	if !strings.Contains(got, "no session: broken after") || !strings.Contains(got, "Established") || calls.Load() != 3 {
		t.Errorf("failed with %q after %d checks, want the violation on the 3rd check named", got, calls.Load())
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, time.Second, "seven", ch); got != 7 {
		t.Errorf("got %d", got)
	}
	if got := run(t, func(tb testing.TB) { Receive(tb, 30*time.Millisecond, "a value", ch) }); !strings.Contains(got, "a value: nothing within 30ms") {
		t.Errorf("failed with %q", got)
	}
	close(ch)
	if got := run(t, func(tb testing.TB) { Receive(tb, time.Second, "done", ch) }); got != "" {
		t.Errorf("a closed channel failed with %q", got)
	}
}
