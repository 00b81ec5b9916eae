package gatewayapi

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// The Gateway every test serves: infra/gw. Namespace app has label team=a, other has none.
func testListener(name string, port int32, host string, from gatewayv1.FromNamespaces) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}
	if from == gatewayv1.NamespacesFromSelector {
		l.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	}
	if host != "" {
		l.Hostname = ptr(gatewayv1.Hostname(host))
	}
	return l
}

func testGateway() *gatewayv1.Gateway {
	tcp := testListener("tcp", 9000, "", gatewayv1.NamespacesFromAll)
	tcp.Protocol = gatewayv1.TCPProtocolType
	grpcOnly := testListener("grpc-only", 8082, "", gatewayv1.NamespacesFromAll)
	grpcOnly.AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}}
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{
			testListener("http", 80, "", gatewayv1.NamespacesFromAll),
			testListener("same", 8080, "*.example.com", gatewayv1.NamespacesFromSame),
			testListener("sel", 8081, "", gatewayv1.NamespacesFromSelector),
			grpcOnly,
			testListener("foo", 8083, "foo.example.com", gatewayv1.NamespacesFromAll),
			testListener("wild", 8083, "*.example.com", gatewayv1.NamespacesFromAll),
			tcp,
		}},
	}
}

type parent struct {
	ns, name, section string
	port              int32
}

func onGW(section string) parent { return parent{ns: "infra", name: "gw", section: section} }

func httpRoute(ns, name string, age int, parents []parent, hosts []string, rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))}}
	for _, p := range parents {
		pr := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(p.name)}
		if p.ns != "" {
			pr.Namespace = ptr(gatewayv1.Namespace(p.ns))
		}
		if p.section != "" {
			pr.SectionName = ptr(gatewayv1.SectionName(p.section))
		}
		if p.port != 0 {
			pr.Port = ptr(p.port)
		}
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, pr)
	}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func backendRef(ns, name string, port int32, weight int32) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(name), Port: ptr(port)}}}
	if ns != "" {
		ref.Namespace = ptr(gatewayv1.Namespace(ns))
	}
	if weight >= 0 {
		ref.Weight = ptr(weight)
	}
	return ref
}

func toBackend(ns, name string) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(ns, name, 80, -1)}}
}

func grant(ns, fromNS, name string) *gatewayv1beta1.ReferenceGrant {
	g := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(fromNS)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}}
	if name != "" {
		g.Spec.To[0].Name = ptr(gatewayv1.ObjectName(name))
	}
	return g
}

// gatewayWorld is the Gateway, the namespaces, and Service "web" (port 80, one ready
// endpoint) in each of infra, app and other, plus "v2" in app.
func gatewayWorld(routes []*gatewayv1.HTTPRoute, grants ...*gatewayv1beta1.ReferenceGrant) Input {
	in := Input{Gateway: testGateway(), HTTPRoutes: routes, ReferenceGrants: grants}
	for _, ns := range []string{"infra", "app", "other"} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns == "app" {
			n.Labels = map[string]string{"team": "a"}
		}
		in.Namespaces = append(in.Namespaces, n)
	}
	add := func(ns, name, ip string) {
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		in.Slices = append(in.Slices, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: table.EndpointSliceController}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		})
	}
	add("infra", "web", "10.0.0.1")
	add("app", "web", "10.0.1.1")
	add("app", "v2", "10.0.1.2")
	add("other", "web", "10.0.2.1")
	return in
}

type probe struct {
	port       int32
	host, path string
	want       string // "ns/svc" served with endpoints, "503 ns/svc" without, "500 ns/svc" unresolved, "" no route
}

func (p probe) check(t *testing.T, tab *table.Table) {
	t.Helper()
	req := httptest.NewRequest("GET", "http://"+p.host+p.path, nil)
	r := tab.Match(p.port, req)
	got := ""
	if r != nil {
		got = r.Backend.Service.String()
		switch {
		case r.Backend.Unresolved:
			got = "500 " + got
		case len(r.Backend.Endpoints) == 0:
			got = "503 " + got
		}
	}
	if got != p.want {
		t.Errorf("Match(%d, %s%s) = %q, want %q", p.port, p.host, p.path, got, p.want)
	}
}

