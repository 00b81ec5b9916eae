package gatewayapi

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestGatewayRegularExpressions: HTTPRoute RegularExpression matches of path, header and
// query parameter (RE2, each Anchored over the whole value); a RegularExpression path ranks
// after Exact and before every prefix, the longer expression first; hostile near misses
// first.
func TestGatewayRegularExpressions(t *testing.T) {
	re := func(path string, svc string) gatewayv1.HTTPRouteRule {
		return match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr(path)}}, svc)
	}
	hdr := match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/h")},
		Headers: []gatewayv1.HTTPHeaderMatch{{Type: ptr(gatewayv1.HeaderMatchRegularExpression), Name: "X-Version", Value: "v[0-9]+"}}}, "v2")
	query := match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/q")},
		QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: ptr(gatewayv1.QueryParamMatchRegularExpression), Name: "id", Value: "[a-f0-9]{4}"}}}, "v2")
	hr := httpRoute("app", "r", 0, []parent{onGW("http")}, nil,
		match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptr("/")}}, "web"),
		re(`/api/v[0-9]+/users`, "v2"),
		re(`/api/.*`, "gone"),
		match(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchExact), Value: ptr("/api/v1/users")}}, "web"),
		hdr, query,
	)
	tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{hr}))
	if got := routeCondition(tab.Gateway, table.KindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "r"}, 0, gatewayv1.RouteConditionAccepted); got != "True/Accepted" {
		t.Fatalf("Accepted = %s", got)
	}
	for _, tc := range []struct {
		path    string
		headers map[string]string
		want    string
	}{
		// Hostile first: an expression covers the whole path or value, never a part.
		{"/x/api/v2/users", nil, "app/web"},                      // not /api/… at the start: the catch-all
		{"/api/v2/users/1", nil, "app/gone"},                     // /api/.*: the longer expression does not match all of it
		{"/h", map[string]string{"X-Version": "v1x"}, "app/web"}, // header regex Anchored: catch-all
		{"/q?id=abcd1", nil, "app/web"},                          // query regex Anchored
		{"/api/v1/users", nil, "app/web"},                        // Exact before any expression
		{"/api/v22/users", nil, "app/v2"},                        // the longer expression first
		{"/api/other", nil, "app/gone"},
		{"/h", map[string]string{"X-Version": "v12"}, "app/v2"},
		{"/q?id=ab12", nil, "app/v2"},
	} {
		req := httptest.NewRequest("GET", "http://x"+tc.path, nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		got := ""
		if r := tab.Match(80, req); r != nil {
			got = r.Backend.Service.String()
		}
		if got != tc.want {
			t.Errorf("%s %v → %q, want %q", tc.path, tc.headers, got, tc.want)
		}
	}

	// Refused: what cannot be served exactly.
	prefixRewrite := re(`/api/.*`, "web")
	prefixRewrite.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/v2")}}}}
	prefixRedirect := re(`/api/.*`, "web")
	prefixRedirect.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/v2")}}}}
	badHeader := match(gatewayv1.HTTPRouteMatch{Headers: []gatewayv1.HTTPHeaderMatch{{Type: ptr(gatewayv1.HeaderMatchRegularExpression), Name: "X", Value: "a)"}}}, "web")
	badQuery := match(gatewayv1.HTTPRouteMatch{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: ptr(gatewayv1.QueryParamMatchRegularExpression), Name: "q", Value: "[z-a]"}}}, "web")
	for name, rule := range map[string]gatewayv1.HTTPRouteRule{"prefix rewrite": prefixRewrite, "prefix redirect": prefixRedirect,
		"header expression": badHeader, "query expression": badQuery} {
		tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "bad", 0, []parent{onGW("http")}, nil, rule)}))
		if got := routeCondition(tab.Gateway, table.KindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "bad"}, 0, gatewayv1.RouteConditionAccepted); got != "False/UnsupportedValue" {
			t.Errorf("%s: Accepted = %s, want False/UnsupportedValue", name, got)
		}
	}

	// A full-path rewrite on an expression route replaces the whole path.
	full := re(`/old/.*`, "web")
	full.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/new$1")}}}}
	tab, _ = build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("app", "full", 0, []parent{onGW("http")}, nil, full)}))
	r := tab.Match(80, httptest.NewRequest("GET", "http://x/old/thing", nil))
	if r == nil || r.Options.Policy.Rewrite == nil || !r.Options.Policy.Rewrite.Regex || r.Options.Policy.Rewrite.Target != "/new$$1" || r.Regex.String() != `^(?:/old/.*)$` {
		t.Fatalf("full-path rewrite route %+v", r)
	}
}
