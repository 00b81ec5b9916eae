package ingress

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/internal/testenv"
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

// patchIngressWorld makes a random Ingress input: hosts, wildcards, host-less rules, Exact,
// Prefix and regex paths, default backends in several namespaces, canaries, passthrough, TLS,
// external authentication and error pages (backends in a policy), the proxy's own default
// backend, balancing policies, and a missing Service.
func patchIngressWorld(rng *rand.Rand, certPEM, keyPEM []byte) Input {
	in := Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, SSLPassthrough: true}
	hosts := []string{"x.example.com", "y.example.com", "*.example.com", "", "z.test"}
	paths := []string{"/", "/api", "/a/b"}
	svcs := append(patchServices[:len(patchServices):len(patchServices)], "gone")
	for i, n := 0, 3+rng.Intn(8); i < n; i++ {
		ns := patchNamespaces[rng.Intn(len(patchNamespaces))]
		var ps []path
		for j, m := 0, 1+rng.Intn(3); j < m; j++ {
			pt := []string{"Prefix", "Exact", "ImplementationSpecific"}[rng.Intn(3)]
			ps = append(ps, path{hosts[rng.Intn(len(hosts))], paths[rng.Intn(len(paths))], pt, svcs[rng.Intn(len(svcs))]})
		}
		ing := nsIngress(ns, fmt.Sprintf("ing%d", i), rng.Intn(5), ps...)
		ing.Annotations = map[string]string{}
		switch rng.Intn(10) {
		case 0, 1:
			ing.Annotations[PrefixMetalgate+"canary"] = "true"
			ing.Annotations[PrefixMetalgate+"canary-weight"] = "30"
		case 2:
			ing.Annotations[PrefixMetalgate+"use-regex"] = "true"
			ing.Spec.Rules[0].HTTP.Paths[0].Path = "/r[0-9]+"
		case 3:
			ing.Annotations[PrefixMetalgate+"ssl-passthrough"] = "true"
		case 4:
			authNS := ns
			if rng.Intn(3) == 0 { // another namespace: refused, the policy has no backend
				authNS = patchNamespaces[rng.Intn(len(patchNamespaces))]
			}
			ing.Annotations[PrefixMetalgate+"auth-url"] = fmt.Sprintf("http://%s.%s.svc/check", svcs[rng.Intn(len(svcs))], authNS)
		case 5:
			ing.Annotations[AnnotationLoadBalance] = "ewma"
		case 6:
			ing.Annotations[AnnotationAffinity] = "cookie"
		case 7: // error pages: the Ingress's own default-backend, or the proxy's
			ing.Annotations[PrefixMetalgate+"custom-http-errors"] = "503"
			if rng.Intn(2) == 0 {
				ing.Annotations[PrefixMetalgate+"default-backend"] = svcs[rng.Intn(len(svcs))]
			}
		}
		if rng.Intn(3) == 0 {
			withDefault(ing, svcs[rng.Intn(len(svcs))])
		}
		if rng.Intn(4) == 0 {
			withTLS(ing, "cert", "x.example.com", "*.example.com")
		}
		in.Ingresses = append(in.Ingresses, ing)
	}
	if rng.Intn(2) == 0 { // the proxy's own default backend (--default-backend-service)
		in.DefaultBackendService = types.NamespacedName{Namespace: patchNamespaces[rng.Intn(len(patchNamespaces))], Name: svcs[rng.Intn(len(svcs))]}
	}
	for _, ns := range patchNamespaces {
		in.Secrets = append(in.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}})
		for _, name := range patchServices {
			s := svc(name)
			s.Namespace = ns
			in.Services = append(in.Services, s)
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
	certPEM, keyPEM := testenv.SelfSigned(t, "x.example.com")
	worlds := []struct {
		name string
		make func(*rand.Rand) Input
	}{
		{"ingress", func(rng *rand.Rand) Input { return patchIngressWorld(rng, certPEM, keyPEM) }},
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
				prev, prevProblems := Build(in)
				checkBackendsListed(t, fmt.Sprintf("seed %d: Build", seed), prev)
				for step := 1; step <= 4; step++ {
					after, changed := changeEndpoints(rng, in, step)
					want, wantProblems := Build(after)
					got, ok := table.PatchEndpoints(prev, changed)
					if again, _ := Build(in); !reflect.DeepEqual(prev, again) {
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

// TestPatchEndpointsRefuses pins the structural cases: the fast path must leave them to
// Build.
func TestPatchEndpointsRefuses(t *testing.T) {
	ready := func(ip string) ep { return ep{ip: ip, ready: true, serving: true} }
	terminating := func(ip string) ep { return ep{ip: ip, serving: true, terminate: true} }
	in := func(slices ...*discoveryv1.EndpointSlice) Input {
		return Input{Classes: []*networkingv1.IngressClass{class("metalgate")},
			Ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("ns", "first", 1, path{"a.example.com", "/", "Prefix", "web"}), "d1"),
				withDefault(nsIngress("ns", "second", 2, path{"b.example.com", "/", "Prefix", "web"}), "d2"),
				withDefault(nsIngress("lone", "only", 3, path{"c.example.com", "/", "Prefix", "web"}), "d3"),
			},
			Services: []*corev1.Service{svc("web"), svc("d1"), svc("d2"), func() *corev1.Service { s := svc("d3"); s.Namespace = "lone"; return s }()},
			Slices:   slices,
		}
	}
	d3 := func(eps ...ep) *discoveryv1.EndpointSlice {
		s := slice("d3", "d3", 8080, eps...)
		s.Namespace = "lone"
		return s
	}
	base := []*discoveryv1.EndpointSlice{slice("web", "web", 8080, ready("10.0.0.1")), slice("d1", "d1", 8080, ready("10.0.1.1")),
		slice("d2", "d2", 8080, ready("10.0.2.1")), d3(ready("10.0.3.1"))}
	id := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for _, tc := range []struct {
		name   string
		svc    types.NamespacedName
		slices []*discoveryv1.EndpointSlice
		ok     bool
	}{
		{"a route's endpoints change", id("ns", "web"), []*discoveryv1.EndpointSlice{slice("web", "web", 8080, ready("10.0.0.2"))}, true},
		{"a route's Service loses every endpoint", id("ns", "web"), nil, true},
		{"a ranked default backend gains an endpoint, still ready", id("ns", "d1"), []*discoveryv1.EndpointSlice{slice("d1", "d1", 8080, ready("10.0.1.1"), ready("10.0.1.2"))}, true},
		{"a ranked default backend has only terminating endpoints now", id("ns", "d1"), []*discoveryv1.EndpointSlice{slice("d1", "d1", 8080, terminating("10.0.1.1"))}, false},
		{"a ranked default backend loses every endpoint", id("ns", "d2"), nil, false},
		{"the only default backend of its namespace still ranks against the others", id("lone", "d3"), nil, false},
		{"a refused address appears", id("ns", "web"), []*discoveryv1.EndpointSlice{slice("web", "web", 8080, ready("10.0.0.1"), ready("127.0.0.1"))}, false},
		{"an unmanaged slice appears", id("ns", "web"), []*discoveryv1.EndpointSlice{slice("web", "web", 8080, ready("10.0.0.1")),
			func() *discoveryv1.EndpointSlice {
				s := slice("web", "hand", 8080, ready("10.0.0.9"))
				delete(s.Labels, discoveryv1.LabelManagedBy)
				return s
			}()}, false},
		{"a Service no Ingress names", id("ns", "unused"), []*discoveryv1.EndpointSlice{slice("unused", "u", 8080, ready("10.0.9.9"))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, _ := Build(in(base...))
			got, ok := table.PatchEndpoints(prev, map[types.NamespacedName][]*discoveryv1.EndpointSlice{tc.svc: tc.slices})
			if ok != tc.ok {
				t.Fatalf("PatchEndpoints ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			var after []*discoveryv1.EndpointSlice
			for _, s := range base {
				if s.Namespace != tc.svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != tc.svc.Name {
					after = append(after, s)
				}
			}
			want, _ := Build(in(append(after, tc.slices...)...))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("patched table differs from Build:\n%s", diffBackends(got, want))
			}
		})
	}
	t.Run("a lone default backend is not ranked", func(t *testing.T) {
		lone := Input{Classes: []*networkingv1.IngressClass{class("metalgate")},
			Ingresses: []*networkingv1.Ingress{withDefault(nsIngress("ns", "only", 1), "d1")},
			Services:  []*corev1.Service{svc("d1")}, Slices: []*discoveryv1.EndpointSlice{slice("d1", "d1", 8080, ready("10.0.1.1"))}}
		prev, _ := Build(lone)
		got, ok := table.PatchEndpoints(prev, map[types.NamespacedName][]*discoveryv1.EndpointSlice{id("ns", "d1"): nil})
		lone.Slices = nil
		if want, _ := Build(lone); !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("PatchEndpoints ok = %v (want true), equal to Build: %v", ok, reflect.DeepEqual(got, want))
		}
	})
}
