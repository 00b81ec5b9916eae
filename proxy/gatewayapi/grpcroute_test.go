package gatewayapi

import (
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

func grpcRoute(ns, name string, age int, parents []parent, hosts []string, rules ...gatewayv1.GRPCRouteRule) *gatewayv1.GRPCRoute {
	hr := httpRoute(ns, name, age, parents, hosts)
	return &gatewayv1.GRPCRoute{ObjectMeta: hr.ObjectMeta, Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: hr.Spec.CommonRouteSpec,
		Hostnames: hr.Spec.Hostnames, Rules: rules}}
}

func grpcBackend(ns, name string, weight int32) gatewayv1.GRPCBackendRef {
	return gatewayv1.GRPCBackendRef{BackendRef: backendRef(ns, name, 80, weight).BackendRef}
}

// grpcMethod is a rule matching method match mm (type Exact unless typ is set) and headers.
func grpcMethod(svc, method string, typ gatewayv1.GRPCMethodMatchType, to string, headers ...gatewayv1.GRPCHeaderMatch) gatewayv1.GRPCRouteRule {
	m := gatewayv1.GRPCRouteMatch{Headers: headers}
	if svc != "" || method != "" {
		m.Method = &gatewayv1.GRPCMethodMatch{}
		if svc != "" {
			m.Method.Service = ptr(svc)
		}
		if method != "" {
			m.Method.Method = ptr(method)
		}
		if typ != "" {
			m.Method.Type = ptr(typ)
		}
	}
	return gatewayv1.GRPCRouteRule{Matches: []gatewayv1.GRPCRouteMatch{m}, BackendRefs: []gatewayv1.GRPCBackendRef{grpcBackend("", to, -1)}}
}