// condition returns status/reason of a condition type of the subject route's parent i.
func condition(st *table.GatewayStatus, route types.NamespacedName, i int, typ gatewayv1.RouteConditionType) string {
	for _, rs := range st.Routes {
		if rs.Route != route || i >= len(rs.Parents) {
			continue
		}
		for _, c := range rs.Parents[i].Conditions {
			if c.Type == string(typ) {
				return string(c.Status) + "/" + c.Reason
			}
		}
	}
	return "none"
}

func TestGatewayAttachment(t *testing.T) {
	web := toBackend("", "web")
	accepted, resolved := "True/Accepted", "True/ResolvedRefs"
	cases := []struct {
		name                   string
		route                  *gatewayv1.HTTPRoute
		grants                 []*gatewayv1beta1.ReferenceGrant
		wantAccepted, wantRefs string // "none" when the route gets no status from this Gateway
		probes                 []probe
	}{
		// Hostile first.
		{name: "route of a namespace the listener does not allow (Same)",
			route: httpRoute("app", "r", 0, []parent{onGW("same")}, nil, web), wantAccepted: "False/NotAllowedByListeners", wantRefs: resolved,
			probes: []probe{{8080, "a.example.com", "/", ""}}},
		{name: "route of a namespace the selector does not select",
			route: httpRoute("other", "r", 0, []parent{onGW("sel")}, nil, web), wantAccepted: "False/NotAllowedByListeners", wantRefs: resolved,
			probes: []probe{{8081, "x", "/", ""}}},
		{name: "backendRef to another namespace without a ReferenceGrant",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("other", "web")), wantAccepted: accepted, wantRefs: "False/RefNotPermitted",
			probes: []probe{{80, "x", "/", "500 other/web"}}},
		{name: "ReferenceGrant for another Service name",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("other", "web")), grants: []*gatewayv1beta1.ReferenceGrant{grant("other", "app", "db")},
			wantAccepted: accepted, wantRefs: "False/RefNotPermitted", probes: []probe{{80, "x", "/", "500 other/web"}}},
		{name: "ReferenceGrant for routes of another namespace",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("other", "web")), grants: []*gatewayv1beta1.ReferenceGrant{grant("other", "infra", "")},
			wantAccepted: accepted, wantRefs: "False/RefNotPermitted", probes: []probe{{80, "x", "/", "500 other/web"}}},
		{name: "ReferenceGrant in the route's own namespace does not grant another's Service",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("other", "web")), grants: []*gatewayv1beta1.ReferenceGrant{grant("app", "app", "")},
			wantAccepted: accepted, wantRefs: "False/RefNotPermitted", probes: []probe{{80, "x", "/", "500 other/web"}}},
		{name: "hostname outside the listener's",
			route: httpRoute("infra", "r", 0, []parent{onGW("same")}, []string{"evil.com"}, web), wantAccepted: "False/NoMatchingListenerHostname", wantRefs: resolved,
			probes: []probe{{8080, "evil.com", "/", ""}, {8080, "a.example.com", "/", ""}}},
		{name: "route claiming a listener of another Gateway",
			route: httpRoute("infra", "r", 0, []parent{{ns: "infra", name: "other-gw", section: "http"}}, nil, web), wantAccepted: "none", wantRefs: "none",
			probes: []probe{{80, "x", "/", ""}}},
		{name: "parentRef without namespace means the route's namespace, not the Gateway's",
			route: httpRoute("app", "r", 0, []parent{{name: "gw", section: "http"}}, nil, web), wantAccepted: "none", wantRefs: "none",
			probes: []probe{{80, "x", "/", ""}}},
		{name: "parentRef of another kind", route: func() *gatewayv1.HTTPRoute {
			r := httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, web)
			r.Spec.ParentRefs[0].Kind = ptr(gatewayv1.Kind("Service"))
			return r
		}(), wantAccepted: "none", wantRefs: "none", probes: []probe{{80, "x", "/", ""}}},
		{name: "listener that does not exist",
			route: httpRoute("infra", "r", 0, []parent{onGW("nope")}, nil, web), wantAccepted: "False/NoMatchingParent", wantRefs: resolved,
			probes: []probe{{80, "x", "/", ""}}},
		{name: "port no listener has",
			route: httpRoute("infra", "r", 0, []parent{{ns: "infra", name: "gw", port: 1234}}, nil, web), wantAccepted: "False/NoMatchingParent", wantRefs: resolved},
		{name: "sectionName and port of different listeners",
			route: httpRoute("infra", "r", 0, []parent{{ns: "infra", name: "gw", section: "http", port: 8080}}, nil, web), wantAccepted: "False/NoMatchingParent", wantRefs: resolved},
		{name: "TCP listener",
			route: httpRoute("infra", "r", 0, []parent{onGW("tcp")}, nil, web), wantAccepted: "False/NotAllowedByListeners", wantRefs: resolved,
			probes: []probe{{9000, "x", "/", ""}}},
		{name: "listener whose kinds do not list HTTPRoute",
			route: httpRoute("infra", "r", 0, []parent{onGW("grpc-only")}, nil, web), wantAccepted: "False/NotAllowedByListeners", wantRefs: resolved,
			probes: []probe{{8082, "x", "/", ""}}},
		{name: "backendRef of another kind",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, func() gatewayv1.HTTPRouteRule {
				r := toBackend("", "web")
				r.BackendRefs[0].Kind = ptr(gatewayv1.Kind("ConfigMap"))
				return r
			}()), wantAccepted: accepted, wantRefs: "False/InvalidKind", probes: []probe{{80, "x", "/", "500 infra/web"}}},
		{name: "backendRef to a missing Service",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, toBackend("", "gone")), wantAccepted: accepted, wantRefs: "False/BackendNotFound",
			probes: []probe{{80, "x", "/", "500 infra/gone"}}},
		{name: "backendRef to a port the Service lacks",
			route:        httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("", "web", 81, -1)}}),
			wantAccepted: accepted, wantRefs: "False/BackendNotFound", probes: []probe{{80, "x", "/", "500 infra/web"}}},
		{name: "unsupported filter: the route serves nothing",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{
				Filters:     []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gatewayv1.LocalObjectReference{Group: "x.example", Kind: "Filter", Name: "f"}}},
				BackendRefs: web.BackendRefs}), wantAccepted: "False/UnsupportedValue", wantRefs: resolved, probes: []probe{{80, "x", "/", ""}}},
		{name: "unsupported match: a regular expression path that does not compile",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr("/a(")}}},
				BackendRefs: web.BackendRefs}), wantAccepted: "False/UnsupportedValue", wantRefs: resolved, probes: []probe{{80, "x", "/a", ""}}},
		{name: "unsupported redirect: a scheme other than http or https",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{
				Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
					RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("javascript")}}}}),
			wantAccepted: "False/UnsupportedValue", wantRefs: resolved, probes: []probe{{80, "x", "/", ""}}},
		{name: "three weighted backends: a split",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
				backendRef("", "web", 80, 1), backendRef("", "v2", 80, 1), backendRef("", "web", 80, 1)}}),
			wantAccepted: "True/Accepted", wantRefs: resolved, probes: []probe{{80, "x", "/", "app/web"}}},
		{name: "unsupported: retry",
			route:        httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{Retry: &gatewayv1.HTTPRouteRetry{}, BackendRefs: web.BackendRefs}),
			wantAccepted: "False/UnsupportedValue", wantRefs: resolved, probes: []probe{{80, "x", "/", ""}}},
		{name: "a timeout that is not a duration",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{
				Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: ptr(gatewayv1.Duration("soon"))}, BackendRefs: web.BackendRefs}),
			wantAccepted: "False/UnsupportedValue", wantRefs: resolved, probes: []probe{{80, "x", "/", ""}}},
		// What is allowed.
		{name: "ReferenceGrant lets a route reach another namespace",
			route: httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("other", "web")), grants: []*gatewayv1beta1.ReferenceGrant{grant("other", "app", "web")},
			wantAccepted: accepted, wantRefs: resolved, probes: []probe{{80, "x", "/", "other/web"}}},
		{name: "Same namespace listener",
			route: httpRoute("infra", "r", 0, []parent{onGW("same")}, nil, web), wantAccepted: accepted, wantRefs: resolved,
			probes: []probe{{8080, "a.example.com", "/", "infra/web"}, {8080, "a.b.example.com", "/", "infra/web"}, {8080, "example.com", "/", ""}, {80, "a.example.com", "/", ""}}},
		{name: "selected namespace",
			route: httpRoute("app", "r", 0, []parent{onGW("sel")}, nil, web), wantAccepted: accepted, wantRefs: resolved,
			probes: []probe{{8081, "x", "/", "app/web"}, {80, "x", "/", ""}}},
		{name: "parentRef by port", route: httpRoute("infra", "r", 0, []parent{{ns: "infra", name: "gw", port: 8080}}, nil, web),
			wantAccepted: accepted, wantRefs: resolved, probes: []probe{{8080, "a.example.com", "/", "infra/web"}}},
		{name: "parentRef to the whole Gateway attaches where allowed",
			route: httpRoute("app", "r", 0, []parent{{ns: "infra", name: "gw"}}, nil, web), wantAccepted: accepted, wantRefs: resolved,
			probes: []probe{{80, "x", "/", "app/web"}, {8081, "x", "/", "app/web"}, {8080, "a.example.com", "/", ""}, {9000, "x", "/", ""}}},
		{name: "a rule without backendRefs answers 503, resolved",
			route: httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{}), wantAccepted: accepted, wantRefs: resolved,
			probes: []probe{{80, "x", "/", "500 /"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{tc.route}, tc.grants...))
			id := types.NamespacedName{Namespace: tc.route.Namespace, Name: tc.route.Name}
			if got := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %s, want %s (status %+v)", got, tc.wantAccepted, tab.Gateway.Routes)
			}
			if got := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionResolvedRefs); got != tc.wantRefs {
				t.Errorf("ResolvedRefs = %s, want %s", got, tc.wantRefs)
			}
			for _, rs := range tab.Gateway.Routes {
				for _, ps := range rs.Parents {
					if ps.ControllerName != ControllerName {
						t.Errorf("controllerName = %s", ps.ControllerName)
					}
					for _, c := range ps.Conditions {
						if c.ObservedGeneration != 3 || c.Message == "" {
							t.Errorf("condition %s: observedGeneration %d, message %q", c.Type, c.ObservedGeneration, c.Message)
						}
					}
				}
			}
			for _, p := range tc.probes {
				p.check(t, tab)
			}
		})
	}
}

