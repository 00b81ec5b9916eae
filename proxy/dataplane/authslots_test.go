package dataplane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAuthSlots walks the fair admission of password checks through steps, one decision
// each. The hostile case first: a namespace flooding checks holds its share and no more, so
// another namespace's check is admitted at once while the flood goes on.
func TestAuthSlots(t *testing.T) {
	type step struct {
		desc    string
		op      string // enter, done (a granted ticket), leave (a waiting one)
		ticket  string // its namespace is the ticket's first letter
		wantErr error
		// running lists the tickets that hold a slot after the step, sorted.
		running []string
	}
	for _, tc := range []struct {
		name         string
		slots, queue int
		steps        []step
	}{
		{name: "a flood holds its share; another namespace is admitted at once", slots: 4, queue: 8, steps: []step{
			{desc: "flood 1", op: "enter", ticket: "f1", running: []string{"f1"}},
			{desc: "flood 2: its share (4/2) is full", op: "enter", ticket: "f2", running: []string{"f1", "f2"}},
			{desc: "flood 3 waits though slots are free", op: "enter", ticket: "f3", running: []string{"f1", "f2"}},
			{desc: "flood 4 waits", op: "enter", ticket: "f4", running: []string{"f1", "f2"}},
			{desc: "the victim is admitted while the flood holds its share", op: "enter", ticket: "v1", running: []string{"f1", "f2", "v1"}},
			{desc: "a third namespace takes the last slot", op: "enter", ticket: "o1", running: []string{"f1", "f2", "o1", "v1"}},
			{desc: "the victim's second check waits: no slot", op: "enter", ticket: "v2", running: []string{"f1", "f2", "o1", "v1"}},
			{desc: "a freed flood slot goes to the least recently served of the equals (flood: 2nd, victim: 5th)", op: "done", ticket: "f1", running: []string{"f2", "f3", "o1", "v1"}},
			{desc: "a freed slot of o goes to the victim: the flood is at its share", op: "done", ticket: "o1", running: []string{"f2", "f3", "v1", "v2"}},
			{desc: "the flood's waiting check gives up", op: "leave", ticket: "f4", running: []string{"f2", "f3", "v1", "v2"}},
			{desc: "and is not granted later", op: "done", ticket: "f2", running: []string{"f3", "v1", "v2"}},
		}},
		{name: "a freed slot goes to the namespace holding the fewest", slots: 2, queue: 8, steps: []step{
			{desc: "a", op: "enter", ticket: "a1", running: []string{"a1"}},
			{desc: "b", op: "enter", ticket: "b1", running: []string{"a1", "b1"}},
			{desc: "a waits", op: "enter", ticket: "a2", running: []string{"a1", "b1"}},
			{desc: "c waits", op: "enter", ticket: "c1", running: []string{"a1", "b1"}},
			{desc: "a's slot goes to c (never served) before a's next", op: "done", ticket: "a1", running: []string{"b1", "c1"}},
			{desc: "b's slot goes to a", op: "done", ticket: "b1", running: []string{"a2", "c1"}},
		}},
		{name: "a full queue refuses (acquire holds the answer); other namespaces unaffected", slots: 2, queue: 2, steps: []step{
			{desc: "flood 1", op: "enter", ticket: "f1", running: []string{"f1"}},
			{desc: "flood 2 waits", op: "enter", ticket: "f2", running: []string{"f1"}},
			{desc: "flood 3 waits", op: "enter", ticket: "f3", running: []string{"f1"}},
			{desc: "flood 4: queue full", op: "enter", ticket: "f4", wantErr: errAuthQueueFull, running: []string{"f1"}},
			{desc: "the victim is admitted", op: "enter", ticket: "v1", running: []string{"f1", "v1"}},
			{desc: "the flood's queue moves on", op: "done", ticket: "f1", running: []string{"f2", "v1"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuthSlots(tc.slots, time.Minute)
			a.queue = tc.queue
			tickets := map[string]*authTicket{}
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "enter":
					var tk *authTicket
					if tk, err = a.enter(s.ticket[:1]); err == nil {
						tickets[s.ticket] = tk
					}
				case "done":
					a.done(tickets[s.ticket])
					delete(tickets, s.ticket)
				case "leave":
					if !a.leave(tickets[s.ticket]) {
						t.Fatalf("step %d (%s): leave of a granted ticket", i, s.desc)
					}
					delete(tickets, s.ticket)
				}
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s): error %v, want %v", i, s.desc, err, s.wantErr)
				}
				var running []string
				for name, tk := range tickets {
					select {
					case <-tk.ready:
						running = append(running, name)
					default:
					}
				}
				slices.Sort(running)
				if diff := cmp.Diff(s.running, running); diff != "" {
					t.Fatalf("step %d (%s): running (-want +got):\n%s", i, s.desc, diff)
				}
			}
		})
	}
}

