package gatewayapi

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// The endpoint-only fast path must be a build: whenever PatchEndpoints accepts a change, its
// table is reflect.DeepEqual to Build of the changed input, with the same Problems, the table
// it patched is unchanged, and no pointer of the new table leads to a replaced backend.

var (
	patchNamespaces = []string{"a", "b", "c"}
	patchServices   = []string{"s0", "s1", "s2", "s3"}
	// patchAddrs are few, so that slices of one Service list the same address twice; the
	// last ones are always refused (loopback, the metadata service) or not IPv4.
	patchAddrs = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "127.0.0.1", "169.254.169.254", "fe80::1", "10.0.0.01"}
)

// patchSlices makes 0–2 random EndpointSlices for Service ns/name; now and then one is not
// managed by the endpoint-slice controller, or lists the other port ("admin") only.
func patchSlices(rng *rand.Rand, ns, name string, gen int) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for i, n := 0, rng.Intn(3); i < n; i++ {
		s := slice(name, fmt.Sprintf("%s-%d-%d", name, gen, i), 8080)
		s.Namespace = ns
		switch rng.Intn(8) {
		case 0:
			delete(s.Labels, discoveryv1.LabelManagedBy)
		case 1:
			s.Ports[0].Name = ptr("admin")
		}
		for j, m := 0, rng.Intn(4); j < m; j++ {
			addr := patchAddrs[rng.Intn(5)]
			if rng.Intn(6) == 0 {
				addr = patchAddrs[5+rng.Intn(len(patchAddrs)-5)]
			}
			e := discoveryv1.Endpoint{Addresses: []string{addr}}
			if rng.Intn(5) > 0 { // else nil: unknown, which counts as ready
				e.Conditions.Ready = ptr(rng.Intn(3) > 0)
				e.Conditions.Serving = ptr(rng.Intn(2) == 0)
				e.Conditions.Terminating = ptr(rng.Intn(3) == 0)
			}
			s.Endpoints = append(s.Endpoints, e)
		}
		out = append(out, s)
	}
	return out
}

// patchGatewayWorld makes a random Gateway input: routes on the test Gateway's listeners
// with one backend, two weighted ones (a canary) or three (a split), some in other namespaces, some missing,
// half of the rules with a mirror; and up to two GRPCRoutes.
func patchGatewayWorld(rng *rand.Rand) Input {
	var routes []*gatewayv1.HTTPRoute
	sections := []string{"http", "same", "sel", "foo", "wild", ""}
	hosts := [][]string{nil, {"foo.example.com"}, {"*.example.com"}, {"a.example.com", "b.example.com"}}
	svcs := append(patchServices[:len(patchServices):len(patchServices)], "gone")
	for i, n := 0, 2+rng.Intn(6); i < n; i++ {
		ns := patchNamespaces[rng.Intn(len(patchNamespaces))]
		var rules []gatewayv1.HTTPRouteRule
		for j, m := 0, 1+rng.Intn(2); j < m; j++ {
			rule := gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
				Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(fmt.Sprintf("/p%d", j))}}}}
			for k, o := 0, 1+rng.Intn(3); k < o; k++ {
				rule.BackendRefs = append(rule.BackendRefs, backendRef("", svcs[rng.Intn(len(svcs))], 80, int32(1+rng.Intn(3))))
			}
			if rng.Intn(2) == 0 { // a mirror: its backend is patched like the others
				rule.Filters = append(rule.Filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror,
					RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendRef("", svcs[rng.Intn(len(svcs))], 80, -1).BackendObjectReference}})
			}
			rules = append(rules, rule)
		}
		routes = append(routes, httpRoute(ns, fmt.Sprintf("r%d", i), rng.Intn(5), []parent{{ns: "a", name: "gw", section: sections[rng.Intn(len(sections))]}},
			hosts[rng.Intn(len(hosts))], rules...))
	}
	var grpcRoutes []*gatewayv1.GRPCRoute
	for i, n := 0, rng.Intn(3); i < n; i++ { // GRPCRoutes: h2c backends of the same Services
		var refs []gatewayv1.GRPCBackendRef
		for k, o := 0, 1+rng.Intn(3); k < o; k++ {
			refs = append(refs, grpcBackend("", svcs[rng.Intn(len(svcs))], int32(1+rng.Intn(3))))
		}
		ns := patchNamespaces[rng.Intn(len(patchNamespaces))]
		grpcRoutes = append(grpcRoutes, grpcRoute(ns, fmt.Sprintf("g%d", i), rng.Intn(5), []parent{{ns: "a", name: "gw", section: sections[rng.Intn(len(sections))]}},
			hosts[rng.Intn(len(hosts))], gatewayv1.GRPCRouteRule{Matches: []gatewayv1.GRPCRouteMatch{{Method: &gatewayv1.GRPCMethodMatch{Service: ptr(fmt.Sprintf("s%d", i))}}}, BackendRefs: refs}))
	}
	in := Input{Gateway: testGateway(), HTTPRoutes: routes, GRPCRoutes: grpcRoutes}
	in.Gateway.Namespace = "a"
	for _, ns := range patchNamespaces {
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": ns}}})
		for _, name := range patchServices {
			in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
			in.Slices = append(in.Slices, patchSlices(rng, ns, name, 0)...)
		}
	}
	return in
}

