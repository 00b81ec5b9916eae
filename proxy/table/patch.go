package table

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// patchState is what a table keeps of its build for PatchEndpoints. A patch never changes it:
// it holds only what endpoints cannot change (or what makes PatchEndpoints refuse when they
// would), so a patched table's is its build's.
type patchState struct {
	unmanaged, loopback bool // Sources.AllowUnmanagedSlices, Sources.AllowLoopbackEndpoints
	// ports is the Service port each backend resolved to, by Backend.Key; a backend whose
	// Service or port is missing has none and no endpoints, whatever the slices say.
	ports map[string]corev1.ServicePort
	// refusals is the RefusedEndpoint Problem message of each backend with refused
	// endpoints, by Backend.Key.
	refusals map[string]string
	// ranked holds the keys of the backends of default backends that chooseDefaults ranks
	// against each other (by tier: ready, terminating, nothing).
	ranked map[string]bool
	// services indexes, by Service, its backends and the host rules that lead to them, so
	// that a patch visits those alone, not every host of the table (set by index).
	services map[types.NamespacedName]*serviceRefs
}

// serviceRefs is where a table refers to the backends of one Service.
type serviceRefs struct {
	backends        []int    // indexes in Table.Backends
	exact, wildcard []string // keys in Table.exact and Table.wildcard of host rules with a route to one
	anyHost         bool     // Table.anyHost has one
}

// index fills st.services from the built table t. Host rules are found through the same
// routeBackends that remap.route replaces, so the index and the remap agree on what a route
// refers to.
func (st *patchState) index(t *Table) {
	st.services = map[types.NamespacedName]*serviceRefs{}
	refs := func(id types.NamespacedName) *serviceRefs {
		r := st.services[id]
		if r == nil {
			r = &serviceRefs{}
			st.services[id] = r
		}
		return r
	}
	for i, be := range t.Backends {
		r := refs(be.Service)
		r.backends = append(r.backends, i)
	}
	hosts := func(m map[string]*hostRules, list func(*serviceRefs) *[]string) {
		for h, hr := range m {
			hr.each(func(rt *Route) {
				for _, be := range routeBackends(rt) {
					l := list(refs(be.Service))
					if n := len(*l); n == 0 || (*l)[n-1] != h {
						*l = append(*l, h)
					}
				}
			})
		}
	}
	hosts(t.exact, func(r *serviceRefs) *[]string { return &r.exact })
	hosts(t.wildcard, func(r *serviceRefs) *[]string { return &r.wildcard })
	if t.anyHost != nil {
		t.anyHost.each(func(rt *Route) {
			for _, be := range routeBackends(rt) {
				refs(be.Service).anyHost = true
			}
		})
	}
	for _, r := range st.services { // map order: sorted, so that two builds are equal
		slices.Sort(r.exact)
		r.exact = slices.Compact(r.exact)
		slices.Sort(r.wildcard)
		r.wildcard = slices.Compact(r.wildcard)
	}
}

// each calls f for every route of hr.
func (hr *hostRules) each(f func(*Route)) {
	for _, r := range hr.exact {
		f(r)
	}
	for _, r := range hr.prefixes {
		f(r)
	}
	for _, r := range hr.regexes {
		f(r)
	}
}

// routeBackends lists the backends a route refers to: its own, its canary's, its split's, its
// external authentication service's and its mirrors' (remap.route replaces exactly these); nil
// ones (a refused auth-url) are left out.
func routeBackends(r *Route) []*Backend {
	var out []*Backend
	add := func(be *Backend) {
		if be != nil {
			out = append(out, be)
		}
	}
	add(r.Backend)
	if r.Canary != nil {
		add(r.Canary.Backend)
	}
	for _, w := range r.Split {
		add(w.Backend)
	}
	if ea := r.Options.Policy.ExternalAuth; ea != nil {
		add(ea.Backend)
	}
	for _, mi := range r.Options.Policy.Mirrors {
		add(mi.Backend)
	}
	if ep := r.Options.Policy.ErrorPages; ep != nil {
		add(ep.Backend)
	}
	return out
}

