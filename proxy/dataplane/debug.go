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

// ServeHTTP answers GET /debug/backends?ingress=ns/name: 400 without a valid ingress
// parameter, 503 before the first table, 404 when the Ingress is not in the table (this
// proxy does not own it), else 200 with contract.Backends as JSON.
func (d *Debug) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := strings.Cut(r.URL.Query().Get("ingress"), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		http.Error(w, "want ?ingress=<namespace>/<name>", http.StatusBadRequest)
		return
	}
	id := types.NamespacedName{Namespace: ns, Name: name}
	rt := d.s.current.Load()
	if rt == nil {
		http.Error(w, "no routing table yet", http.StatusServiceUnavailable)
		return
	}
	if !slices.Contains(rt.table.Owned, id) {
		http.Error(w, fmt.Sprintf("this proxy does not serve Ingress %s (not of its IngressClass or namespaces, or not seen yet)", id), http.StatusNotFound)
		return
	}
	out := backendsOf(rt, id, d.now())
	if in := d.last.Load(); in != nil && in.table == rt.table {
		out.Generation, out.Applied = in.gen, in.at
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// backendsOf lists the routes of Ingress id in a compiled table, with live endpoint state.
func backendsOf(rt *router, id types.NamespacedName, now time.Time) contract.Backends {
	out := contract.Backends{Ingress: id.String(), Routes: []contract.BackendRoute{}}
	routes := append(rt.table.Routes(), rt.table.Defaults()...)
	for _, r := range routes {
		if r.Ingress != id {
			continue
		}
		be := r.Backend
		route := contract.BackendRoute{Host: r.Host, Path: r.Path, PathType: r.PathType, Service: be.Service.String(), Port: be.Port,
			Protocol: string(be.Protocol), Balance: be.Balance.String(), Endpoints: []contract.BackendEndpoint{}}
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
	return out
}
