package ingress

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

func ptr[T any](v T) *T { return &v }

func class(name string) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
}

type path struct{ host, path, pt, svc string }

func ingress(name string, age int, paths ...path) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+age), 0))},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr("metalgate")},
	}
	for _, p := range paths {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: p.host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: p.path, PathType: ptr(networkingv1.PathType(p.pt)), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: p.svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}})
	}
	return ing
}

func svc(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "admin", Port: 9000, Protocol: corev1.ProtocolTCP}}}}
}

type ep struct {
	ip                        string
	ready, serving, terminate bool
}

func slice(svcName, name string, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svcName,
			discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr(e.ready), Serving: ptr(e.serving), Terminating: ptr(e.terminate)}})
	}
	return s
}

func TestLookupPrecedence(t *testing.T) {
	in := Input{
		Classes: []*networkingv1.IngressClass{class("metalgate")},
		Ingresses: []*networkingv1.Ingress{
			ingress("a", 0,
				path{"foo.com", "/foo", "Prefix", "prefix-foo"},
				path{"foo.com", "/foo/bar", "Prefix", "prefix-foobar"},
				path{"foo.com", "/foo", "Exact", "exact-foo"},
				path{"foo.com", "/", "Prefix", "root"},
				path{"*.foo.com", "/", "Prefix", "wild"},
				path{"", "/any", "ImplementationSpecific", "any"},
			),
		},
		Services: []*corev1.Service{svc("prefix-foo"), svc("prefix-foobar"), svc("exact-foo"), svc("root"), svc("wild"), svc("any")},
	}
	tab, problems := Build(in)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	for _, tc := range []struct {
		host, path, want string
	}{
		{"foo.com", "/foo", "exact-foo"},
		{"FOO.com:8443", "/foo", "exact-foo"},
		{"foo.com", "/foo/", "prefix-foo"},
		{"foo.com", "/foo/baz", "prefix-foo"},
		{"foo.com", "/foobar", "root"},
		{"foo.com", "/foo/bar", "prefix-foobar"},
		{"foo.com", "/foo/bar/x", "prefix-foobar"},
		{"foo.com", "/foo/barx", "prefix-foo"},
		{"a.foo.com", "/foo", "wild"},
		{"a.b.foo.com", "/foo", ""},
		{"a.b.foo.com", "/any/x", "any"},
		{"bar.com", "/any", "any"},
		{"bar.com", "/anything", ""},
	} {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			got := ""
			if r := tab.Lookup(tc.host, tc.path); r != nil {
				got = r.Backend.Service.Name
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lookup(%q, %q) (-want +got):\n%s", tc.host, tc.path, diff)
			}
		})
	}
}

func TestExactHostBeatsWildcard(t *testing.T) {
	tab, _ := Build(Input{
		Classes: []*networkingv1.IngressClass{class("metalgate")},
		Ingresses: []*networkingv1.Ingress{
			ingress("wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}),
			ingress("exact", 1, path{"www.foo.com", "/", "Prefix", "exact"}),
		},
		Services: []*corev1.Service{svc("wild"), svc("exact")},
	})
	for host, want := range map[string]string{"www.foo.com": "exact", "api.foo.com": "wild", "foo.com": ""} {
		got := ""
		if r := tab.Lookup(host, "/"); r != nil {
			got = r.Backend.Service.Name
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", host, got, want)
		}
	}
}

func TestBuildProblems(t *testing.T) {
	bad := ingress("b-newer", 5, path{"x.com", "/", "Prefix", "missing"}, path{"x.com", "/a", "Prefix", "s"})
	bad.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"x.com"}, SecretName: "nope"}}
	bad.Annotations = map[string]string{AnnotationLoadBalance: "random"}
	tab, problems := Build(Input{
		Classes: []*networkingv1.IngressClass{class("metalgate")},
		Ingresses: []*networkingv1.Ingress{
			ingress("a-older", 0, path{"x.com", "/a/", "Prefix", "s"}),
			bad,
		},
		Services: []*corev1.Service{svc("s")},
	})
	var got []string
	for _, p := range problems {
		got = append(got, p.Object.Name+" "+p.Reason)
	}
	want := []string{"b-newer InvalidAnnotation", "b-newer InvalidTLSSecret", "b-newer MissingService", "b-newer PathConflict"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
	}
	// The valid parts still route; the conflicting path stays with the older Ingress.
	if r := tab.Lookup("x.com", "/a/b"); r == nil || r.Source.Name != "a-older" {
		t.Errorf("x.com/a/b routed to %+v, want a-older", r)
	}
	if r := tab.Lookup("x.com", "/z"); r == nil || r.Backend.Service.Name != "missing" || len(r.Backend.Endpoints) != 0 {
		t.Errorf("x.com/z routed to %+v, want the missing Service with no endpoints", r)
	}
}

