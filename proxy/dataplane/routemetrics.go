package dataplane

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/proxy/table"
)

// Per-route metrics. Every label value comes from the routing table (the route's namespace,
// kind and name, its backend's Service) or from a fixed set (method, status code): a request
// for a host or path no route takes counts under the one empty label set, so nothing a
// client sends can create a series. The series of a table are resolved when it is swapped in
// (seriesFor), so a request does not hash label values: it finds its route's series by
// pointer and its (method, code) counter in a short list.

// routeLabelNames are the labels that name a route in every per-route metric.
var routeLabelNames = [...]string{"namespace", "source_kind", "source", "service"}

// routeLabelValues are the values of routeLabelNames; all empty: no route.
type routeLabelValues [len(routeLabelNames)]string

// routeLabels is the identity of a route for metrics and the access log: the namespace, kind
// (Ingress, HTTPRoute or GRPCRoute) and name of the object that defined it. It is the only
// place that reads a route's identity.
func routeLabels(r *table.Route) (namespace, kind, name string) {
	if r.Source.Name == "" {
		return "", "", "" // the proxy's own default backend (--default-backend-service)
	}
	return r.Source.Namespace, r.Source.Kind, r.Source.Name
}

// seriesLabels are the label values of route r sending to backend be: the Service is named
// alone when it is in the route's namespace, else as namespace/name (a ReferenceGrant).
func seriesLabels(r *table.Route, be *table.Backend) routeLabelValues {
	ns, kind, name := routeLabels(r)
	svc := ""
	if be != nil && be.Service.Name != "" {
		svc = be.Service.Name
		if be.Service.Namespace != ns {
			svc = be.Service.Namespace + "/" + be.Service.Name
		}
	}
	return routeLabelValues{ns, kind, name, svc}
}

// methods are the method label's values; any other method counts as OTHER.
var methods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace, "OTHER"}

func methodIndex(m string) int {
	for i, v := range methods[:len(methods)-1] {
		if m == v {
			return i
		}
	}
	return len(methods) - 1
}

// codeLabel is the code label of status: the exact code from 100 to 599, else "other".
func codeLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

// routeSeries holds the metrics of one label set (a route and a backend of it; routes with
// the same labels share one).
type routeSeries struct {
	m      *Metrics
	labels routeLabelValues
	// duration … upstreamTotal are the histograms' children for labels.
	duration, requestSize, responseSize               prometheus.Observer
	upstreamConnect, upstreamFirstByte, upstreamTotal prometheus.Observer
	// codes holds, per method, the request counters of the codes seen so far: a list read
	// without a lock and replaced (under mu) when a new code comes.
	codes [len(methods)]atomic.Pointer[[]codeCounter]
	mu    sync.Mutex
}

type codeCounter struct {
	code int
	c    prometheus.Counter
}

func (m *Metrics) newSeries(l routeLabelValues) *routeSeries {
	return &routeSeries{m: m, labels: l,
		duration: m.duration.WithLabelValues(l[:]...), requestSize: m.requestSize.WithLabelValues(l[:]...),
		responseSize: m.responseSize.WithLabelValues(l[:]...), upstreamConnect: m.upstreamConnect.WithLabelValues(l[:]...),
		upstreamFirstByte: m.upstreamFirstByte.WithLabelValues(l[:]...), upstreamTotal: m.upstreamTotal.WithLabelValues(l[:]...)}
}

// request counts one request.
func (rs *routeSeries) request(method string, status int) {
	mi := methodIndex(method)
	if p := rs.codes[mi].Load(); p != nil {
		for _, cc := range *p {
			if cc.code == status {
				cc.c.Inc()
				return
			}
		}
	}
	rs.mu.Lock()
	var list []codeCounter
	if p := rs.codes[mi].Load(); p != nil {
		list = *p
	}
	var c prometheus.Counter
	for _, cc := range list {
		if cc.code == status {
			c = cc.c
		}
	}
	if c == nil {
		l := rs.labels
		c = rs.m.requests.WithLabelValues(l[0], l[1], l[2], l[3], methods[mi], codeLabel(status))
		list = append(list[:len(list):len(list)], codeCounter{code: status, c: c})
		rs.codes[mi].Store(&list)
	}
	rs.mu.Unlock()
	c.Inc()
}

// tableSeries are the series of a compiled table, by route and backend.
type tableSeries struct {
	byRoute map[*table.Route][]backendSeries
	byLabel map[routeLabelValues]*routeSeries
}

type backendSeries struct {
	be *table.Backend
	rs *routeSeries
}

// compileSeries resolves the series of every route of t and each of its backends, keeping
// prev's series where the labels are the same, and deletes the series of label sets t no
// longer has (a deleted Ingress's series go with it).
func (m *Metrics) compileSeries(t *table.Table, prev *tableSeries) *tableSeries {
	ts := &tableSeries{byRoute: map[*table.Route][]backendSeries{}, byLabel: map[routeLabelValues]*routeSeries{}}
	add := func(r *table.Route) {
		if r == nil || ts.byRoute[r] != nil {
			return
		}
		var list []backendSeries
		for _, be := range routeTargets(r) {
			l := seriesLabels(r, be)
			rs := ts.byLabel[l]
			if rs == nil && prev != nil {
				rs = prev.byLabel[l]
			}
			if rs == nil {
				rs = m.newSeries(l)
			}
			ts.byLabel[l] = rs
			list = append(list, backendSeries{be: be, rs: rs})
		}
		ts.byRoute[r] = list
	}
	for _, r := range t.Routes() {
		add(r)
	}
	for _, r := range t.Defaults() {
		add(r)
	}
	if prev != nil {
		for l := range prev.byLabel {
			if ts.byLabel[l] == nil {
				m.deleteSeries(l)
			}
		}
	}
	return ts
}

// routeTargets lists the backends a request of r may be sent to: its own, its canary's and
// its split's (never nil entries).
func routeTargets(r *table.Route) []*table.Backend {
	out := []*table.Backend{r.Backend}
	if r.Canary != nil && r.Canary.Backend != nil {
		out = append(out, r.Canary.Backend)
	}
	for _, w := range r.Split {
		if w.Backend != nil {
			out = append(out, w.Backend)
		}
	}
	return out
}

func (m *Metrics) deleteSeries(l routeLabelValues) {
	match := prometheus.Labels{}
	for i, n := range routeLabelNames {
		match[n] = l[i]
	}
	m.requests.DeletePartialMatch(match)
	for _, h := range []*prometheus.HistogramVec{m.duration, m.requestSize, m.responseSize, m.upstreamConnect, m.upstreamFirstByte, m.upstreamTotal} {
		h.Delete(match)
	}
}

// seriesFor returns the series of route r sending to backend be (r nil: no route). A route
// the table's compile did not see (it should not happen) gets its series the slow way.
func (m *Metrics) seriesFor(ts *tableSeries, r *table.Route, be *table.Backend) *routeSeries {
	if r == nil {
		return m.unrouted
	}
	if ts != nil {
		for _, bs := range ts.byRoute[r] {
			if bs.be == be {
				return bs.rs
			}
		}
	}
	return m.newSeries(seriesLabels(r, be))
}

// routeIdentity is the route and Service a request was counted under (its series), else
// what it was routed to so far; all empty when no route took it. The access log and the
// request's span name it the same way.
func (a *attempt) routeIdentity() routeLabelValues {
	switch {
	case a.series != nil:
		return a.series.labels
	case a.route != nil && a.pool != nil:
		return seriesLabels(a.route, a.pool.backend)
	case a.route != nil:
		return seriesLabels(a.route, a.route.Backend)
	}
	return routeLabelValues{}
}