// PatchEndpoints returns a table equal to what a build (ingress.Build, gatewayapi.Translate:
// "Build" below) would make from prev's input with the EndpointSlices of some Services
// replaced: slices holds, for every Service whose slices changed, all of its slices now
// (none: an empty list). prev is not changed (tables are
// immutable: requests in flight keep theirs); the new table shares with it everything the
// change does not touch, so a backend whose endpoints are the same keeps its pointer (the
// data plane keeps its pool) and one whose endpoints changed is a new Backend, referenced
// from every place the old one was.
//
// It reports false, and the caller must Build, when endpoints would change more than
// endpoint lists. Build reads endpoints in three places, and each is checked:
//   - Backend.Endpoints and States: recomputed by the same code (Builder.resolve);
//   - the RefusedEndpoint Problem of a backend (an Event): the patch refuses when its
//     message would differ, so the Problems of a patched table are prev's;
//   - the ranking of default backends (chooseDefaults: ready, then terminating, then none):
//     the patch refuses when the tier of a ranked default backend would change.
//
// Nothing else in Build reads EndpointSlices or endpoints (Gateway tables included: route
// status reads Services, never endpoints). The slices must be given in the order Build would
// see them (Input.Slices order): when two slices list one address, the first describes it.
func PatchEndpoints(prev *Table, slices map[types.NamespacedName][]*discoveryv1.EndpointSlice) (*Table, bool) {
	if prev == nil || prev.patch == nil {
		return nil, false
	}
	st := prev.patch
	b := Builder{src: Sources{AllowUnmanagedSlices: st.unmanaged, AllowLoopbackEndpoints: st.loopback}}
	m := remap{backends: map[*Backend]*Backend{}, routes: map[*Route]*Route{}, auths: map[*ExternalAuth]*ExternalAuth{}}
	var touched []*serviceRefs
	for id, ss := range slices {
		refs := st.services[id]
		if refs == nil {
			continue // no backend of this Service
		}
		n := len(m.backends)
		for _, i := range refs.backends {
			be := prev.Backends[i]
			sp, ok := st.ports[be.Key]
			if !ok {
				continue // no such Service or port: no endpoints either way
			}
			eps, states, refusal := b.resolve(be, ss, &sp)
			if refusal != st.refusals[be.Key] {
				return nil, false
			}
			if equalStrings(eps, be.Endpoints) && equalStates(states, be.States) {
				continue
			}
			nb := *be
			nb.Endpoints, nb.States = eps, states
			if st.ranked[be.Key] && nb.Tier() != be.Tier() {
				return nil, false
			}
			m.backends[be] = &nb
		}
		if len(m.backends) > n {
			touched = append(touched, refs)
		}
	}
	if len(m.backends) == 0 {
		return prev, true
	}
	return m.table(prev, touched), true
}

// equalStrings and equalStates compare like reflect.DeepEqual: nil is not an empty list (a
// patched table must be DeepEqual to a built one).
func equalStrings(a, b []string) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func equalStates(a, b []EndpointState) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// remap copies the parts of a table that reference a replaced backend, and only those. Every
// *Backend a Table holds is reached from here: Route.Backend, Route.Canary.Backend, Route.Split[].Backend,
// Route.Options.Policy.ExternalAuth.Backend, Route.Options.Policy.Mirrors[].Backend (routes in host rules, namespace rules,
// Default and namespace defaults, Gateway listeners), passthrough and Backends.
// TestPatchLeavesNoOldBackend walks every pointer of a patched table to prove it.
type remap struct {
	backends map[*Backend]*Backend // old → new, replaced ones only
	routes   map[*Route]*Route     // old → new, copied ones only (a route is shared: Default is a namespace's default too)
	auths    map[*ExternalAuth]*ExternalAuth
	pages    map[*ErrorPages]*ErrorPages
}