func TestGatewayHostnames(t *testing.T) {
	for _, tc := range []struct{ listener, route, want string }{
		{"", "", ""},
		{"", "a.example.com", "a.example.com"},
		{"*.example.com", "", "*.example.com"},
		{"a.example.com", "a.example.com", "a.example.com"},
		{"a.example.com", "b.example.com", "-"},
		{"*.example.com", "a.example.com", "a.example.com"},
		{"*.example.com", "a.b.example.com", "a.b.example.com"}, // a Gateway wildcard spans labels
		{"*.example.com", "example.com", "-"},
		{"a.example.com", "*.example.com", "a.example.com"},
		{"*.example.com", "*.b.example.com", "*.b.example.com"},
		{"*.b.example.com", "*.example.com", "*.b.example.com"},
		{"*.example.com", "*.example.org", "-"},
		{"*.example.com", "*.example.com", "*.example.com"},
		{"*.example.com", "aexample.com", "-"},
	} {
		got, ok := intersect(tc.listener, tc.route)
		if !ok {
			got = "-"
		}
		if got != tc.want {
			t.Errorf("intersect(%q, %q) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
	// Most specific listener first (foo beats wild on port 8083), then the most specific
	// route hostname; no falling through to a less specific one.
	routes := []*gatewayv1.HTTPRoute{
		httpRoute("infra", "wild", 0, []parent{onGW("wild")}, nil, toBackend("", "web")),
		httpRoute("app", "foo", 1, []parent{onGW("foo")}, nil, toBackend("", "web")),
		httpRoute("other", "bar", 2, []parent{onGW("wild")}, []string{"bar.example.com", "*.deep.example.com"}, gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/only")}}}, BackendRefs: toBackend("", "web").BackendRefs}),
		// Attached to wild with hostname foo.example.com: listener foo answers for that host.
		httpRoute("other", "steal", 3, []parent{onGW("wild")}, []string{"foo.example.com"}, toBackend("", "web")),
	}
	tab, _ := build(gatewayWorld(routes))
	for _, p := range []probe{
		{8083, "foo.example.com", "/", "app/web"},
		{8083, "FOO.example.com:8083", "/", "app/web"},
		{8083, "x.example.com", "/", "infra/web"},
		{8083, "bar.example.com", "/only", "other/web"},
		{8083, "bar.example.com", "/", ""}, // the bar host answers alone
		{8083, "a.deep.example.com", "/only/x", "other/web"},
		{8083, "a.deep.example.com", "/", ""},
		{8083, "example.com", "/", ""},
		{8083, "evil.com", "/", ""},
	} {
		p.check(t, tab)
	}
	if got := condition(tab.Gateway, types.NamespacedName{Namespace: "other", Name: "steal"}, 0, gatewayv1.RouteConditionAccepted); got != "True/Accepted" {
		t.Errorf("steal Accepted = %s", got)
	}
	want := map[string]int32{"http": 0, "same": 0, "sel": 0, "grpc-only": 0, "foo": 1, "wild": 3, "tcp": 0}
	for l, n := range want {
		if tab.Gateway.AttachedRoutes[l] != n {
			t.Errorf("attachedRoutes[%s] = %d, want %d", l, tab.Gateway.AttachedRoutes[l], n)
		}
	}
}

func match(m gatewayv1.HTTPRouteMatch, svc string) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{m}, BackendRefs: toBackend("", svc).BackendRefs}
}

func TestGatewayMatches(t *testing.T) {
	exact, prefix := ptr(gatewayv1.PathMatchExact), ptr(gatewayv1.PathMatchPathPrefix)
	path := func(t *gatewayv1.PathMatchType, v string) *gatewayv1.HTTPPathMatch {
		return &gatewayv1.HTTPPathMatch{Type: t, Value: ptr(v)}
	}
	routes := []*gatewayv1.HTTPRoute{
		// The newer route's rules win ties against nothing: the older one comes first.
		httpRoute("app", "newer", 5, []parent{onGW("http")}, nil,
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/tie")}, "v2")),
		httpRoute("app", "older", 1, []parent{onGW("http")}, nil,
			match(gatewayv1.HTTPRouteMatch{Path: path(exact, "/exact")}, "web"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/p")}, "web"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/p/longer/")}, "v2"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/h"), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-env", Value: "canary"}}}, "v2"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/h"), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Env", Value: "canary"}, {Name: "X-Two", Value: "2"}}}, "web"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/q"), QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "v", Value: "2"}}}, "v2"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/m"), Method: ptr(gatewayv1.HTTPMethodPost)}, "v2"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/tie")}, "web"),
			match(gatewayv1.HTTPRouteMatch{Path: path(prefix, "/")}, "web"),
		),
	}
	tab, _ := build(gatewayWorld(routes))
	for _, tc := range []struct {
		method, target string
		header         map[string]string
		want           string
	}{
		{"GET", "/exact", nil, "app/web"},
		{"GET", "/exact/", nil, "app/web"}, // falls to the "/" prefix, not the Exact path
		{"GET", "/p/longer", nil, "app/v2"},
		{"GET", "/p/longer/x", nil, "app/v2"},
		{"GET", "/p/longerx", nil, "app/web"},
		{"GET", "/pp", nil, "app/web"},
		{"GET", "/h", nil, "app/web"},
		{"GET", "/h", map[string]string{"X-Env": "canary"}, "app/v2"},
		{"GET", "/h", map[string]string{"X-Env": "Canary"}, "app/web"}, // values are exact
		{"GET", "/h", map[string]string{"x-env": "canary", "X-Two": "2"}, "app/web"},
		{"GET", "/q?v=2", nil, "app/v2"},
		{"GET", "/q?v=3", nil, "app/web"},
		{"GET", "/q?V=2", nil, "app/web"}, // query names are case-sensitive
		{"POST", "/m", nil, "app/v2"},
		{"GET", "/m", nil, "app/web"},
		{"GET", "/tie/x", nil, "app/web"},
	} {
		req := httptest.NewRequest(tc.method, "http://x"+tc.target, nil)
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		got := ""
		if r := tab.Match(80, req); r != nil {
			got = r.Backend.Service.String()
		}
		if got != tc.want {
			t.Errorf("%s %s %v → %q, want %q", tc.method, tc.target, tc.header, got, tc.want)
		}
	}
	if r := tab.Lookup("x", "/"); r != nil {
		t.Errorf("Lookup returned a Gateway route: %+v", r)
	}
}

