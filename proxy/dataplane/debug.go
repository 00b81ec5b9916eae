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

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// DebugBackendsPath is where the admin listener serves the live routes of one Ingress:
// GET /debug/backends?ingress=<namespace>/<name>. kubectl metalgate backends reads it.
const DebugBackendsPath = "/debug/backends"

// Backends is the answer of DebugBackendsPath: the routes of one Ingress in the table the
// proxy serves now, with what the data plane knows about each endpoint.
type Backends struct {
	Ingress string `json:"ingress"` // namespace/name
	// Generation counts the tables installed since the proxy started (1 is the first);
	// Applied is when this one was installed. Both are zero when unknown.
	Generation uint64    `json:"generation"`
	Applied    time.Time `json:"applied"`
	Routes     []Route   `json:"routes"`
}

// Route is one rule of the Ingress as the proxy routes it.
type Route struct {
	Host     string `json:"host"`     // "" for any host
	Path     string `json:"path"`     // normalised: "/foo/" of a Prefix rule is "/foo"
	PathType string `json:"pathType"` // Exact, Prefix, ImplementationSpecific; Default for spec.defaultBackend
	Service  string `json:"service"`  // namespace/name
	Port     string `json:"port"`     // the Ingress's port: a number or a name
	Protocol string `json:"protocol"`
	Balance  string `json:"balance"`
	// Endpoints are every endpoint of the Service port in its EndpointSlices, sorted by
	// address; Routed says whether requests go to it.
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one backend address: its EndpointSlice conditions and the data plane's view.
type Endpoint struct {
	Address     string `json:"address"` // ip:port
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	// Routed: the balancer picks it (ready, or serving while no endpoint is ready).
	Routed bool `json:"routed"`
	// Healthy: not ejected by passive health checks. Meaningful only when Routed.
	Healthy  bool  `json:"healthy"`
	InFlight int64 `json:"inFlight"`
	// Refused says why the address is never routed: not a pod IP (loopback, link-local,
	// ...) or from an EndpointSlice that is not trusted. Empty when it may be.
	Refused string `json:"refused,omitempty"`
}

// Debug installs tables into a Server, counting them, and serves DebugBackendsPath from the
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
	return AdminRoute{Pattern: "GET " + DebugBackendsPath, Handler: d}
}

// ServeHTTP answers GET /debug/backends?ingress=ns/name: 400 without a valid ingress
// parameter, 503 before the first table, 404 when the Ingress is not in the table (this
// proxy does not own it), else 200 with Backends as JSON.
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
func backendsOf(rt *router, id types.NamespacedName, now time.Time) Backends {
	out := Backends{Ingress: id.String(), Routes: []Route{}}
	routes := append(rt.table.Routes(), rt.table.Defaults()...)
	for _, r := range routes {
		if r.Ingress != id {
			continue
		}
		be := r.Backend
		route := Route{Host: r.Host, Path: r.Path, PathType: r.PathType, Service: be.Service.String(), Port: be.Port,
			Protocol: string(be.Protocol), Balance: be.Balance.String(), Endpoints: []Endpoint{}}
		live := map[string]*balancer.Endpoint{}
		if p := rt.pools[be]; p != nil {
			for _, e := range p.eps {
				live[e.Addr] = e
			}
		}
		for _, st := range be.States {
			e := Endpoint{Address: st.Addr, Ready: st.Ready, Serving: st.Serving, Terminating: st.Terminating, Refused: st.Refused}
			if le := live[st.Addr]; le != nil {
				e.Routed, e.Healthy, e.InFlight = true, le.Healthy(now), le.InFlight()
			}
			route.Endpoints = append(route.Endpoints, e)
		}
		out.Routes = append(out.Routes, route)
	}
	return out
}