// changeEndpoints replaces the slices of 1–2 random Services (one of them sometimes a
// Service no route names) and returns the new input and the argument of PatchEndpoints.
func changeEndpoints(rng *rand.Rand, in Input, gen int) (Input, map[types.NamespacedName][]*discoveryv1.EndpointSlice) {
	changed := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for i, n := 0, 1+rng.Intn(2); i < n; i++ {
		id := types.NamespacedName{Namespace: patchNamespaces[rng.Intn(len(patchNamespaces))], Name: append(patchServices, "other")[rng.Intn(len(patchServices)+1)]}
		changed[id] = nil
	}
	after := in
	after.Slices = nil
	for _, s := range in.Slices {
		id := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		if _, ok := changed[id]; !ok {
			after.Slices = append(after.Slices, s)
			continue
		}
		if rng.Intn(3) == 0 { // keep this one as it was, change the others
			after.Slices = append(after.Slices, s)
			changed[id] = append(changed[id], s)
		}
	}
	for id := range changed {
		for _, s := range patchSlices(rng, id.Namespace, id.Name, gen) {
			after.Slices = append(after.Slices, s)
			changed[id] = append(changed[id], s)
		}
	}
	return after, changed
}

// backendsReachable returns every *Backend reachable from v, following every pointer, map,
// slice and struct field (unexported ones too): an audit of the table that needs no list of
// where backends are kept.
func backendsReachable(v any) map[*table.Backend]bool {
	out := map[*table.Backend]bool{}
	seen := map[uintptr]bool{}
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			if v.Type() == reflect.TypeOf((*table.Backend)(nil)) {
				out[(*table.Backend)(v.UnsafePointer())] = true
			}
			walk(v.Elem())
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(v))
	return out
}

// checkBackendsListed fails unless every backend reachable in tab is one of tab.Backends
// (or an unresolved Gateway backendRef, which has no endpoints): a route leading to a
// backend the list does not hold would be served from a stale pool, or none.
func checkBackendsListed(t *testing.T, what string, tab *table.Table) {
	t.Helper()
	listed := map[*table.Backend]bool{}
	for _, be := range tab.Backends {
		listed[be] = true
	}
	for be := range backendsReachable(tab) {
		if !listed[be] && !be.Unresolved {
			t.Fatalf("%s: backend %s (endpoints %v) is reachable but not in Backends", what, be.Key, be.Endpoints)
		}
	}
}