// TestAuthSlotsWaitBounded: a check that finds no slot waits at most the bound (then
// errAuthWait, which the data plane answers with 503), or until its client goes away; either
// way it leaves the queue, so a later slot is not given to no one.
func TestAuthSlotsWaitBounded(t *testing.T) {
	a := newAuthSlots(2, 20*time.Millisecond) // share 1
	held, err := a.acquire(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.acquire(context.Background(), "f"); !errors.Is(err, errAuthWait) {
		t.Errorf("wait with the namespace's share held: %v, want %v", err, errAuthWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.wait = time.Hour
	if _, err := a.acquire(ctx, "f"); !errors.Is(err, context.Canceled) {
		t.Errorf("wait of a client gone: %v, want %v", err, context.Canceled)
	}
	a.done(held)
	if len(a.tenant) != 0 || a.inUse != 0 {
		t.Errorf("after every check: %d namespaces remembered, %d slots in use", len(a.tenant), a.inUse)
	}
}

// TestAuthSlotsRefusalHeld: a check refused because its namespace's queue is full is answered
// (errAuthQueueFull) no sooner than the wait bound — a closed-loop client then sends one
// request per wait, not thousands a second — or as soon as its client goes away; either way
// nothing of it stays behind. A lower bound only: a timer never fires early.
func TestAuthSlotsRefusalHeld(t *testing.T) {
	const wait = 50 * time.Millisecond
	a := newAuthSlots(2, wait) // share 1
	a.queue = 1
	held, err := a.acquire(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.enter("f"); err != nil { // the queue's one place, left below
		t.Fatal(err)
	}
	queued := a.tenant["f"].waiting[0]
	start := time.Now()
	_, err = a.acquire(context.Background(), "f")
	if took := time.Since(start); !errors.Is(err, errAuthQueueFull) || took < wait {
		t.Errorf("a check over the queue: %v after %v, want %v after %v or more", err, took, errAuthQueueFull, wait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.wait = time.Hour
	if _, err := a.acquire(ctx, "f"); !errors.Is(err, context.Canceled) {
		t.Errorf("a check over the queue whose client is gone: %v, want %v", err, context.Canceled)
	}
	if !a.leave(queued) {
		t.Fatal("the queued ticket was granted")
	}
	a.done(held)
	if len(a.tenant) != 0 || a.inUse != 0 {
		t.Errorf("after every check: %d namespaces remembered (%+v), %d slots in use", len(a.tenant), a.tenant, a.inUse)
	}
}

// fakeClock is a clock that moves only when a test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestAuthSlotsBudget: the hostile case first — a namespace that keeps one check running at
// a time (one client in a closed loop: it never queues, and its tenant entry is dropped
// between checks) still spends its budget, and its next check is to run at the lower
// priority; another namespace's is not. The time drains at authDrain, and a namespace whose
// time has drained is forgotten.
func TestAuthSlotsBudget(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	a := newAuthSlots(2, time.Minute)
	a.now = clock.now
	check := func(ns string, took time.Duration) (low bool) {
		t.Helper()
		tk, err := a.acquire(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		clock.advance(took)
		a.done(tk)
		return tk.low
	}
	for i, s := range []struct {
		desc    string
		ns      string
		took    time.Duration
		wait    time.Duration // before the check
		wantLow bool
	}{
		{desc: "the flood's first check, at the proxy's priority", ns: "f", took: 300 * time.Millisecond},
		{desc: "its next one, the budget spent", ns: "f", took: 300 * time.Millisecond, wantLow: true},
		{desc: "another namespace's check", ns: "v", took: 5 * time.Millisecond},
		{desc: "the other namespace, again", ns: "v", took: 5 * time.Millisecond},
		{desc: "the flood, not yet drained", ns: "f", wait: time.Second, wantLow: true},
		{desc: "the flood, drained below the budget", ns: "f", wait: time.Duration(float64(600*time.Millisecond-authBudget) / authDrain)},
	} {
		clock.advance(s.wait)
		if low := check(s.ns, s.took); low != s.wantLow {
			t.Errorf("step %d (%s): low %v, want %v", i, s.desc, low, s.wantLow)
		}
	}
	clock.advance(time.Duration(float64(time.Second) / authDrain))
	check("v", 0)
	if len(a.spent) != 0 || len(a.tenant) != 0 {
		t.Errorf("after every namespace's time drained: spent %v, tenants %v", a.spent, a.tenant)
	}
}
