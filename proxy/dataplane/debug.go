package dataplane

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// Debug installs tables into a Server, counting them, and serves contract.DebugBackendsPath from the
// table in use. Pass its Swap where the Server's would go (the control plane's Options.Swap).
type Debug struct {
	s    *Server
	gen  atomic.Uint64
	last atomic.Pointer[installed]
	now  func() time.Time
}

// installed is a table with its generation and install time.
type installed struct {
	table *table.Table
	gen   uint64
	at    time.Time
}

// NewDebug returns a Debug for s.
func NewDebug(s *Server) *Debug { return &Debug{s: s, now: time.Now} }

// Swap installs t in the Server and records its generation and time. Calls are serialised
// by the caller (the control plane swaps from one goroutine).
func (d *Debug) Swap(t *table.Table) {
	d.s.Swap(t)
	d.last.Store(&installed{table: t, gen: d.gen.Add(1), at: d.now()})
}

// Route returns the admin route of the handler.
func (d *Debug) Route() AdminRoute {
	return AdminRoute{Pattern: "GET " + contract.DebugBackendsPath, Handler: d}
}

// ServeHTTP answers GET /debug/backends?ingress=ns/name, ?httproute=ns/name or
// ?grpcroute=ns/name: 400 without exactly one valid parameter, 503 before the first table,
// 404 when this proxy does not serve the object (an Ingress not in its table; a route in an
// Ingress proxy's table, or one whose parentRefs do not name this proxy's Gateway), else 200
// with contract.Backends as JSON. A route that names the Gateway but attached to no listener
// has no routes.
func (d *Debug) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind, param, given := "Ingress", "ingress", 0
	for _, k := range []struct{ kind, param string }{{"Ingress", "ingress"}, {table.KindHTTPRoute, "httproute"}, {table.KindGRPCRoute, "grpcroute"}} {
		if q.Has(k.param) {
			kind, param, given = k.kind, k.param, given+1
		}
	}
	ns, name, ok := strings.Cut(q.Get(param), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") || given > 1 {
		http.Error(w, "want ?ingress=<namespace>/<name>, ?httproute=<namespace>/<name> or ?grpcroute=<namespace>/<name>", http.StatusBadRequest)
		return
	}
	id := types.NamespacedName{Namespace: ns, Name: name}
	rt := d.s.current.Load()
	if rt == nil {
		http.Error(w, "no routing table yet", http.StatusServiceUnavailable)
		return
	}
	if msg := notServed(rt.table, kind, id); msg != "" {
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	out := backendsOf(rt, kind, id, d.now())
	if in := d.last.Load(); in != nil && in.table == rt.table {
		out.Generation, out.Applied = in.gen, in.at
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// notServed says why the table does not serve the Ingress, HTTPRoute or GRPCRoute id, or ""
// when it does.
func notServed(t *table.Table, kind string, id types.NamespacedName) string {
	switch {
	case kind == "Ingress" && t.Gateway != nil:
		return fmt.Sprintf("this proxy does not serve Ingress %s (it is a Gateway's proxy)", id)
	case kind == "Ingress" && !slices.Contains(t.Owned, id):
		return fmt.Sprintf("this proxy does not serve Ingress %s (not of its IngressClass or namespaces, or not seen yet)", id)
	case kind == "Ingress":
	case t.Gateway == nil:
		return fmt.Sprintf("this proxy does not serve %s %s (it serves Ingresses, no Gateway)", kind, id)
	case !slices.ContainsFunc(t.Gateway.Routes, func(rs table.RouteStatus) bool { return rs.Kind == kind && rs.Route == id }):
		return fmt.Sprintf("this proxy does not serve %s %s (no parentRef of it names this proxy's Gateway, or not seen yet)", kind, id)
	}
	return ""
}

// backendsOf lists the routes of Ingress or HTTPRoute id in a compiled table, with live
// endpoint state; a weighted split is two routes, each with its share.
func backendsOf(rt *router, kind string, id types.NamespacedName, now time.Time) contract.Backends {
	out := contract.Backends{Routes: []contract.BackendRoute{}}
	of := func(r *table.Route) bool {
		return r.Source == table.SourceRef{Kind: table.KindIngress, NamespacedName: id}
	}
	switch kind {
	case table.KindHTTPRoute, table.KindGRPCRoute:
		if kind == table.KindHTTPRoute {
			out.HTTPRoute = id.String()
		} else {
			out.GRPCRoute = id.String()
		}
		of = func(r *table.Route) bool { return r.Source == table.SourceRef{Kind: kind, NamespacedName: id} }
	default:
		out.Ingress = id.String()
	}
	seen := map[string]bool{} // a Gateway route attached to two listeners is one row
	add := func(r *table.Route, be *table.Backend, weight int) {
		key := fmt.Sprint(r.Host, "|", r.Path, "|", r.PathType, "|", be.Key, "|", weight)
		if seen[key] {
			return
		}
		seen[key] = true
		route := contract.BackendRoute{Host: r.Host, Path: r.Path, PathType: r.PathType, Service: be.Service.String(), Port: be.Port,
			Protocol: string(be.Protocol), Balance: be.Balance.String(), Weight: weight, Unresolved: be.Unresolved, Endpoints: []contract.BackendEndpoint{}}
		if be.Unresolved {
			route.Service = ""
		}
		live := map[string]*balancer.Endpoint{}
		if p := rt.pools[be]; p != nil {
			for _, e := range p.eps {
				live[e.Addr] = e
			}
		}
		for _, st := range be.States {
			e := contract.BackendEndpoint{Address: st.Addr, Ready: st.Ready, Serving: st.Serving, Terminating: st.Terminating, Refused: st.Refused}
			if le := live[st.Addr]; le != nil {
				e.Routed, e.Healthy, e.InFlight = true, le.Healthy(now), le.InFlight()
			}
			route.Endpoints = append(route.Endpoints, e)
		}
		out.Routes = append(out.Routes, route)
	}
	for _, r := range append(rt.table.Routes(), rt.table.Defaults()...) {
		if !of(r) || r.Backend == nil {
			continue
		}
		if len(r.Split) > 0 {
			total := 0
			for _, w := range r.Split {
				total += w.Weight
			}
			for _, w := range r.Split {
				add(r, w.Backend, w.Weight*100/total)
			}
			continue
		}
		if c := r.Canary; kind != "Ingress" && c != nil && c.Backend != nil && c.WeightTotal > 0 {
			share := c.Weight * 100 / c.WeightTotal
			add(r, r.Backend, 100-share)
			add(r, c.Backend, share)
			continue
		}
		add(r, r.Backend, 0)
	}
	return out
}