func TestGatewayFilters(t *testing.T) {
	rule := func(fs ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPRouteRule {
		r := toBackend("", "web")
		r.Filters = fs
		return r
	}
	rewrite := func(pm *gatewayv1.HTTPPathModifier, host string) gatewayv1.HTTPRouteFilter {
		f := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: pm}}
		if host != "" {
			f.URLRewrite.Hostname = ptr(gatewayv1.PreciseHostname(host))
		}
		return f
	}
	headers := &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x-a", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "X-B", Value: "2"}}, Remove: []string{"x-c"}}
	cases := []struct {
		name    string
		rule    gatewayv1.HTTPRouteRule
		refused bool
		check   func(t *testing.T, r *table.Route)
	}{
		{name: "request header modifier cannot set Host", refused: true, rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Host", Value: "internal"}}}})},
		{name: "response header modifier cannot remove Content-Length", refused: true, rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier,
			ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"content-length"}}})},
		{name: "redirect with a status that is not a redirect", refused: true, rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{StatusCode: ptr(200)}})},
		{name: "redirect path modifier without its value", refused: true, rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier}}})},
		{name: "redirect: scheme, host, port, full path", rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), Hostname: ptr(gatewayv1.PreciseHostname("B.Example")), Port: ptr(int32(8443)),
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/x")}, StatusCode: ptr(301)}}),
			check: func(t *testing.T, r *table.Route) {
				rr := r.Options.Policy.RequestRedirect
				if rr == nil || rr.Scheme != "https" || rr.Host != "b.example" || rr.Port != 8443 || rr.FullPath == nil || *rr.FullPath != "/x" || rr.PrefixPath != nil || rr.Code != 301 {
					t.Errorf("RequestRedirect = %+v", rr)
				}
			}},
		{name: "redirect: prefix path", rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}}),
			check: func(t *testing.T, r *table.Route) {
				if rr := r.Options.Policy.RequestRedirect; rr == nil || rr.PrefixPath == nil || *rr.PrefixPath != "/new" || rr.Scheme != "" || rr.Code != 302 {
					t.Errorf("RequestRedirect = %+v", rr)
				}
			}},
		{name: "request header modifier", rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: headers}),
			check: func(t *testing.T, r *table.Route) {
				e := r.Options.Policy.RequestHeaders
				if len(e.Set) != 1 || e.Set[0] != (table.Header{Name: "X-A", Value: "1"}) || len(e.Add) != 1 || e.Add[0] != (table.Header{Name: "X-B", Value: "2"}) || len(e.Remove) != 1 || e.Remove[0] != "X-C" {
					t.Errorf("RequestHeaders = %+v", e)
				}
				if !r.Options.Policy.ResponseHeaders.Empty() {
					t.Errorf("ResponseHeaders = %+v", r.Options.Policy.ResponseHeaders)
				}
			}},
		{name: "response header modifier", rule: rule(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: headers}),
			check: func(t *testing.T, r *table.Route) {
				if e := r.Options.Policy.ResponseHeaders; len(e.Set) != 1 || len(e.Add) != 1 || len(e.Remove) != 1 {
					t.Errorf("ResponseHeaders = %+v", e)
				}
			}},
		{name: "redirect to https, default 302", rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("https")}}}},
			check: func(t *testing.T, r *table.Route) {
				if rr := r.Options.Policy.RequestRedirect; rr == nil || rr.Scheme != "https" || rr.Code != 302 || r.Options.Policy.HTTPSRedirect != 0 {
					t.Errorf("RequestRedirect = %+v, HTTPSRedirect %d", rr, r.Options.Policy.HTTPSRedirect)
				}
			}},
		{name: "redirect to https, 301", rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301)}}}},
			check: func(t *testing.T, r *table.Route) {
				if rr := r.Options.Policy.RequestRedirect; rr == nil || rr.Code != 301 {
					t.Errorf("RequestRedirect = %+v", rr)
				}
			}},
		{name: "rewrite hostname", rule: rule(rewrite(nil, "internal.example")),
			check: func(t *testing.T, r *table.Route) {
				if r.Options.Policy.UpstreamHost != "internal.example" || r.Options.Policy.Rewrite != nil {
					t.Errorf("UpstreamHost %q, Rewrite %+v", r.Options.Policy.UpstreamHost, r.Options.Policy.Rewrite)
				}
			}},
		{name: "rewrite prefix", rule: rule(rewrite(&gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}, "")),
			check: func(t *testing.T, r *table.Route) {
				if rw := r.Options.Policy.Rewrite; rw == nil || rw.Target != "/new" || rw.Regex || r.Regex != nil {
					t.Errorf("Rewrite %+v, Regex %v", rw, r.Regex)
				}
			}},
		{name: "rewrite full path on a prefix route", rule: rule(rewrite(&gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/all/$1")}, "")),
			check: func(t *testing.T, r *table.Route) {
				rw := r.Options.Policy.Rewrite
				if rw == nil || !rw.Regex || r.Regex == nil {
					t.Fatalf("Rewrite %+v, Regex %v", rw, r.Regex)
				}
				// What the data plane does with a regex rewrite: "$1" stays literal.
				p := "/any/path"
				if got := string(r.Regex.ExpandString(nil, rw.Target, p, r.Regex.FindStringSubmatchIndex(p))); got != "/all/$1" {
					t.Errorf("full path rewrite of %s = %q", p, got)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, tc.rule)}))
			id := types.NamespacedName{Namespace: "infra", Name: "r"}
			acc := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionAccepted)
			r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
			if tc.refused {
				if acc != "False/UnsupportedValue" || r != nil {
					t.Errorf("Accepted = %s, route %v; want refused", acc, r)
				}
				return
			}
			if acc != "True/Accepted" || r == nil {
				t.Fatalf("Accepted = %s, route %v", acc, r)
			}
			if want := (table.SourceRef{Kind: table.KindHTTPRoute, NamespacedName: id}); r.Source != want {
				t.Errorf("route of %v, want %v", r.Source, want)
			}
			tc.check(t, r)
		})
	}
}

