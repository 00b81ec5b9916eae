package balancer

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint is one backend address and what the proxy has learned about it. It is shared by
// every table that routes to the address; its counters are atomics.
type Endpoint struct {
	Addr string

	inflight     atomic.Int64
	ewmaBits     atomic.Uint64 // float64 nanoseconds
	lastUpdate   atomic.Int64  // unix nanoseconds of the last EWMA update
	failures     atomic.Int32  // consecutive failures
	ejectedUntil atomic.Int64  // unix nanoseconds; 0 when in rotation
}

// InFlight is the number of requests being served by the endpoint now.
func (e *Endpoint) InFlight() int64 { return e.inflight.Load() }

// Begin marks the start of a request; call the returned func when it ends.
func (e *Endpoint) Begin() (end func(latency time.Duration)) {
	e.Start()
	return e.End
}

// Start marks the start of a request; End marks its end. They are Begin without the
// allocation of its func, for the proxy's hot path.
func (e *Endpoint) Start() { e.inflight.Add(1) }

// End marks the end of a request started with Start, which took latency.
func (e *Endpoint) End(latency time.Duration) {
	e.inflight.Add(-1)
	e.observe(latency)
}

// decay is the time constant of the peak-EWMA latency.
const decay = 10 * time.Second

// observe folds a latency into the peak EWMA: a sample above the average replaces it at once
// (peak), one below decays into it with the time since the last sample.
func (e *Endpoint) observe(latency time.Duration) {
	now := time.Now().UnixNano()
	last := e.lastUpdate.Swap(now)
	old := math.Float64frombits(e.ewmaBits.Load())
	s := float64(latency)
	var v float64
	if s > old || last == 0 {
		v = s
	} else {
		w := math.Exp(-float64(now-last) / float64(decay))
		v = old*w + s*(1-w)
	}
	e.ewmaBits.Store(math.Float64bits(v))
}

// cost is the peak-EWMA score: latency times (in-flight + 1). An endpoint never measured
// costs like its in-flight count alone, so new endpoints get tried.
func (e *Endpoint) cost() float64 {
	l := math.Float64frombits(e.ewmaBits.Load())
	if l == 0 {
		l = 1
	}
	return l * float64(e.inflight.Load()+1)
}

// Healthy reports whether the endpoint is in rotation (not ejected by passive health).
func (e *Endpoint) Healthy(now time.Time) bool {
	u := e.ejectedUntil.Load()
	return u == 0 || now.UnixNano() >= u
}

// Succeeded resets the failure count and returns an ejected endpoint to rotation.
func (e *Endpoint) Succeeded() {
	if e.failures.Load() != 0 {
		e.failures.Store(0)
	}
	if e.ejectedUntil.Load() != 0 {
		e.ejectedUntil.Store(0)
	}
}

// Failed counts a failure (connection refused, timeout); after threshold consecutive ones the
// endpoint is ejected for ejectFor and Failed returns true. After ejectFor it is tried again;
// one more failure ejects it again.
func (e *Endpoint) Failed(threshold int, ejectFor time.Duration, now time.Time) (ejected bool) {
	n := e.failures.Add(1)
	if threshold > 0 && int(n) >= threshold {
		e.ejectedUntil.Store(now.Add(ejectFor).UnixNano())
		e.failures.Store(int32(threshold - 1))
		return true
	}
	return false
}

// Registry holds the Endpoint of each address so state survives table swaps.
type Registry struct {
	mu sync.Mutex
	m  map[string]*Endpoint
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*Endpoint{}} }

// Get returns the Endpoint for addr, creating it when new.
func (r *Registry) Get(addr string) *Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[addr]
	if e == nil {
		e = &Endpoint{Addr: addr}
		r.m[addr] = e
	}
	return e
}

// Forget forgets the addresses in gone. Requests in flight to a forgotten endpoint hold
// their own pointer and finish normally.
func (r *Registry) Forget(gone map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a := range gone {
		delete(r.m, a)
	}
}

// Retain forgets every address not in keep. Requests in flight to a forgotten endpoint hold
// their own pointer and finish normally.
func (r *Registry) Retain(keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a := range r.m {
		if !keep[a] {
			delete(r.m, a)
		}
	}
}