func (m *remap) backend(be *Backend) *Backend {
	if nb, ok := m.backends[be]; ok {
		return nb
	}
	return be
}

func (m *remap) auth(ea *ExternalAuth) *ExternalAuth {
	if ea == nil || ea.Backend == nil {
		return ea
	}
	if n, ok := m.auths[ea]; ok {
		return n
	}
	n := ea
	if nb := m.backend(ea.Backend); nb != ea.Backend {
		c := *ea
		c.Backend = nb
		n = &c
	}
	m.auths[ea] = n
	return n
}

func (m *remap) errorPages(ep *ErrorPages) *ErrorPages {
	if ep == nil || ep.Backend == nil {
		return ep
	}
	if n, ok := m.pages[ep]; ok {
		return n
	}
	n := ep
	if nb := m.backend(ep.Backend); nb != ep.Backend {
		c := *ep
		c.Backend = nb
		n = &c
	}
	if m.pages == nil {
		m.pages = map[*ErrorPages]*ErrorPages{}
	}
	m.pages[ep] = n
	return n
}

// remapEach returns a copy of xs (a route's mirrors or split) whose backends, reached by
// backendOf, are the replaced ones, or nil when none of them was replaced.
func remapEach[T any](m *remap, xs []T, backendOf func(*T) **Backend) []T {
	var out []T
	for i := range xs {
		old := *backendOf(&xs[i])
		if nb := m.backend(old); nb != old {
			if out == nil {
				out = slices.Clone(xs)
			}
			*backendOf(&out[i]) = nb
		}
	}
	return out
}

// route returns r, or a copy of it referencing the replaced backends.
func (m *remap) route(r *Route) *Route {
	if r == nil {
		return nil
	}
	if n, ok := m.routes[r]; ok {
		return n
	}
	be := m.backend(r.Backend)
	var canary *Canary
	if r.Canary != nil {
		canary = r.Canary
		if nb := m.backend(r.Canary.Backend); nb != r.Canary.Backend {
			c := *r.Canary
			c.Backend = nb
			canary = &c
		}
	}
	ea := m.auth(r.Options.Policy.ExternalAuth)
	mirrors := remapEach(m, r.Options.Policy.Mirrors, func(mi *Mirror) **Backend { return &mi.Backend })
	split := remapEach(m, r.Split, func(w *Weighted) **Backend { return &w.Backend })
	pages := m.errorPages(r.Options.Policy.ErrorPages)
	if be == r.Backend && canary == r.Canary && ea == r.Options.Policy.ExternalAuth && mirrors == nil && split == nil && pages == r.Options.Policy.ErrorPages {
		return r
	}
	c := *r
	c.Backend, c.Canary, c.Options.Policy.ExternalAuth, c.Options.Policy.ErrorPages = be, canary, ea, pages
	if mirrors != nil {
		c.Options.Policy.Mirrors = mirrors
	}
	if split != nil {
		c.Split = split
	}
	m.routes[r] = &c
	return &c
}

// hostRules returns hr, or a copy of it with its changed routes.
func (m *remap) hostRules(hr *hostRules) *hostRules {
	if hr == nil {
		return nil
	}
	var c *hostRules
	clone := func() {
		if c == nil {
			cc := *hr
			cc.exact, cc.prefixes, cc.regexes = maps.Clone(hr.exact), slices.Clone(hr.prefixes), slices.Clone(hr.regexes)
			c = &cc
		}
	}
	for k, r := range hr.exact {
		if n := m.route(r); n != r {
			clone()
			c.exact[k] = n
		}
	}
	for i, r := range hr.prefixes {
		if n := m.route(r); n != r {
			clone()
			c.prefixes[i] = n
		}
	}
	for i, r := range hr.regexes {
		if n := m.route(r); n != r {
			clone()
			c.regexes[i] = n
		}
	}
	if c == nil {
		return hr
	}
	return c
}