func TestGatewayWeights(t *testing.T) {
	for _, tc := range []struct {
		name         string
		refs         []gatewayv1.HTTPBackendRef
		main, canary string
		weight, of   int
		split        string // "svc:weight ..." of a split of three or more
	}{
		{"two weights split as a canary", []gatewayv1.HTTPBackendRef{backendRef("", "web", 80, 3), backendRef("", "v2", 80, 1)}, "app/web", "app/v2", 1, 4, ""},
		{"weight 0 takes nothing", []gatewayv1.HTTPBackendRef{backendRef("", "web", 80, 0), backendRef("", "v2", 80, 5)}, "app/v2", "", 0, 0, ""},
		{"default weights are 1", []gatewayv1.HTTPBackendRef{backendRef("", "web", 80, -1), backendRef("", "v2", 80, -1)}, "app/web", "app/v2", 1, 2, ""},
		{"three or more split by weight, weight 0 left out, a missing Service keeps its share (500)", []gatewayv1.HTTPBackendRef{
			backendRef("", "web", 80, 5), backendRef("", "v2", 80, 0), backendRef("", "v2", 80, 3), backendRef("", "gone", 80, 2)},
			"app/web", "", 0, 0, "app/web:5 app/v2:3 500:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, []parent{onGW("http")}, nil, gatewayv1.HTTPRouteRule{BackendRefs: tc.refs})}))
			r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
			if r == nil || r.Backend.Service.String() != tc.main {
				t.Fatalf("route %+v, want backend %s", r, tc.main)
			}
			var split []string
			for _, w := range r.Split {
				s := w.Backend.Service.String()
				if w.Backend.Unresolved {
					s = "500"
				}
				split = append(split, fmt.Sprintf("%s:%d", s, w.Weight))
			}
			if got := strings.Join(split, " "); got != tc.split {
				t.Errorf("split %q, want %q", got, tc.split)
			}
			switch {
			case tc.canary == "" && r.Canary != nil:
				t.Errorf("canary %+v, want none", r.Canary)
			case tc.canary != "" && (r.Canary == nil || r.Canary.Backend.Service.String() != tc.canary || r.Canary.Weight != tc.weight || r.Canary.WeightTotal != tc.of || r.Canary.Header != "" || r.Canary.Cookie != ""):
				t.Errorf("canary %+v, want %s %d/%d by weight only", r.Canary, tc.canary, tc.weight, tc.of)
			}
		})
	}
}

