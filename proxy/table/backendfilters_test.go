package table

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestHeaderEditsThen: the rule's edits followed by a backendRef's, as one set of edits.
func TestHeaderEditsThen(t *testing.T) {
	h := func(n, v string) Header { return Header{Name: n, Value: v} }
	norm := func(e HeaderEdits) HeaderEdits { // empty lists as nil
		if len(e.Set) == 0 {
			e.Set = nil
		}
		if len(e.Add) == 0 {
			e.Add = nil
		}
		if len(e.Remove) == 0 {
			e.Remove = nil
		}
		return e
	}
	for _, tc := range []struct {
		name       string
		a, b, want HeaderEdits
	}{
		{"empty rule", HeaderEdits{}, HeaderEdits{Set: []Header{h("X", "1")}}, HeaderEdits{Set: []Header{h("X", "1")}}},
		{"empty backendRef", HeaderEdits{Add: []Header{h("X", "1")}}, HeaderEdits{}, HeaderEdits{Add: []Header{h("X", "1")}}},
		{"the backendRef's set replaces the rule's set and add of that header",
			HeaderEdits{Set: []Header{h("X", "rule"), h("Y", "keep")}, Add: []Header{h("X", "more")}},
			HeaderEdits{Set: []Header{h("X", "backend")}},
			HeaderEdits{Set: []Header{h("Y", "keep"), h("X", "backend")}}},
		{"the backendRef's remove drops what the rule set",
			HeaderEdits{Set: []Header{h("X", "rule")}, Remove: []string{"Z"}},
			HeaderEdits{Remove: []string{"X"}},
			HeaderEdits{Remove: []string{"Z", "X"}}},
		{"adds of both are kept in order",
			HeaderEdits{Add: []Header{h("X", "1")}}, HeaderEdits{Add: []Header{h("X", "2")}},
			HeaderEdits{Add: []Header{h("X", "1"), h("X", "2")}}},
	} {
		if got := norm(tc.a.then(tc.b)); !reflect.DeepEqual(got, norm(tc.want)) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestBackendRefFilters: header modifiers on backendRefs make the rule a split whose backends
// carry the rule's edits followed by their own; other filter types on a backendRef, and
// invalid headers, refuse the route naming the field.
func TestBackendRefFilters(t *testing.T) {
	mod := func(set string) []gatewayv1.HTTPRouteFilter {
		return []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: set}}}}}
	}
	a, b := backendRef("", "web", 80, 10), backendRef("", "v2", 80, 10)
	a.Filters, b.Filters = mod("web"), mod("v2")
	rule := gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{a, b},
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: "rule"}, {Name: "X-Rule", Value: "1"}}}}}}
	tab, _ := Build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, []parent{onGW("http")}, nil, rule)}))
	r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
	if r == nil || len(r.Split) != 2 || r.Canary != nil {
		t.Fatalf("route %+v, want a split of two", r)
	}
	for i, want := range []string{"web", "v2"} {
		w := r.Split[i]
		if !w.Edits || w.Backend.Service.Name != want || w.Weight != 10 ||
			!reflect.DeepEqual(w.RequestHeaders.Set, []Header{{"X-Rule", "1"}, {"Backend", want}}) {
			t.Errorf("split[%d] = %+v, want %s with X-Rule from the rule and its own Backend header", i, w, want)
		}
	}

	bad := backendRef("", "web", 80, -1)
	bad.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}}
	host := backendRef("", "web", 80, -1)
	host.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Host", Value: "internal"}}}}}
	for name, ref := range map[string]gatewayv1.HTTPBackendRef{"a redirect on a backendRef": bad, "Host set by a backendRef": host} {
		tab, _ := Build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "bad", 0, []parent{onGW("http")}, nil,
			gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{ref}})}))
		if got := routeCondition(tab.Gateway, KindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "bad"}, 0, gatewayv1.RouteConditionAccepted); got != "False/UnsupportedValue" {
			t.Errorf("%s: Accepted = %s, want False/UnsupportedValue", name, got)
		}
	}
}