func TestPatchEndpointsEqualsBuild(t *testing.T) {
	worlds := []struct {
		name string
		make func(*rand.Rand) Input
	}{
		{"gateway", patchGatewayWorld},
	}
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			patched, refused, replaced := 0, 0, 0
			for seed := int64(1); seed <= 400; seed++ {
				rng := rand.New(rand.NewSource(seed))
				in := w.make(rng)
				if seed%2 == 0 {
					in.AllowUnmanagedSlices = true
				}
				if seed%3 == 0 {
					in.AllowLoopbackEndpoints = true
				}
				prev, prevProblems := build(in)
				checkBackendsListed(t, fmt.Sprintf("seed %d: Build", seed), prev)
				for step := 1; step <= 4; step++ {
					after, changed := changeEndpoints(rng, in, step)
					want, wantProblems := build(after)
					got, ok := table.PatchEndpoints(prev, changed)
					if again, _ := build(in); !reflect.DeepEqual(prev, again) {
						t.Fatalf("seed %d step %d: PatchEndpoints changed the table it patched", seed, step)
					}
					if !ok {
						refused++
						// A refusal is for a reason the patch names: the Problems (a refusal
						// message) or a ranked default backend's tier would change.
						if reflect.DeepEqual(prevProblems, wantProblems) && reflect.DeepEqual(prev.Defaults(), want.Defaults()) && !tierChanged(prev, want) {
							t.Fatalf("seed %d step %d: patch refused a change that alters only endpoint lists: %v", seed, step, changed)
						}
						prev, prevProblems, in = want, wantProblems, after
						continue
					}
					patched++
					if got != prev {
						replaced++
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d step %d: patched table differs from Build (changed %v)\n%s", seed, step, keys(changed), diffBackends(got, want))
					}
					if !reflect.DeepEqual(prevProblems, wantProblems) {
						t.Fatalf("seed %d step %d: patch accepted, but the Problems change:\nbefore %v\nafter  %v", seed, step, prevProblems, wantProblems)
					}
					checkBackendsListed(t, fmt.Sprintf("seed %d step %d: patch", seed, step), got)
					old := map[*table.Backend]bool{}
					for _, be := range prev.Backends {
						old[be] = true
					}
					for _, be := range got.Backends {
						delete(old, be)
					}
					for be := range backendsReachable(got) {
						if old[be] {
							t.Fatalf("seed %d step %d: patched table still leads to replaced backend %s", seed, step, be.Key)
						}
					}
					prev, in = got, after
				}
			}
			t.Logf("%d patches (%d replaced a backend), %d refused", patched, replaced, refused)
			if patched < 200 || replaced < 100 || refused < 10 {
				t.Fatalf("the generator exercises too little: %d patches (%d replaced a backend), %d refused", patched, replaced, refused)
			}
		})
	}
}

// tierChanged reports whether a backend of the same key ranks differently (tier) in a and b.
func tierChanged(a, b *table.Table) bool {
	tiers := map[string]int{}
	for _, be := range a.Backends {
		tiers[be.Key] = be.Tier()
	}
	for _, be := range b.Backends {
		if t, ok := tiers[be.Key]; ok && t != be.Tier() {
			return true
		}
	}
	return false
}

func keys(m map[types.NamespacedName][]*discoveryv1.EndpointSlice) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}

// diffBackends describes the first backend whose endpoints differ between got and want,
// or the first route whose backend's endpoints do.
func diffBackends(got, want *table.Table) string {
	for i := range min(len(got.Backends), len(want.Backends)) {
		g, w := got.Backends[i], want.Backends[i]
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("backend %s:\n got  %+v\n want %+v", g.Key, *g, *w)
		}
	}
	gr, wr := got.Routes(), want.Routes()
	for i := range min(len(gr), len(wr)) {
		if !reflect.DeepEqual(gr[i], wr[i]) {
			return fmt.Sprintf("route %s %s:\n got  %+v\n want %+v", gr[i].Host, gr[i].Path, *gr[i], *wr[i])
		}
	}
	return "(backends and routes equal; elsewhere)"
}