// A Gateway table serves only its Gateway's routes (an Ingress cannot even be given to
// Translate), its Problems are its routes', and without a Gateway it routes nothing.
func TestGatewayTableOnlyItsRoutes(t *testing.T) {
	in := gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("infra", "r", 0, []parent{onGW("same")}, []string{"a.example.com"}, toBackend("", "web"))})
	tab, problems := build(in)
	if tab.Ingresses != 0 || tab.Lookup("a.example.com", "/") != nil {
		t.Errorf("Gateway table has Ingress routes: %d, %v", tab.Ingresses, tab.Lookup("a.example.com", "/"))
	}
	probe{8080, "a.example.com", "/", "infra/web"}.check(t, tab)
	for _, p := range problems {
		if p.Object.Kind != table.KindHTTPRoute {
			t.Errorf("problem %+v not of an HTTPRoute", p)
		}
	}
	if len(tab.Routes()) != 1 || tab.Routes()[0].Source.Name != "r" {
		t.Errorf("Routes() = %v", tab.Routes())
	}
	in.Gateway = nil
	res := Translate(in)
	if res.Table.Gateway != nil || res.Status != nil || len(res.Table.Routes()) != 0 ||
		res.Table.Match(8080, httptest.NewRequest("GET", "http://a.example.com/", nil)) != nil {
		t.Errorf("no Gateway: status %v, routes %v", res.Status, res.Table.Routes())
	}
}

