package controlplane

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/api/contract"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// proxyIn builds a candidate: its publish Service ns/name, watched namespaces (nil: all),
// created at t0+age, with an address and serving unless changed.
func proxyIn(svc string, namespaces []string, age time.Duration) Candidate {
	ns, name, _ := strings.Cut(svc, "/")
	return Candidate{Service: types.NamespacedName{Namespace: ns, Name: name}, Created: t0.Add(age), Controller: proxyingress.ControllerName,
		Namespaces: namespaces, FieldManager: "metalgate-proxy." + ns + "." + name, Addresses: []string{"100.64.0." + fmt.Sprint(len(svc))}, Serving: true}
}

func with(c Candidate, f func(*Candidate)) Candidate { f(&c); return c }

var (
	tenantOne  = proxyIn("one/metalgate-proxy", []string{"one"}, 2*time.Minute)
	tenantTwo  = proxyIn("two/metalgate-proxy", []string{"two"}, 2*time.Minute)
	clusterOld = proxyIn("metalgate-system/metalgate-proxy", nil, 0) // installed first
	clusterNew = proxyIn("metalgate-system/metalgate-proxy", nil, time.Hour)
	shared     = proxyIn("infra/shared-proxy", []string{"one", "two"}, 0) // watches one, two from infra
)

func subjectIn(ns string) Subject {
	return Subject{Namespace: ns, Controller: proxyingress.ControllerName}
}