// routeCondition is status/reason of condition typ of parent i of route kind/id, or "none".
func routeCondition(st *table.GatewayStatus, kind string, id types.NamespacedName, i int, typ gatewayv1.RouteConditionType) string {
	for _, rs := range st.Routes {
		if rs.Kind != kind || rs.Route != id || i >= len(rs.Parents) {
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

// TestGRPCRouteMatching: a GRPCRoute's method matches become paths (exact service and method,
// service prefix by element, method-only and RegularExpression as a regular expression over
// the whole path), its headers header matches, in gRPC's precedence: service, then method,
// then header count; its backends are h2c; a call that takes no rule finds no route (404, which
// gRPC clients read as Unimplemented).
func TestGRPCRouteMatching(t *testing.T) {
	red := gatewayv1.GRPCHeaderMatch{Name: "color", Value: "red"}
	two := gatewayv1.GRPCHeaderMatch{Name: "Version", Value: "two"}
	gr := grpcRoute("app", "calls", 0, []parent{onGW("http")}, nil,
		grpcMethod("", "", "", "v2", red),
		grpcMethod("", "B", "", "web"),
		grpcMethod("pkg.S", "", "", "v2"),
		grpcMethod("pkg.S", "A", "", "web"),
		grpcMethod(`pkg\.T`, "C.*", gatewayv1.GRPCMethodMatchRegularExpression, "web"),
		grpcMethod("", "", "", "web", red, two),
	)
	in := gatewayWorld(nil)
	in.GRPCRoutes = []*gatewayv1.GRPCRoute{gr}
	tab, _ := build(in)
	if got := routeCondition(tab.Gateway, table.KindGRPCRoute, types.NamespacedName{Namespace: "app", Name: "calls"}, 0, gatewayv1.RouteConditionAccepted); got != "True/Accepted" {
		t.Fatalf("Accepted = %s, want True/Accepted", got)
	}
	for _, tc := range []struct {
		path    string
		headers map[string]string
		want    string // "ns/svc", or "" for no route
	}{
		// Hostile first: near misses take nothing.
		{"/pkg.SX/A", nil, ""},     // a service prefix is by whole element
		{"/pkg.T/Dee", nil, ""},    // the method expression covers the whole method
		{"/pkgxT/Cool", nil, ""},   // the service expression is Anchored, "." escaped
		{"/a/pkg.T/Cool", nil, ""}, // and covers the whole service
		{"/x.Y/BB", nil, ""},       // method-only is exact
		{"/x.Y/Z", map[string]string{"Color": "blue"}, ""},
		{"/pkg.S/A", nil, "app/web"},   // exact service and method
		{"/pkg.S/Z", nil, "app/v2"},    // the service
		{"/pkg.S/B", nil, "app/v2"},    // the service before a method alone
		{"/other.T/B", nil, "app/web"}, // a method of any service
		{"/pkg.T/Cool", nil, "app/web"},
		{"/x.Y/Z", map[string]string{"Color": "red"}, "app/v2"},
		{"/x.Y/Z", map[string]string{"color": "red", "version": "two"}, "app/web"}, // more headers first
	} {
		req := httptest.NewRequest("POST", "http://grpc.example.com"+tc.path, nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		r := tab.Match(80, req)
		got := ""
		if r != nil {
			got = r.Backend.Service.String()
			if r.Source != (table.SourceRef{Kind: table.KindGRPCRoute, NamespacedName: types.NamespacedName{Namespace: "app", Name: "calls"}}) {
				t.Errorf("%s: route of %s, want GRPCRoute app/calls", tc.path, r.Source)
			}
			if r.Backend.Protocol != table.ProtocolH2C {
				t.Errorf("%s: backend protocol %s, want h2c", tc.path, r.Backend.Protocol)
			}
		}
		if got != tc.want {
			t.Errorf("Match(%s %v) = %q, want %q", tc.path, tc.headers, got, tc.want)
		}
	}
}

// TestGRPCRouteStatus: what a GRPCRoute may refer to and where it may attach, hostile cases
// first; its parent statuses are reported under its own kind beside an HTTPRoute of the same
// name, and both count on the listener.
func TestGRPCRouteStatus(t *testing.T) {
	grpcGrant := func(g *gatewayv1beta1.ReferenceGrant) *gatewayv1beta1.ReferenceGrant {
		g.Spec.From[0].Kind = table.KindGRPCRoute
		return g
	}
	headerRegex := gatewayv1.GRPCHeaderMatch{Type: ptr(gatewayv1.GRPCHeaderMatchRegularExpression), Name: "color", Value: "r.*"}
	mirrorRule := grpcMethod("pkg.S", "", "", "web")
	mirrorRule.Filters = []gatewayv1.GRPCRouteFilter{{Type: gatewayv1.GRPCRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendRef("", "v2", 80, -1).BackendObjectReference}}}
	filteredRef := grpcMethod("pkg.S", "", "", "web")
	filteredRef.BackendRefs[0].Filters = []gatewayv1.GRPCRouteFilter{{Type: gatewayv1.GRPCRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendRef("", "v2", 80, -1).BackendObjectReference}}}
	otherNS := gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{grpcBackend("other", "web", -1)}}
	cases := []struct {
		name           string
		parent         parent
		rule           gatewayv1.GRPCRouteRule
		grants         []*gatewayv1beta1.ReferenceGrant
		accepted, refs string
	}{
		{name: "backend in another namespace without a ReferenceGrant", parent: onGW("http"), rule: otherNS,
			accepted: "True/Accepted", refs: "False/RefNotPermitted"},
		{name: "a ReferenceGrant for HTTPRoutes does not open it to GRPCRoutes", parent: onGW("http"), rule: otherNS,
			grants: []*gatewayv1beta1.ReferenceGrant{grant("other", "app", "web")}, accepted: "True/Accepted", refs: "False/RefNotPermitted"},
		{name: "header RegularExpression", parent: onGW("http"), rule: grpcMethod("", "", "", "web", headerRegex),
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "method expression that does not compile", parent: onGW("http"), rule: grpcMethod("pkg.(", "", gatewayv1.GRPCMethodMatchRegularExpression, "web"),
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "exact service with a slash", parent: onGW("http"), rule: grpcMethod("pkg/S", "A", "", "web"),
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "RequestMirror is not served on GRPCRoutes", parent: onGW("http"), rule: mirrorRule,
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "a backendRef RequestMirror filter", parent: onGW("http"), rule: filteredRef,
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "missing Service", parent: onGW("http"), rule: grpcMethod("pkg.S", "", "", "gone"),
			accepted: "True/Accepted", refs: "False/BackendNotFound"},
		{name: "TCP listener", parent: onGW("tcp"), rule: grpcMethod("pkg.S", "", "", "web"),
			accepted: "False/NotAllowedByListeners", refs: "True/ResolvedRefs"},
		// What is allowed.
		{name: "a ReferenceGrant for GRPCRoutes", parent: onGW("http"), rule: otherNS,
			grants: []*gatewayv1beta1.ReferenceGrant{grpcGrant(grant("other", "app", "web"))}, accepted: "True/Accepted", refs: "True/ResolvedRefs"},
		{name: "a listener that allows GRPCRoutes only", parent: onGW("grpc-only"), rule: grpcMethod("pkg.S", "", "", "web"),
			accepted: "True/Accepted", refs: "True/ResolvedRefs"},
	}
	id := types.NamespacedName{Namespace: "app", Name: "r"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewayWorld(nil, tc.grants...)
			in.GRPCRoutes = []*gatewayv1.GRPCRoute{grpcRoute("app", "r", 0, []parent{tc.parent}, nil, tc.rule)}
			tab, _ := build(in)
			if got := routeCondition(tab.Gateway, table.KindGRPCRoute, id, 0, gatewayv1.RouteConditionAccepted); got != tc.accepted {
				t.Errorf("Accepted = %s, want %s", got, tc.accepted)
			}
			if got := routeCondition(tab.Gateway, table.KindGRPCRoute, id, 0, gatewayv1.RouteConditionResolvedRefs); got != tc.refs {
				t.Errorf("ResolvedRefs = %s, want %s", got, tc.refs)
			}
			for _, rs := range tab.Gateway.Routes {
				for _, p := range rs.Parents {
					if p.Conditions[0].ObservedGeneration != 3 {
						t.Errorf("observedGeneration %d, want 3", p.Conditions[0].ObservedGeneration)
					}
				}
			}
		})
	}

	t.Run("an HTTPRoute and a GRPCRoute of one name", func(t *testing.T) {
		in := gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, []parent{onGW("http")}, nil, toBackend("", "web"))})
		in.GRPCRoutes = []*gatewayv1.GRPCRoute{grpcRoute("app", "r", 0, []parent{onGW("http")}, nil, grpcMethod("", "", "", "gone"))}
		httpOnly := testListener("http-only", 8090, "", gatewayv1.NamespacesFromAll)
		httpOnly.AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: table.KindHTTPRoute}}
		in.Gateway.Spec.Listeners = append(in.Gateway.Spec.Listeners, httpOnly)
		in.GRPCRoutes = append(in.GRPCRoutes, grpcRoute("app", "to-http-only", 0, []parent{onGW("http-only")}, nil, grpcMethod("pkg.S", "", "", "web")))
		tab, _ := build(in)
		st := tab.Gateway
		if got := routeCondition(st, table.KindHTTPRoute, id, 0, gatewayv1.RouteConditionResolvedRefs); got != "True/ResolvedRefs" {
			t.Errorf("HTTPRoute ResolvedRefs = %s, want True (the GRPCRoute's missing Service is not its)", got)
		}
		if got := routeCondition(st, table.KindGRPCRoute, id, 0, gatewayv1.RouteConditionResolvedRefs); got != "False/BackendNotFound" {
			t.Errorf("GRPCRoute ResolvedRefs = %s, want False/BackendNotFound", got)
		}
		if got := routeCondition(st, table.KindGRPCRoute, types.NamespacedName{Namespace: "app", Name: "to-http-only"}, 0, gatewayv1.RouteConditionAccepted); got != "False/NotAllowedByListeners" {
			t.Errorf("GRPCRoute on an HTTPRoute-only listener: Accepted = %s, want False/NotAllowedByListeners", got)
		}
		if n := st.AttachedRoutes["http"]; n != 2 {
			t.Errorf("listener http has %d attached routes, want 2 (one of each kind)", n)
		}
		if n := st.AttachedRoutes["http-only"]; n != 0 {
			t.Errorf("listener http-only has %d attached routes, want 0", n)
		}
		// Two catch-alls of the same age and name: ordered by kind, GRPCRoute first.
		r := tab.Match(80, httptest.NewRequest("POST", "http://h/pkg.S/A", nil))
		if r == nil || r.Source.Kind != table.KindGRPCRoute {
			t.Errorf("Match = %+v, want the GRPCRoute (same age and name: by kind)", r)
		}
	})

	t.Run("weights: a backend of weight 0 gets nothing", func(t *testing.T) {
		rule := gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{grpcBackend("", "web", 70), grpcBackend("", "v2", 30), grpcBackend("", "gone", 0)}}
		in := gatewayWorld(nil)
		in.GRPCRoutes = []*gatewayv1.GRPCRoute{grpcRoute("app", "r", 0, []parent{onGW("http")}, nil, rule)}
		in.GRPCRoutes[0].CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000, 0))
		tab, _ := build(in)
		r := tab.Match(80, httptest.NewRequest("POST", "http://h/pkg.S/A", nil))
		if r == nil || r.Canary == nil || r.Backend.Service.Name != "web" || r.Canary.Backend.Service.Name != "v2" ||
			r.Canary.Weight != 30 || r.Canary.WeightTotal != 100 {
			t.Fatalf("route %+v, want web 70 / v2 30", r)
		}
		if got := routeCondition(tab.Gateway, table.KindGRPCRoute, id, 0, gatewayv1.RouteConditionResolvedRefs); got != "False/BackendNotFound" {
			t.Errorf("ResolvedRefs = %s, want False/BackendNotFound (the weight-0 ref names no Service)", got)
		}
	})
}

// TestHTTPRouteH2CBackend: an HTTPRoute reaches a Service port of appProtocol
// kubernetes.io/h2c over HTTP/2 without TLS, any other port over HTTP/1.1; the two are
// distinct backends even on one Service.
func TestHTTPRouteH2CBackend(t *testing.T) {
	in := gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, []parent{onGW("http")}, nil,
		match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/h2c")}}, ""),
		match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/h1")}}, ""))})
	rules := in.HTTPRoutes[0].Spec.Rules
	rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backendRef("", "web", 81, -1)}
	rules[1].BackendRefs = []gatewayv1.HTTPBackendRef{backendRef("", "web", 80, -1)}
	for _, svc := range in.Services {
		if svc.Namespace == "app" && svc.Name == "web" {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "h2c", Port: 81, AppProtocol: ptr(AppProtocolH2C)})
		}
	}
	tab, _ := build(in)
	for path, want := range map[string]table.Protocol{"/h2c": table.ProtocolH2C, "/h1": table.ProtocolHTTP} {
		r := tab.Match(80, httptest.NewRequest("GET", "http://h"+path, nil))
		if r == nil || r.Backend.Protocol != want {
			t.Errorf("%s: route %+v, want a backend of protocol %s", path, r, want)
		}
	}
}
