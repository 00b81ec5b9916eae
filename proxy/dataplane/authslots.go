package dataplane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// authSlots admits the password checks of basic authentication (bcrypt: CPU-bound and not
// cancellable once started) fairly between namespaces (ARCHITECTURE invariant 13):
//
//   - at most slots checks run at once, across all namespaces;
//   - one namespace holds at most share of them (half, at least one), so that while one
//     namespace floods wrong passwords, a check of another finds a slot free at once;
//   - when a slot frees, it goes to the waiting namespace that holds the fewest, the least
//     recently served first among equals; each namespace's checks are served in order;
//   - a namespace queues at most queue checks beyond those it runs, and a check waits at
//     most wait for its slot (then 503); one more than the queue is refused (429), but only
//     after the same wait, or when its client goes away: a client is answered, never kept
//     waiting for ever.
//
// Why a refusal waits: a client that sends its next request as soon as the last is answered
// (a closed loop, as every password-guessing tool is) turns an instant refusal into another
// request, thousands a second, each parsed, routed and answered, which takes the CPU that
// other namespaces' requests need; a held refusal costs a parked goroutine and a timer, and
// slows such a client to one request per wait. Held refusals are not counted against the
// queue: their number is bounded by the requests the listeners take at once
// (--max-connections, and for HTTP/2 --http2-max-concurrent-streams per connection), as
// requests to a slow backend are.
//
// Each grant also says whether the check is to run at a lower priority (authTicket.low,
// basicAuth.hash): when its namespace's checks took authBudget or more of the time that has
// not yet drained, at authDrain per second. A namespace that logs its users in now and then
// is never lowered; one that keeps its share busy is, after its first check or two, however
// it spreads them over clients and connections (the time is kept per namespace, not per
// ticket or tenant entry).
//
// Slots are granted under mu, in enter and in done; nothing is granted anywhere else, so a
// test sees each decision as soon as the call returns.
type authSlots struct {
	slots, share, queue int
	wait                time.Duration
	now                 func() time.Time // time.Now; tests step a clock of their own

	mu     sync.Mutex
	inUse  int
	tenant map[string]*authTenant // namespaces that hold or wait for a slot
	served uint64                 // grants so far: orders the namespaces by last service
	spent  map[string]authSpent   // namespaces whose checks' time has not drained yet
}

// authSpent is a namespace's checks' time, not yet drained, as it was at a time.
type authSpent struct {
	level time.Duration
	at    time.Time
}

// A namespace's checks run at the proxy's own priority while their time not yet drained is
// under authBudget; it drains at authDrain seconds a second: a tenth of a CPU, some forty
// bcrypt-5 checks a second (2–3 ms each) or one of cost 12 every few seconds.
const (
	authBudget = 100 * time.Millisecond
	authDrain  = 0.1
)

// authTenant is one namespace's slots in use, queue and held refusals.
type authTenant struct {
	held    int
	waiting []*authTicket // in arrival order
	holding int           // refusals (queue full) waiting to be answered
	last    uint64        // served's value when it was last granted a slot
}

// authTicket is one check's place: granted (ready closed) or waiting in its namespace's queue.
type authTicket struct {
	ns      string
	ready   chan struct{}
	granted bool // under authSlots.mu
	// Set when granted, read after ready is closed:
	low   bool      // run the check at a lower priority: its namespace spent its budget
	start time.Time // when it was granted
}

// Refusals of authSlots.acquire; the caller answers 429 and 503, each with Retry-After.
var (
	errAuthQueueFull = errors.New("too many password checks of this namespace waiting")
	errAuthWait      = errors.New("no password check slot free in time")
)

// authQueuePerShare is how many checks a namespace may queue for each slot of its share.
const authQueuePerShare = 16

func newAuthSlots(slots int, wait time.Duration) *authSlots {
	slots = max(slots, 1)
	share := max(slots/2, 1)
	return &authSlots{slots: slots, share: share, queue: authQueuePerShare * share, wait: wait, now: time.Now,
		tenant: map[string]*authTenant{}, spent: map[string]authSpent{}}
}