// hostMap returns hosts, or a copy of it with the changed host rules; only those under keys
// are looked at.
func (m *remap) hostMap(hosts map[string]*hostRules, keys func(*serviceRefs) []string, touched []*serviceRefs) map[string]*hostRules {
	var out map[string]*hostRules
	for _, refs := range touched {
		for _, h := range keys(refs) {
			hr := hosts[h]
			if out != nil {
				hr = out[h] // a host with routes to two changed Services: copy it once
			}
			n := m.hostRules(hr)
			if n == hr {
				continue
			}
			if out == nil {
				out = maps.Clone(hosts)
			}
			out[h] = n
		}
	}
	if out == nil {
		return hosts
	}
	return out
}

// table copies prev with the replaced backends. Host rules are visited through the index of
// the touched Services; the rest (namespaces, defaults, passthrough, a Gateway's listeners) is
// small and walked whole.
func (m *remap) table(prev *Table, touched []*serviceRefs) *Table {
	t := *prev
	t.exact = m.hostMap(prev.exact, func(r *serviceRefs) []string { return r.exact }, touched)
	t.wildcard = m.hostMap(prev.wildcard, func(r *serviceRefs) []string { return r.wildcard }, touched)
	for _, refs := range touched {
		if refs.anyHost {
			t.anyHost = m.hostRules(prev.anyHost)
		}
	}
	t.Default = m.route(prev.Default)
	if prev.ErrorBackend != nil {
		t.ErrorBackend = m.backend(prev.ErrorBackend)
	}
	var nss map[string]*namespaceRules
	for ns, nr := range prev.namespaces {
		hostless, dflt := m.hostRules(nr.anyHost), m.route(nr.dflt)
		if hostless == nr.anyHost && dflt == nr.dflt {
			continue
		}
		if nss == nil {
			nss = maps.Clone(prev.namespaces)
		}
		nss[ns] = &namespaceRules{anyHost: hostless, dflt: dflt}
	}
	if nss != nil {
		t.namespaces = nss
	}
	var pt map[string]*Backend
	for h, be := range prev.passthrough {
		if nb := m.backend(be); nb != be {
			if pt == nil {
				pt = maps.Clone(prev.passthrough)
			}
			pt[h] = nb
		}
	}
	if pt != nil {
		t.passthrough = pt
	}
	t.gateway = m.gateway(prev.gateway)
	t.Backends = make([]*Backend, len(prev.Backends))
	for i, be := range prev.Backends {
		t.Backends[i] = m.backend(be)
	}
	return &t
}

// gateway returns g, or a copy of it with the listeners whose routes changed.
func (m *remap) gateway(g *gatewayTable) *gatewayTable {
	if g == nil {
		return nil
	}
	ports, changed := remapLists(g.ports, func(l *gwListener) (*gwListener, bool) {
		n := m.listener(l)
		return n, n != l
	})
	if !changed {
		return g
	}
	return &gatewayTable{ports: ports}
}

// listener returns l, or a copy of it with the entries whose routes changed.
func (m *remap) listener(l *gwListener) *gwListener {
	hosts, changed := remapLists(l.hosts, func(e gwEntry) (gwEntry, bool) {
		n := m.route(e.r)
		if n == e.r {
			return e, false
		}
		e.r = n
		return e, true
	})
	if !changed {
		return l
	}
	c := *l
	c.hosts = hosts
	return &c
}

// remapLists returns in, or a copy of it in which every list with an element f changes is a
// copy with f's results (copy on write: unchanged lists and the map itself are shared when
// nothing changes), and whether anything changed.
func remapLists[K comparable, V any](in map[K][]V, f func(V) (V, bool)) (map[K][]V, bool) {
	var out map[K][]V
	for k, vs := range in {
		var c []V
		for i, v := range vs {
			if n, changed := f(v); changed {
				if c == nil {
					c = slices.Clone(vs)
				}
				c[i] = n
			}
		}
		if c != nil {
			if out == nil {
				out = maps.Clone(in)
			}
			out[k] = c
		}
	}
	if out == nil {
		return in, false
	}
	return out, true
}
