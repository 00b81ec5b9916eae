package controlplane

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Freshness tracks, per watched kind, when the proxy last heard from the API server (a watch
// event or a successful list) and since when the watch has been failing. The proxy is ready
// while no watch has been failing for longer than the bound; the data plane keeps serving the
// last good table either way.
type Freshness struct {
	mu    sync.Mutex
	bound time.Duration
	now   func() time.Time
	kinds map[string]*kindState
}

type kindState struct {
	lastOK      time.Time
	brokenSince time.Time
	lastErr     string
}

// KindFreshness is one kind's state at a moment.
type KindFreshness struct {
	Kind   string
	Age    time.Duration // since the last event or successful list
	Broken bool
}

// NewFreshness tracks kinds; Ready fails when one has been broken for longer than bound.
func NewFreshness(bound time.Duration, kinds ...string) *Freshness {
	f := &Freshness{bound: bound, now: time.Now, kinds: map[string]*kindState{}}
	start := f.now()
	for _, k := range kinds {
		f.kinds[k] = &kindState{lastOK: start}
	}
	return f
}

// OK records an event or a successful list of kind: the watch works.
func (f *Freshness) OK(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.kind(kind)
	k.lastOK = f.now()
	k.brokenSince = time.Time{}
}

// Forget stops tracking kind: one that turned out not to be watched.
func (f *Freshness) Forget(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.kinds, kind)
}

// Failed records a failed watch or list of kind.
func (f *Freshness) Failed(kind string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.kind(kind)
	if k.brokenSince.IsZero() {
		k.brokenSince = f.now()
	}
	k.lastErr = err.Error()
}

func (f *Freshness) kind(kind string) *kindState {
	k := f.kinds[kind]
	if k == nil {
		k = &kindState{lastOK: f.now()}
		f.kinds[kind] = k
	}
	return k
}

// Ready returns nil, or why the view is stale: a watch failing for longer than the bound.
func (f *Freshness) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var stale []string
	for name, k := range f.kinds {
		if !k.brokenSince.IsZero() && now.Sub(k.brokenSince) > f.bound {
			stale = append(stale, fmt.Sprintf("%s (failing for %s: %s)", name, now.Sub(k.brokenSince).Round(time.Second), k.lastErr))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	sort.Strings(stale)
	return fmt.Errorf("stale view of %v", stale)
}

// Snapshot returns every kind's state, sorted by kind.
func (f *Freshness) Snapshot() []KindFreshness {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	out := make([]KindFreshness, 0, len(f.kinds))
	for name, k := range f.kinds {
		out = append(out, KindFreshness{Kind: name, Age: now.Sub(k.lastOK), Broken: !k.brokenSince.IsZero()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