// Status is written only for the parentRefs naming the table's Gateway, one each, in order;
// a route attached twice to one listener counts once.
func TestGatewayRouteParents(t *testing.T) {
	r := httpRoute("infra", "r", 0, []parent{{ns: "infra", name: "other-gw", section: "http"}, onGW("http"), onGW("nope"), {ns: "infra", name: "gw", port: 80}},
		nil, toBackend("", "web"))
	tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{r}))
	if len(tab.Gateway.Routes) != 1 || len(tab.Gateway.Routes[0].Parents) != 3 {
		t.Fatalf("route statuses = %+v, want one route with 3 parents", tab.Gateway.Routes)
	}
	ps := tab.Gateway.Routes[0].Parents
	if *ps[0].ParentRef.SectionName != "http" || *ps[1].ParentRef.SectionName != "nope" || *ps[2].ParentRef.Port != 80 {
		t.Errorf("parentRefs = %+v", ps)
	}
	id := types.NamespacedName{Namespace: "infra", Name: "r"}
	for i, want := range []string{"True/Accepted", "False/NoMatchingParent", "True/Accepted"} {
		if got := condition(tab.Gateway, id, i, gatewayv1.RouteConditionAccepted); got != want {
			t.Errorf("parent %d Accepted = %s, want %s", i, got, want)
		}
	}
	if n := tab.Gateway.AttachedRoutes["http"]; n != 1 {
		t.Errorf("attachedRoutes[http] = %d, want 1", n)
	}
	if n := len(tab.Routes()); n != 1 {
		t.Errorf("%d routes, want 1 (one listener, one rule)", n)
	}
}

