package balancer

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Balancer picks an endpoint for a request. Implementations are safe for concurrent use and
// immutable apart from atomics: a table swap builds new ones.
type Balancer interface {
	// Pick returns an endpoint, skipping unhealthy ones and those for which skip returns true
	// (endpoints already tried by this request); nil when none is left. key is the hash key
	// (used by Hash only).
	Pick(key string, skip func(*Endpoint) bool) *Endpoint
}

// usable reports whether e may be picked now.
func usable(e *Endpoint, skip func(*Endpoint) bool, now time.Time) bool {
	return e.Healthy(now) && (skip == nil || !skip(e))
}

// fallback is the last resort when every endpoint is ejected: try one anyway (ejection is a
// guess; refusing everything would turn a slow backend into a full outage).
func fallback(eps []*Endpoint, skip func(*Endpoint) bool) *Endpoint {
	for _, e := range eps {
		if skip == nil || !skip(e) {
			return e
		}
	}
	return nil
}

// RoundRobin takes the endpoints in turn.
type RoundRobin struct {
	eps  []*Endpoint
	next atomic.Uint64
}

// NewRoundRobin returns a round-robin balancer over eps.
func NewRoundRobin(eps []*Endpoint) *RoundRobin { return &RoundRobin{eps: eps} }

// Pick implements Balancer.
func (b *RoundRobin) Pick(_ string, skip func(*Endpoint) bool) *Endpoint {
	n := len(b.eps)
	if n == 0 {
		return nil
	}
	now := time.Now()
	start := b.next.Add(1) - 1
	for i := 0; i < n; i++ {
		if e := b.eps[(start+uint64(i))%uint64(n)]; usable(e, skip, now) {
			return e
		}
	}
	return fallback(b.eps, skip)
}

// P2C draws two endpoints at random and takes the cheaper: the one with fewer requests in
// flight (least-request) or the lower peak-EWMA cost (latency × (in-flight+1)).
type P2C struct {
	eps  []*Endpoint
	ewma bool
}

// NewLeastRequest returns a least-request balancer (power of two choices).
func NewLeastRequest(eps []*Endpoint) *P2C { return &P2C{eps: eps} }

// NewEWMA returns a peak-EWMA balancer (power of two choices).
func NewEWMA(eps []*Endpoint) *P2C { return &P2C{eps: eps, ewma: true} }

// Pick implements Balancer.
func (b *P2C) Pick(_ string, skip func(*Endpoint) bool) *Endpoint {
	n := len(b.eps)
	now := time.Now()
	switch n {
	case 0:
		return nil
	case 1:
		if usable(b.eps[0], skip, now) {
			return b.eps[0]
		}
		return fallback(b.eps, skip)
	}
	for try := 0; try < 3; try++ {
		i := rand.IntN(n)
		j := rand.IntN(n - 1)
		if j >= i {
			j++
		}
		a, c := b.eps[i], b.eps[j]
		ua, uc := usable(a, skip, now), usable(c, skip, now)
		switch {
		case ua && uc:
			if b.less(c, a) {
				return c
			}
			return a
		case ua:
			return a
		case uc:
			return c
		}
	}
	// Both draws kept hitting unusable endpoints: scan for the cheapest usable one.
	var best *Endpoint
	for _, e := range b.eps {
		if usable(e, skip, now) && (best == nil || b.less(e, best)) {
			best = e
		}
	}
	if best != nil {
		return best
	}
	return fallback(b.eps, skip)
}

func (b *P2C) less(x, y *Endpoint) bool {
	if b.ewma {
		return x.cost() < y.cost()
	}
	return x.InFlight() < y.InFlight()
}