// TestArbitrate: the rule, one decision per case; every permutation of the candidates gives
// the same winner (each proxy lists them in its own order).
func TestArbitrate(t *testing.T) {
	tests := []struct {
		name    string
		cands   []Candidate
		subject Subject
		want    string // winner's Service; "" none
		why     string // part of Why(winner, runner-up)
		serving int
	}{
		{name: "alone", cands: []Candidate{tenantOne}, subject: subjectIn("one"), want: "one/metalgate-proxy", serving: 1},
		{name: "own namespace beats cluster-wide installed later", cands: []Candidate{tenantOne, clusterNew}, subject: subjectIn("one"),
			want: "one/metalgate-proxy", why: "namespace one's own proxy and metalgate-system/metalgate-proxy is cluster-wide", serving: 2},
		{name: "own namespace beats cluster-wide installed first", cands: []Candidate{tenantOne, clusterOld}, subject: subjectIn("one"),
			want: "one/metalgate-proxy", why: "the more specific scope wins", serving: 2},
		{name: "listed beats cluster-wide", cands: []Candidate{shared, clusterOld}, subject: subjectIn("two"),
			want: "infra/shared-proxy", why: "watching two from namespace infra and metalgate-system/metalgate-proxy is cluster-wide", serving: 2},
		{name: "own beats listed, though listed is older", cands: []Candidate{shared, tenantTwo}, subject: subjectIn("two"),
			want: "two/metalgate-proxy", why: "namespace two's own proxy and infra/shared-proxy is watching two", serving: 2},
		{name: "other namespace's proxy does not serve", cands: []Candidate{tenantOne, tenantTwo}, subject: subjectIn("two"),
			want: "two/metalgate-proxy", serving: 1},
		{name: "a namespace nobody watches", cands: []Candidate{tenantOne, shared}, subject: subjectIn("three"), want: "", serving: 0},
		{name: "cluster-wide serves a namespace without its own proxy", cands: []Candidate{tenantOne, clusterNew}, subject: subjectIn("three"),
			want: "metalgate-system/metalgate-proxy", serving: 1},
		{name: "tie on scope: older publish Service", cands: []Candidate{
			proxyIn("one/a", []string{"one"}, time.Minute), proxyIn("one/b", []string{"one"}, 0)}, subject: subjectIn("one"),
			want: "one/b", why: "the publish Service of one/b is older (created 2026-01-02T03:04:05Z, one/a's 2026-01-02T03:05:05Z)", serving: 2},
		{name: "tie on scope and age: namespace/name", cands: []Candidate{
			proxyIn("one/b", []string{"one"}, 0), proxyIn("one/a", []string{"one"}, 0)}, subject: subjectIn("one"),
			want: "one/a", why: "created in the same second; one/a sorts before one/b", serving: 2},
		{name: "two cluster-wide proxies: older", cands: []Candidate{clusterNew, proxyIn("edge/metalgate-proxy", nil, time.Minute)}, subject: subjectIn("one"),
			want: "edge/metalgate-proxy", why: "both are cluster-wide", serving: 2},
		{name: "a winner without an address loses to one with", cands: []Candidate{
			with(tenantOne, func(c *Candidate) { c.Addresses = nil }), clusterNew}, subject: subjectIn("one"),
			want: "metalgate-system/metalgate-proxy", why: "has a load-balancer address and one/metalgate-proxy has none", serving: 2},
		{name: "nobody has an address: nobody writes", cands: []Candidate{
			with(tenantOne, func(c *Candidate) { c.Addresses = nil }), with(clusterNew, func(c *Candidate) { c.Addresses = nil })}, subject: subjectIn("one"),
			want: "", serving: 2},
		{name: "not serving (no ready endpoint for long) loses to serving", cands: []Candidate{
			with(tenantOne, func(c *Candidate) { c.Serving = false }), clusterNew}, subject: subjectIn("one"),
			want: "metalgate-system/metalgate-proxy", why: "is serving and one/metalgate-proxy has had no ready endpoint", serving: 2},
		{name: "alone and not serving still writes its own address", cands: []Candidate{
			with(tenantOne, func(c *Candidate) { c.Serving = false })}, subject: subjectIn("one"), want: "one/metalgate-proxy", serving: 1},
		{name: "another controller name does not compete", cands: []Candidate{
			tenantOne, with(clusterOld, func(c *Candidate) { c.Controller = "example.com/other" })}, subject: subjectIn("one"),
			want: "one/metalgate-proxy", serving: 1},
		{name: "classless Ingress: only proxies that take them", cands: []Candidate{
			tenantOne, with(clusterNew, func(c *Candidate) { c.WithoutClass = true })}, subject: Subject{Namespace: "one", Controller: proxyingress.ControllerName, Classless: true},
			want: "metalgate-system/metalgate-proxy", serving: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Arbitrate(tc.cands, tc.subject)
			got := ""
			if d.Winner != nil {
				got = d.Winner.Service.String()
			}
			if got != tc.want {
				t.Fatalf("winner %q, want %q (serving %v)", got, tc.want, d.Serving)
			}
			if len(d.Serving) != tc.serving {
				t.Errorf("%d serving, want %d: %v", len(d.Serving), tc.serving, d.Serving)
			}
			if tc.why != "" {
				why := Why(d.Serving[0], d.Serving[1], tc.subject.Namespace)
				if !strings.Contains(why, tc.why) {
					t.Errorf("Why = %q, want it to contain %q", why, tc.why)
				}
			}
			// Order-independent: each proxy lists the candidates in its own order.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				perm := append([]Candidate(nil), tc.cands...)
				r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
				p := Arbitrate(perm, tc.subject)
				if diff := cmp.Diff(d.Serving, p.Serving); diff != "" {
					t.Fatalf("another order of the candidates gives another ranking (-first +shuffled):\n%s", diff)
				}
			}
		})
	}
}

