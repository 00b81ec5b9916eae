package dataplane

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// limiters hold the rate limits' state: a token bucket and a count of requests in flight per
// Ingress and client address. An IPv6 client is keyed by its prefix (/64 by default,
// Options.RateLimitIPv6Prefix): one host has a whole /64 to change addresses in, and keyed
// by address it would have 2^64 buckets. Clients whose address is unknown (clientaddr.go)
// share one key. The state outlives table swaps.
//
// Each namespace has a table of its own, bounded on its own (maxClients keys): one tenant's
// flood of addresses never evicts another tenant's clients (ARCHITECTURE invariant 13).
// Within a full table only idle buckets (full again, nothing in flight) are dropped, at most
// one sweep a second; a drained bucket is never dropped, since dropping it would hand its
// client a full one. While the table stays full, new clients share one overflow bucket per
// Ingress.
type limiters struct {
	mu         sync.Mutex
	tables     map[string]*limitTable // by namespace
	maxClients int                    // keys per namespace's table (overflow buckets aside)
	v6Bits     int                    // the IPv6 prefix length clients are keyed by
	now        func() time.Time
	mirror     mirrorLimit // mirror requests in flight (mirror.go)
}

// defaultRateLimitClients is how many clients each namespace's rate limits remember.
const defaultRateLimitClients = 100_000

type limitTable struct {
	buckets   map[limitKey]*bucket
	lastSweep time.Time
}

type limitKey struct {
	ingress  string
	client   netip.Addr // the zero Addr: the unknown client
	overflow bool       // the bucket new clients share while the table is full
}

type bucket struct {
	tokens   float64
	last     time.Time
	rps      float64
	burst    float64
	inflight int
}

func newLimiters(v6Bits, maxClients int) *limiters {
	return &limiters{tables: map[string]*limitTable{}, maxClients: maxClients, v6Bits: v6Bits, now: time.Now}
}

func (l *limiters) keyOf(ingress string, ip netip.Addr) limitKey {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(l.v6Bits)
		ip = p.Addr()
	}
	return limitKey{ingress: ingress, client: ip}
}

// bucketLocked returns the client's bucket in namespace ns, made full on first use.
func (l *limiters) bucketLocked(ns string, k limitKey, rl *table.RateLimit, now time.Time) *bucket {
	t := l.tables[ns]
	if t == nil {
		t = &limitTable{buckets: map[limitKey]*bucket{}}
		l.tables[ns] = t
	}
	b := t.buckets[k]
	if b == nil {
		if len(t.buckets) >= l.maxClients && now.Sub(t.lastSweep) >= time.Second {
			t.sweep(now)
			t.lastSweep = now
		}
		if len(t.buckets) >= l.maxClients {
			k = limitKey{ingress: k.ingress, overflow: true}
			b = t.buckets[k]
		}
		if b == nil {
			b = &bucket{tokens: float64(rl.Burst), last: now}
			t.buckets[k] = b
		}
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
func (l *limiters) take(ns, ingress string, ip netip.Addr, rl *table.RateLimit) (int, bool) {
	if rl.RPS <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(ns, l.keyOf(ingress, ip), rl, now)
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return int(math.Ceil((1 - b.tokens) / b.rps)), false
}

// enter counts a request in flight for the client, up to rl.Connections; the returned
// function ends it. nil when the client has that many in flight already.
func (l *limiters) enter(ns, ingress string, ip netip.Addr, rl *table.RateLimit) func() {
	k := l.keyOf(ingress, ip)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(ns, k, rl, now)
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

// sweep drops the idle clients' buckets: full again, nothing in flight.
func (t *limitTable) sweep(now time.Time) {
	for k, b := range t.buckets {
		full := b.rps <= 0 || b.tokens+now.Sub(b.last).Seconds()*b.rps >= b.burst
		if full && b.inflight == 0 {
			delete(t.buckets, k)
		}
	}
}