func TestRouteTimeout(t *testing.T) {
	d := func(s string) *gatewayv1.Duration { v := gatewayv1.Duration(s); return &v }
	for _, tc := range []struct {
		name string
		in   gatewayv1.HTTPRouteTimeouts
		want time.Duration
		bad  bool
	}{
		{"none", gatewayv1.HTTPRouteTimeouts{}, 0, false},
		{"request", gatewayv1.HTTPRouteTimeouts{Request: d("10s")}, 10 * time.Second, false},
		{"backendRequest shorter", gatewayv1.HTTPRouteTimeouts{Request: d("10s"), BackendRequest: d("500ms")}, 500 * time.Millisecond, false},
		{"request 0s disables it", gatewayv1.HTTPRouteTimeouts{Request: d("0s"), BackendRequest: d("2s")}, 2 * time.Second, false},
		{"hours", gatewayv1.HTTPRouteTimeouts{Request: d("1h")}, time.Hour, false},
		{"not a duration", gatewayv1.HTTPRouteTimeouts{Request: d("1 minute")}, 0, true},
		{"negative", gatewayv1.HTTPRouteTimeouts{BackendRequest: d("-1s")}, 0, true},
	} {
		got, why := routeTimeout(&tc.in)
		if got != tc.want || (why != "") != tc.bad {
			t.Errorf("%s: %v %q, want %v (refused %v)", tc.name, got, why, tc.want, tc.bad)
		}
	}
}