// TestArbitrateComingAndGoing: one Ingress in namespace one through a sequence of installs,
// uninstalls and address changes, each step stating the winner: the cluster-wide proxy
// hands over to the tenant's as soon as it has an address and takes over again when the
// tenant's proxy goes or loses its VIP.
func TestArbitrateComingAndGoing(t *testing.T) {
	noVIP := func(c Candidate) Candidate { return with(c, func(c *Candidate) { c.Addresses = nil }) }
	gone := func(c Candidate) Candidate { return with(c, func(c *Candidate) { c.Serving = false }) }
	steps := []struct {
		desc  string
		cands []Candidate
		want  string
	}{
		{"only the cluster-wide proxy: it writes", []Candidate{clusterOld}, "metalgate-system/metalgate-proxy"},
		{"the tenant's proxy is installed, no VIP yet: the cluster-wide keeps writing", []Candidate{clusterOld, noVIP(tenantOne)}, "metalgate-system/metalgate-proxy"},
		{"the tenant's proxy gets its VIP: it takes over", []Candidate{clusterOld, tenantOne}, "one/metalgate-proxy"},
		{"a second own proxy, newer: the first keeps it", []Candidate{clusterOld, tenantOne, proxyIn("one/canary", []string{"one"}, time.Hour)}, "one/metalgate-proxy"},
		{"the first loses its VIP: the second own proxy, not the cluster-wide", []Candidate{clusterOld, noVIP(tenantOne), proxyIn("one/canary", []string{"one"}, time.Hour)}, "one/canary"},
		{"the second is uninstalled: the cluster-wide again", []Candidate{clusterOld, noVIP(tenantOne)}, "metalgate-system/metalgate-proxy"},
		{"the tenant's VIP is back", []Candidate{clusterOld, tenantOne}, "one/metalgate-proxy"},
		{"the tenant's pods are gone past the hand-over delay", []Candidate{clusterOld, gone(tenantOne)}, "metalgate-system/metalgate-proxy"},
		{"they are back", []Candidate{clusterOld, tenantOne}, "one/metalgate-proxy"},
		{"the cluster-wide proxy is uninstalled: no change", []Candidate{tenantOne}, "one/metalgate-proxy"},
		{"the tenant's proxy is uninstalled too: nobody", nil, ""},
	}
	for i, s := range steps {
		d := Arbitrate(s.cands, subjectIn("one"))
		got := ""
		if d.Winner != nil {
			got = d.Winner.Service.String()
		}
		if got != s.want {
			t.Errorf("step %d %q: winner %q, want %q", i, s.desc, got, s.want)
		}
	}
}

