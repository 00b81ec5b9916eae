package dataplane

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// limiters hold the rate limits' state: a token bucket and a count of requests in flight per
// Ingress and client address (an IPv6 client by its /64: one host has a whole /64 to change
// addresses in). The state outlives table swaps. It is bounded: past maxLimitKeys clients,
// the buckets that have filled up again (idle clients) are dropped first, then any.
type limiters struct {
	mu      sync.Mutex
	buckets map[limitKey]*bucket
	now     func() time.Time
	mirror  mirrorLimit // mirror requests in flight (mirror.go)
}

const maxLimitKeys = 100_000

type limitKey struct {
	ingress string
	client  netip.Addr
}

type bucket struct {
	tokens   float64
	last     time.Time
	rps      float64
	burst    float64
	inflight int
}

func newLimiters() *limiters {
	return &limiters{buckets: map[limitKey]*bucket{}, now: time.Now}
}

func limitKeyOf(ingress string, ip netip.Addr) limitKey {
	if ip.Is6() && !ip.Is4In6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return limitKey{ingress, ip.Unmap()}
}

// bucketLocked returns the client's bucket, made full on first use.
func (l *limiters) bucketLocked(k limitKey, rl *table.RateLimit, now time.Time) *bucket {
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= maxLimitKeys {
			l.sweepLocked(now)
		}
		b = &bucket{tokens: float64(rl.Burst), last: now}
		l.buckets[k] = b
	}
	b.rps, b.burst = rl.RPS, float64(max(rl.Burst, 1))
	if b.rps > 0 {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rps)
	}
	b.last = now
	return b
}

// take spends one token of the client's bucket. When there is none it returns false and the
// seconds until there is (for Retry-After).
func (l *limiters) take(ingress string, ip netip.Addr, rl *table.RateLimit) (int, bool) {
	if rl.RPS <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(limitKeyOf(ingress, ip), rl, now)
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return int(math.Ceil((1 - b.tokens) / b.rps)), false
}

// enter counts a request in flight for the client, up to rl.Connections; the returned
// function ends it. nil when the client has that many in flight already.
func (l *limiters) enter(ingress string, ip netip.Addr, rl *table.RateLimit) func() {
	k := limitKeyOf(ingress, ip)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(k, rl, now)
	if b.inflight >= rl.Connections {
		return nil
	}
	b.inflight++
	return func() {
		l.mu.Lock()
		b.inflight--
		l.mu.Unlock()
	}
}

// sweepLocked drops idle clients' buckets (full again, nothing in flight), and when that is
// not enough a tenth of the others.
func (l *limiters) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		full := b.rps <= 0 || b.tokens+now.Sub(b.last).Seconds()*b.rps >= b.burst
		if full && b.inflight == 0 {
			delete(l.buckets, k)
		}
	}
	for k, b := range l.buckets {
		if len(l.buckets) < maxLimitKeys*9/10 {
			break
		}
		if b.inflight == 0 {
			delete(l.buckets, k)
		}
	}
}
