package gatewayapi

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestHeaderEditsThen: the rule's edits followed by a backendRef's, as one set of edits.
func TestHeaderEditsThen(t *testing.T) {
	h := func(n, v string) table.Header { return table.Header{Name: n, Value: v} }
	norm := func(e table.HeaderEdits) table.HeaderEdits { // empty lists as nil
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
		a, b, want table.HeaderEdits
	}{
		{"empty rule", table.HeaderEdits{}, table.HeaderEdits{Set: []table.Header{h("X", "1")}}, table.HeaderEdits{Set: []table.Header{h("X", "1")}}},
		{"empty backendRef", table.HeaderEdits{Add: []table.Header{h("X", "1")}}, table.HeaderEdits{}, table.HeaderEdits{Add: []table.Header{h("X", "1")}}},
		{"the backendRef's set replaces the rule's set and add of that header",
			table.HeaderEdits{Set: []table.Header{h("X", "rule"), h("Y", "keep")}, Add: []table.Header{h("X", "more")}},
			table.HeaderEdits{Set: []table.Header{h("X", "backend")}},
			table.HeaderEdits{Set: []table.Header{h("Y", "keep"), h("X", "backend")}}},
		{"the backendRef's remove drops what the rule set",
			table.HeaderEdits{Set: []table.Header{h("X", "rule")}, Remove: []string{"Z"}},
			table.HeaderEdits{Remove: []string{"X"}},
			table.HeaderEdits{Remove: []string{"Z", "X"}}},
		{"adds of both are kept in order",
			table.HeaderEdits{Add: []table.Header{h("X", "1")}}, table.HeaderEdits{Add: []table.Header{h("X", "2")}},
			table.HeaderEdits{Add: []table.Header{h("X", "1"), h("X", "2")}}},
	} {
		if got := norm(thenEdits(tc.a, tc.b)); !reflect.DeepEqual(got, norm(tc.want)) {
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
	tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, []parent{onGW("http")}, nil, rule)}))
	r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
	if r == nil || len(r.Split) != 2 || r.Canary != nil {
		t.Fatalf("route %+v, want a split of two", r)
	}
	for i, want := range []string{"web", "v2"} {
		w := r.Split[i]
		if !w.Edits || w.Backend.Service.Name != want || w.Weight != 10 ||
			!reflect.DeepEqual(w.RequestHeaders.Set, []table.Header{{Name: "X-Rule", Value: "1"}, {Name: "Backend", Value: want}}) {
			t.Errorf("split[%d] = %+v, want %s with X-Rule from the rule and its own Backend header", i, w, want)
		}
	}

	bad := backendRef("", "web", 80, -1)
	bad.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}}
	host := backendRef("", "web", 80, -1)
	host.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Host", Value: "internal"}}}}}
	for name, ref := range map[string]gatewayv1.HTTPBackendRef{"a redirect on a backendRef": bad, "Host set by a backendRef": host} {
		tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "bad", 0, []parent{onGW("http")}, nil,
			gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{ref}})}))
		if got := routeCondition(tab.Gateway, table.KindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "bad"}, 0, gatewayv1.RouteConditionAccepted); got != "False/UnsupportedValue" {
			t.Errorf("%s: Accepted = %s, want False/UnsupportedValue", name, got)
		}
	}
}