func TestCandidateFromService(t *testing.T) {
	svc := func(ann map[string]string, lb ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "one", Name: "metalgate-proxy", Annotations: ann, CreationTimestamp: metav1.NewTime(t0)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		for _, ip := range lb {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	good := func(mut func(map[string]string)) map[string]string {
		m := map[string]string{contract.AnnotationProxyController: proxyingress.ControllerName, contract.AnnotationProxyWatchNamespaces: "one, two",
			contract.AnnotationProxyWithoutClass: "false", contract.AnnotationProxyFieldManager: "metalgate-proxy.one"}
		if mut != nil {
			mut(m)
		}
		return m
	}
	tests := []struct {
		name    string
		svc     *corev1.Service
		want    Candidate
		ok      bool
		wantErr string
	}{
		{name: "no announcement", svc: svc(nil), ok: false},
		{name: "namespaced, addresses sorted", svc: svc(good(nil), "100.64.0.9", "100.64.0.1"), ok: true, want: Candidate{
			Service: types.NamespacedName{Namespace: "one", Name: "metalgate-proxy"}, Created: t0, Controller: proxyingress.ControllerName,
			Namespaces: []string{"one", "two"}, FieldManager: "metalgate-proxy.one", Addresses: []string{"100.64.0.1", "100.64.0.9"}}},
		{name: "cluster-wide, without class", svc: svc(good(func(m map[string]string) {
			m[contract.AnnotationProxyWatchNamespaces], m[contract.AnnotationProxyWithoutClass] = "*", "true"
		})), ok: true, want: Candidate{
			Service: types.NamespacedName{Namespace: "one", Name: "metalgate-proxy"}, Created: t0, Controller: proxyingress.ControllerName,
			WithoutClass: true, FieldManager: "metalgate-proxy.one"}},
		{name: "empty controller", svc: svc(good(func(m map[string]string) { m[contract.AnnotationProxyController] = "" })),
			wantErr: `proxy announcement on Service one/metalgate-proxy: annotation metalgate.io/proxy-controller="": empty; want the IngressClass controller the proxy serves`},
		{name: "bad namespace", svc: svc(good(func(m map[string]string) { m[contract.AnnotationProxyWatchNamespaces] = "one,,two" })),
			wantErr: `annotation metalgate.io/proxy-watch-namespaces="one,,two": "" is not a namespace name`},
		{name: "no namespaces", svc: svc(good(func(m map[string]string) { delete(m, contract.AnnotationProxyWatchNamespaces) })),
			wantErr: `annotation metalgate.io/proxy-watch-namespaces="": missing or empty; want "*" or a comma-separated list of namespaces`},
		{name: "bad bool", svc: svc(good(func(m map[string]string) { m[contract.AnnotationProxyWithoutClass] = "yes" })),
			wantErr: `annotation metalgate.io/proxy-watch-ingress-without-class="yes": want "true" or "false"`},
		{name: "no field manager", svc: svc(good(func(m map[string]string) { delete(m, contract.AnnotationProxyFieldManager) })),
			wantErr: `annotation metalgate.io/proxy-field-manager="": missing or empty`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := CandidateFromService(tc.svc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ok {
					t.Fatalf("err %v ok %v, want an error containing %q", err, ok, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v err %v, want ok %v", ok, err, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	// What a proxy announces reads back as itself.
	o := Options{Controller: proxyingress.ControllerName, WatchNamespaces: []string{"one"}, FieldManager: "metalgate-proxy.one"}
	lbls, ann := o.announcement()
	s := svc(ann)
	s.Labels = lbls
	if !o.announced(s) {
		t.Errorf("announced(%v) = false for its own announcement", s.Annotations)
	}
	c, ok, err := CandidateFromService(s)
	if err != nil || !ok || c.Controller != o.Controller || c.FieldManager != o.FieldManager || !cmp.Equal(c.Namespaces, o.WatchNamespaces) || c.WithoutClass {
		t.Errorf("round trip: %+v %v %v", c, ok, err)
	}
	o.WatchNamespaces = nil
	if o.announced(s) {
		t.Errorf("announced = true after --watch-namespace changed")
	}
}

// TestPresence: a Service counts as serving while it has a ready endpoint and for GoneAfter
// after its last one (or after it was first seen without one); a ready endpoint again
// restores it at once.
func TestPresence(t *testing.T) {
	now := t0
	p := newPresence(2*time.Minute, func() time.Time { return now })
	a := types.NamespacedName{Namespace: "one", Name: "metalgate-proxy"}
	b := types.NamespacedName{Namespace: "two", Name: "metalgate-proxy"}
	steps := []struct {
		advance time.Duration
		id      types.NamespacedName
		ready   bool
		want    bool
		expires time.Duration // after t0; 0: none
	}{
		{0, a, false, true, 2 * time.Minute},                               // first seen without endpoints: grace starts
		{119 * time.Second, a, false, true, 2 * time.Minute},               // still within it
		{1 * time.Second, a, false, false, 0},                              // 2m without a ready endpoint: gone
		{time.Hour, a, false, false, 0},                                    // stays gone
		{0, a, true, true, 0},                                              // back (ready: no expiry)
		{90 * time.Second, a, false, true, 62*time.Minute + 2*time.Minute}, // a restart: 90s without
		{0, a, true, true, 0},                                              // ready again, the clock resets
		{119 * time.Second, a, false, true, 63*time.Minute + 30*time.Second + 2*time.Minute},
		{0, b, false, true, 67*time.Minute + 29*time.Second}, // another Service has its own clock
		{1 * time.Second, a, false, false, 0},                //
		{2 * time.Minute, b, false, false, 0},                //
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		got, exp := p.serving(s.id, s.ready)
		want := time.Time{}
		if s.expires != 0 {
			want = t0.Add(s.expires)
		}
		if got != s.want || !exp.Equal(want) {
			t.Errorf("step %d (%s ready=%v at +%v): serving %v until %v, want %v until %v", i, s.id, s.ready, now.Sub(t0), got, exp, s.want, want)
		}
	}
	p.retain(map[types.NamespacedName]bool{b: true})
	if got, _ := p.serving(a, false); !got {
		t.Errorf("a forgotten Service seen again without endpoints starts a new grace")
	}
}

func TestReadyServices(t *testing.T) {
	yes, no := true, false
	slice := func(ns, svc string, ready ...*bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
		for _, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: r}})
		}
		return s
	}
	got := ReadyServices([]*discoveryv1.EndpointSlice{
		slice("one", "a", &no, &yes), slice("one", "b", &no), slice("one", "c", nil), slice("two", "a"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "one"}, Endpoints: []discoveryv1.Endpoint{{}}}, // no Service label
	})
	want := map[types.NamespacedName]bool{{Namespace: "one", Name: "a"}: true, {Namespace: "one", Name: "c"}: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
