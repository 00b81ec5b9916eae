package dataplane

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/table"
)

// Endpoint freshness per Service, read at scrape time from the table in use:
//
//   - metalgate_proxy_backend_endpoints{namespace,service,state}: the Service's endpoints (of
//     its port with the most) that the proxy routes to ("routed"), routes to but has ejected
//     after failures ("ejected"), and sees in the EndpointSlices but does not route to
//     ("not_routed": not ready, refused);
//   - metalgate_proxy_backend_endpoints_changed_timestamp_seconds{namespace,service}: when the
//     routed endpoints of the Service last changed in the proxy's tables (the first table that
//     had it, else the last change).
//
// Comparing these with the cluster's view (kube-state-metrics' EndpointSlice series, or a
// rollout's time) shows a proxy that routes to endpoints that no longer exist. Labels come from
// the table's Services only.

type endpointSeries struct {
	endpoints, changed *prometheus.Desc
	source             atomic.Pointer[func() backendView] // the server's view; nil: none yet
}

// backendView is what a scrape reads: the router in use and when each backend's endpoints
// last changed (by table.Backend.Key).
type backendView struct {
	r       *router
	changed map[string]time.Time
}

func newEndpointSeries() *endpointSeries {
	return &endpointSeries{
		endpoints: prometheus.NewDesc("metalgate_proxy_backend_endpoints",
			"Pods of each Service the proxy serves, by state: routed, ejected (routed, taken out after failures for a while), not_routed (in the EndpointSlices, not routed: not ready or refused).",
			[]string{"namespace", "service", "state"}, nil),
		changed: prometheus.NewDesc("metalgate_proxy_backend_endpoints_changed_timestamp_seconds",
			"When the endpoints the proxy routes to for the Service last changed in its tables (Unix time).",
			[]string{"namespace", "service"}, nil),
	}
}

func (b *endpointSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.endpoints
	ch <- b.changed
}

func (b *endpointSeries) Collect(ch chan<- prometheus.Metric) {
	f := b.source.Load()
	if f == nil {
		return
	}
	v := (*f)()
	if v.r == nil {
		return
	}
	type svc struct {
		routed, ejected, notRouted int
		changed                    time.Time
	}
	now := time.Now()
	services := map[types.NamespacedName]*svc{}
	for be, p := range v.r.pools {
		if be.Unresolved || be.Service.Name == "" {
			continue
		}
		s := services[be.Service]
		if s == nil {
			s = &svc{}
			services[be.Service] = s
		}
		if c := v.changed[be.Key]; c.After(s.changed) {
			s.changed = c
		}
		// Each backend is one port of the Service (or one policy on it): its endpoints are
		// the pods serving that port. The Service's count is its largest port's.
		ejected := 0
		for _, e := range p.eps {
			if !e.Healthy(now) {
				ejected++
			}
		}
		notRouted := 0
		for _, st := range be.States {
			if _, routed := slices.BinarySearch(be.Endpoints, st.Addr); !routed {
				notRouted++
			}
		}
		s.routed, s.ejected, s.notRouted = max(s.routed, len(be.Endpoints)), max(s.ejected, ejected), max(s.notRouted, notRouted)
	}
	for name, s := range services {
		for state, n := range map[string]int{"routed": s.routed, "ejected": s.ejected, "not_routed": s.notRouted} {
			ch <- prometheus.MustNewConstMetric(b.endpoints, prometheus.GaugeValue, float64(n), name.Namespace, name.Name, state)
		}
		if !s.changed.IsZero() {
			ch <- prometheus.MustNewConstMetric(b.changed, prometheus.GaugeValue, float64(s.changed.UnixMilli())/1e3, name.Namespace, name.Name)
		}
	}
}

// endpointChanges remembers, by backend key, when each backend's endpoints last changed.
// Swap tells it the pools it added and removed (a patched table replaces only the backends
// whose endpoints changed), so a swap costs what it changed, not the table's size.
type endpointChanges struct {
	mu sync.Mutex
	at map[string]time.Time
}

// update records a swap at now: a backend added with endpoints that no removed backend of the
// same key had changed at now; a key that only left is forgotten.
func (c *endpointChanges) update(added, removed []*pool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]time.Time{}
	}
	gone := make(map[string]*table.Backend, len(removed))
	for _, p := range removed {
		gone[p.backend.Key] = p.backend
	}
	for _, p := range added {
		be := p.backend
		old, had := gone[be.Key]
		delete(gone, be.Key)
		if _, known := c.at[be.Key]; had && known && slices.Equal(old.Endpoints, be.Endpoints) {
			continue // the same endpoints under a rebuilt table
		}
		c.at[be.Key] = now
	}
	for key := range gone {
		delete(c.at, key)
	}
}

// snapshot is the map as of now, for a scrape.
func (c *endpointChanges) snapshot() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.at))
	for k, v := range c.at {
		out[k] = v
	}
	return out
}