// acquire returns a granted ticket of namespace ns, to give back with done; errAuthQueueFull
// (after wait), errAuthWait, or ctx's error when the client went away while it waited.
func (a *authSlots) acquire(ctx context.Context, ns string) (*authTicket, error) {
	t, err := a.enter(ns)
	if errors.Is(err, errAuthQueueFull) {
		return nil, a.hold(ctx, ns, err)
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-t.ready:
		return t, nil
	default:
	}
	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	select {
	case <-t.ready:
		return t, nil
	case <-timer.C:
		err = errAuthWait
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !a.leave(t) {
		return t, nil // granted as the wait ended: use it
	}
	return nil, err
}

// hold waits wait, or until ctx ends, before ns's refusal err (counted by enter) is
// answered; it returns err, or ctx's error when the client went away first.
func (a *authSlots) hold(ctx context.Context, ns string, err error) error {
	timer := time.NewTimer(a.wait)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
		err = ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	tn := a.tenant[ns]
	tn.holding--
	a.forgetLocked(ns, tn)
	return err
}

// enter grants ns a slot at once when one is free and ns holds less than its share; else it
// queues a ticket; when ns's queue is full it counts a held refusal (for hold to end) and
// returns errAuthQueueFull.
func (a *authSlots) enter(ns string) (*authTicket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tn := a.tenant[ns]
	if tn == nil {
		tn = &authTenant{}
		a.tenant[ns] = tn
	}
	t := &authTicket{ns: ns, ready: make(chan struct{})}
	if a.inUse < a.slots && tn.held < a.share && len(tn.waiting) == 0 {
		a.grantLocked(tn, t)
		return t, nil
	}
	if len(tn.waiting) >= a.queue {
		tn.holding++
		return nil, errAuthQueueFull
	}
	tn.waiting = append(tn.waiting, t)
	return t, nil
}

// leave takes a waiting ticket out of its queue and reports true; false when it was granted
// meanwhile (the caller then owns the slot).
func (a *authSlots) leave(t *authTicket) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.granted {
		return false
	}
	tn := a.tenant[t.ns]
	tn.waiting = slices.DeleteFunc(tn.waiting, func(w *authTicket) bool { return w == t })
	a.forgetLocked(t.ns, tn)
	return true
}

// done gives a granted ticket's slot back, adds the time since it was granted to its
// namespace's, and hands the slot on.
func (a *authSlots) done(t *authTicket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.spent[t.ns] = authSpent{level: a.spentLocked(t.ns, now) + now.Sub(t.start), at: now}
	for ns := range a.spent {
		if a.spentLocked(ns, now) == 0 {
			delete(a.spent, ns) // drained: the map holds only namespaces that checked lately
		}
	}
	tn := a.tenant[t.ns]
	tn.held--
	a.inUse--
	a.forgetLocked(t.ns, tn)
	a.dispatchLocked()
}

// spentLocked is ns's checks' time not yet drained at now.
func (a *authSlots) spentLocked(ns string, now time.Time) time.Duration {
	sp, ok := a.spent[ns]
	if !ok {
		return 0
	}
	return max(sp.level-time.Duration(float64(now.Sub(sp.at))*authDrain), 0)
}

// dispatchLocked grants free slots to waiting tickets: each to the namespace, among those
// waiting and under their share, that holds the fewest slots, then was served least recently,
// then (for a stable order) has the first name.
func (a *authSlots) dispatchLocked() {
	for a.inUse < a.slots {
		var next *authTenant
		nextNS := ""
		for ns, tn := range a.tenant {
			if len(tn.waiting) == 0 || tn.held >= a.share {
				continue
			}
			if next == nil || tn.held < next.held || tn.held == next.held && (tn.last < next.last || tn.last == next.last && ns < nextNS) {
				next, nextNS = tn, ns
			}
		}
		if next == nil {
			return
		}
		t := next.waiting[0]
		next.waiting = next.waiting[1:]
		a.grantLocked(next, t)
	}
}

func (a *authSlots) grantLocked(tn *authTenant, t *authTicket) {
	tn.held++
	a.inUse++
	a.served++
	tn.last = a.served
	t.granted = true
	t.start = a.now()
	t.low = a.spentLocked(t.ns, t.start) >= authBudget
	close(t.ready)
}

// forgetLocked drops a namespace that neither holds, waits nor is being refused, so the map
// stays as small as the set of namespaces checking passwords right now.
func (a *authSlots) forgetLocked(ns string, tn *authTenant) {
	if tn.held == 0 && len(tn.waiting) == 0 && tn.holding == 0 {
		delete(a.tenant, ns)
	}
}