func TestOwnership(t *testing.T) {
	other := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	def := class("metalgate")
	def.Annotations = map[string]string{defaultClassAnnotation: "true"}
	mine := ingress("mine", 0, path{"a.com", "/", "Prefix", "s"})
	theirs := ingress("theirs", 0, path{"b.com", "/", "Prefix", "s"})
	theirs.Spec.IngressClassName = ptr("nginx")
	none := ingress("none", 0, path{"c.com", "/", "Prefix", "s"})
	none.Spec.IngressClassName = nil
	for _, tc := range []struct {
		name         string
		watchDefault bool
		want         []string
	}{
		{"classOnly", false, []string{"a.com"}},
		{"withDefault", true, []string{"a.com", "c.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, _ := Build(Input{Classes: []*networkingv1.IngressClass{def, other}, Ingresses: []*networkingv1.Ingress{mine, theirs, none},
				Services: []*corev1.Service{svc("s")}, WatchDefaultClass: tc.watchDefault})
			var got []string
			for _, r := range tab.Routes() {
				got = append(got, r.Host)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	named := ingress("named", 0)
	named.Spec.Rules = []networkingv1.IngressRule{{Host: "n.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
		Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}
	for _, tc := range []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"readyOnly", []*discoveryv1.EndpointSlice{
			slice("s", "s-1", 8080, ep{"10.0.0.2", true, true, false}, ep{"10.0.0.1", true, true, false}, ep{"10.0.0.3", false, true, true}),
			slice("s", "s-2", 8080, ep{"10.0.0.4", true, true, false}, ep{"10.0.0.5", false, false, false}),
			slice("other", "o-1", 8080, ep{"10.9.9.9", true, true, false}),
		}, []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.4:8080"}},
		{"terminatingWhenNothingReady", []*discoveryv1.EndpointSlice{
			slice("s", "s-1", 8080, ep{"10.0.0.3", false, true, true}, ep{"10.0.0.5", false, false, true}),
		}, []string{"10.0.0.3:8080"}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{named},
				Services: []*corev1.Service{svc("s")}, Slices: tc.slices})
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			r := tab.Lookup("n.com", "/")
			if diff := cmp.Diff(tc.want, r.Backend.Endpoints); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCertificates(t *testing.T) {
	crt, key := testenv.SelfSigned(t, "x.com")
	ing := ingress("tls", 0, path{"x.com", "/", "Prefix", "s"})
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"x.com", "*.y.com"}, SecretName: "cert"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{ing},
		Services: []*corev1.Service{svc("s")}, Secrets: []*corev1.Secret{sec}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for name, want := range map[string]bool{"x.com": true, "X.com": true, "a.y.com": true, "a.b.y.com": false, "z.com": false} {
		if got := tab.Certificate(name) != nil; got != want {
			t.Errorf("Certificate(%q) found = %v, want %v", name, got, want)
		}
	}
	if !tab.Lookup("x.com", "/").TLS {
		t.Error("route for x.com not marked TLS")
	}
}

// TestAffinityCookieAttrsSplitBackends: two Ingresses on one Service whose affinity cookies
// differ only in attributes get a backend each, so one Ingress's cookie never carries the
// other's attributes (Path, Secure, SameSite…); with the same attributes they share one.
func TestAffinityCookieAttrsSplitBackends(t *testing.T) {
	aff := func(ing *networkingv1.Ingress, kv ...string) *networkingv1.Ingress {
		ing.Annotations = map[string]string{PrefixMetalgate + "affinity": "cookie"}
		for i := 0; i < len(kv); i += 2 {
			ing.Annotations[PrefixMetalgate+kv[i]] = kv[i+1]
		}
		return ing
	}
	tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Services: []*corev1.Service{svc("s")},
		Ingresses: []*networkingv1.Ingress{
			aff(ingress("strict", 0, path{"a.com", "/", "Prefix", "s"}), "affinity-cookie-samesite", "Strict", "affinity-cookie-path", "/a"),
			aff(ingress("plain", 1, path{"b.com", "/", "Prefix", "s"})),
			aff(ingress("plain2", 2, path{"c.com", "/", "Prefix", "s"})),
		}})
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	a, b, c := tab.Lookup("a.com", "/").Backend, tab.Lookup("b.com", "/").Backend, tab.Lookup("c.com", "/").Backend
	if a == b {
		t.Errorf("one backend for cookies with different attributes: %+v", a.Balance)
	}
	if a.Balance.AffinityCookieAttrs != (table.CookieAttrs{Path: "/a", SameSite: table.SameSiteStrict}) || b.Balance.AffinityCookieAttrs != (table.CookieAttrs{}) {
		t.Errorf("attributes %+v and %+v, want Strict with /a, and the defaults", a.Balance.AffinityCookieAttrs, b.Balance.AffinityCookieAttrs)
	}
	if b != c {
		t.Errorf("the same attributes, two backends")
	}
}
