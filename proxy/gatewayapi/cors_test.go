package gatewayapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// corsFilter is the HTTPRoute filter of type CORS with f's settings.
func corsFilter(f *gatewayv1.HTTPCORSFilter) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterCORS, CORS: f}
}

func origins(o ...string) []gatewayv1.CORSOrigin {
	out := make([]gatewayv1.CORSOrigin, len(o))
	for i, s := range o {
		out[i] = gatewayv1.CORSOrigin(s)
	}
	return out
}

// TestGatewayCORSOrigins: which request Origins an allowOrigins list admits. Hostile first:
// an allowed origin as a substring, prefix or suffix of another host, another scheme or port,
// "null", and things that are not origins at all.
func TestGatewayCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allow   []string
		origin  string
		allowed bool
	}{
		{"allowed host as a suffix of another label", []string{"https://example.com"}, "https://evilexample.com", false},
		{"wildcard's domain with a suffix after it", []string{"https://*.example.com"}, "https://example.com.evil.test", false},
		{"wildcard's domain as the end of a label", []string{"https://*.example.com"}, "https://evilexample.com", false},
		{"wildcard needs a label in its place", []string{"https://*.example.com"}, "https://example.com", false},
		{"wildcard does not match an empty label", []string{"https://*.example.com"}, "https://.example.com", false},
		{"exact origin with a path", []string{"https://example.com"}, "https://example.com/", false},
		{"exact origin with user information", []string{"https://example.com"}, "https://evil.test@example.com", false},
		{"exact origin followed by more host", []string{"https://example.com"}, "https://example.com.evil.test", false},
		{"another scheme", []string{"https://example.com"}, "http://example.com", false},
		{"another port", []string{"https://example.com"}, "https://example.com:8443", false},
		{"the default port of another scheme", []string{"https://example.com"}, "https://example.com:80", false},
		{"wildcard with another port", []string{"https://*.example.com"}, "https://a.example.com:8443", false},
		{"wildcard host with another scheme", []string{"https://*"}, "http://a.example", false},
		{"null origin under an exact list", []string{"https://example.com"}, "null", false},
		{"null origin under *", []string{"*"}, "null", false},
		{"no scheme under *", []string{"*"}, "example.com", false},
		{"empty port under *", []string{"*"}, "https://example.com:", false},
		{"port out of range under *", []string{"*"}, "https://example.com:65536", false},
		{"signed port under *", []string{"*"}, "https://example.com:+443", false},
		{"a * in the request's host", []string{"https://*.example.com"}, "https://*.example.com", false},
		{"a trailing dot is another host", []string{"https://example.com"}, "https://example.com.", false},
		{"control character in the host", []string{"*"}, "https://a\x00.example", false},
		{"no origin listed", nil, "https://example.com", false},
		{"exact", []string{"https://www.foo.com"}, "https://www.foo.com", true},
		{"exact, host case differs", []string{"https://www.foo.com"}, "HTTPS://WWW.Foo.com", true},
		{"exact, the default port written", []string{"https://www.foo.com"}, "https://www.foo.com:443", true},
		{"exact, the default port in the pattern", []string{"http://www.foo.com:80"}, "http://www.foo.com", true},
		{"exact with a port", []string{"http://localhost:3000"}, "http://localhost:3000", true},
		{"exact IPv4 address", []string{"http://10.0.0.1:8080"}, "http://10.0.0.1:8080", true},
		{"wildcard, one label", []string{"https://www.foo.com", "https://*.bar.com"}, "https://www.bar.com", true},
		{"wildcard, several labels", []string{"https://*.bar.com"}, "https://xpto.www.bar.com", true},
		{"wildcard with a port", []string{"https://*.bar.com:8443"}, "https://a.bar.com:8443", true},
		{"wildcard host alone", []string{"https://*"}, "https://anything.example", true},
		{"* with a port", []string{"*"}, "https://foobar.com:12345", true},
		{"* and an IPv6 literal", []string{"*"}, "http://[::1]:8080", true},
		{"* and another scheme", []string{"*"}, "capacitor://localhost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, why := gatewayCORS(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins(tc.allow...)})
			if why != "" {
				t.Fatalf("compile %v: %s", tc.allow, why)
			}
			if got := c.Gateway.AllowsOrigin(tc.origin); got != tc.allowed {
				t.Errorf("allowOrigins %v, Origin %q: allowed %v, want %v", tc.allow, tc.origin, got, tc.allowed)
			}
		})
	}
}

// TestGatewayCORSPreflightChecks: the methods and headers a preflight may ask for.
func TestGatewayCORSPreflightChecks(t *testing.T) {
	listed := &table.GatewayCORS{Methods: []string{"PUT", "OPTIONS"}, Headers: []string{"x-header-1", "X-Header-2"}}
	any := &table.GatewayCORS{AnyMethod: true, AnyHeader: true}
	none := &table.GatewayCORS{}
	for _, tc := range []struct {
		name    string
		g       *table.GatewayCORS
		method  string
		allowed bool
	}{
		{"a method not listed", listed, "DELETE", false},
		{"methods are case-sensitive", listed, "put", false},
		{"not a token, even under *", any, "PUT X", false},
		{"empty", any, "", false},
		{"listed", listed, "PUT", true},
		{"safelisted, not listed", listed, "POST", true},
		{"safelisted, nothing listed", none, "HEAD", true},
		{"nothing listed", none, "PATCH", false},
		{"*", any, "PATCH", true},
	} {
		if got := tc.g.AllowsMethod(tc.method); got != tc.allowed {
			t.Errorf("%s: AllowsMethod(%q) = %v, want %v", tc.name, tc.method, got, tc.allowed)
		}
	}
	for _, tc := range []struct {
		name    string
		g       *table.GatewayCORS
		values  []string
		names   []string
		allowed bool
	}{
		{"one header not listed", listed, []string{"x-header-1, x-header-3"}, nil, false},
		{"not listed in a second header line", listed, []string{"x-header-1", "authorization"}, nil, false},
		{"not a header name, even under *", any, []string{"x-a, x b"}, nil, false},
		{"nothing listed", none, []string{"content-type"}, nil, false},
		{"listed, names compared case-insensitively", listed, []string{"X-HEADER-1,x-header-2"}, []string{"X-HEADER-1", "x-header-2"}, true},
		{"none asked for", none, nil, nil, true},
		{"empty elements dropped", listed, []string{" , x-header-1 ,"}, []string{"x-header-1"}, true},
		{"*", any, []string{"x-header-1, x-header-2", "authorization"}, []string{"x-header-1", "x-header-2", "authorization"}, true},
	} {
		names, ok := tc.g.AllowsHeaders(tc.values)
		if ok != tc.allowed || ok && !cmp.Equal(names, tc.names) {
			t.Errorf("%s: AllowsHeaders(%q) = %q, %v; want %q, %v", tc.name, tc.values, names, ok, tc.names, tc.allowed)
		}
	}
}

// acceptedMessage is the message of the Accepted condition of route's first parent.
func acceptedMessage(st *table.GatewayStatus, route types.NamespacedName) string {
	for _, rs := range st.Routes {
		if rs.Route == route && len(rs.Parents) > 0 {
			for _, c := range rs.Parents[0].Conditions {
				if c.Type == string(gatewayv1.RouteConditionAccepted) {
					return c.Message
				}
			}
		}
	}
	return ""
}

// TestGatewayCORSFilter: an HTTPRoute's CORS filter compiled through Build into
// Policy.CORS; invalid values refuse the route (Accepted=False, UnsupportedValue) with a
// message naming the field.
func TestGatewayCORSFilter(t *testing.T) {
	yes := true
	cases := []struct {
		name    string
		filters []gatewayv1.HTTPRouteFilter
		refused string // the start of the Accepted message when refused
		want    *table.CORS
	}{
		{name: "an origin with a path", filters: []gatewayv1.HTTPRouteFilter{
			{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x", Value: "1"}}}},
			corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example", "https://b.example", "https://c.example/path")})},
			refused: `spec.rules[0].filters[1].cors.allowOrigins[2]: "https://c.example/path" is not an origin`},
		{name: "a * inside a label", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a*.example.com")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[0]: "},
		{name: "a * that is not the leftmost label", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.*.example.com")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[0]: "},
		{name: "a scheme other than http and https", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("ftp://a.example")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[0]: "},
		{name: "null as an origin", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("null")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[0]: "},
		{name: "port 0", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example:0")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[0]: "},
		{name: "* beside other origins", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example", "*")})},
			refused: "spec.rules[0].filters[0].cors.allowOrigins[1]: * cannot be listed with other origins"},
		{name: "a method that is not one", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "get"}})},
			refused: `spec.rules[0].filters[0].cors.allowMethods[1]: "get" is not a method`},
		{name: "* beside other methods", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*", "GET"}})},
			refused: "spec.rules[0].filters[0].cors.allowMethods[0]: * cannot be listed with other values"},
		{name: "a header name with a space", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowHeaders: []gatewayv1.HTTPHeaderName{"x a"}})},
			refused: `spec.rules[0].filters[0].cors.allowHeaders[0]: "x a" is not a header name`},
		{name: "* beside other headers", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{AllowHeaders: []gatewayv1.HTTPHeaderName{"x-a", "*"}})},
			refused: "spec.rules[0].filters[0].cors.allowHeaders[1]: * cannot be listed with other values"},
		{name: "an expose header with a colon", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{ExposeHeaders: []gatewayv1.HTTPHeaderName{":status"}})},
			refused: `spec.rules[0].filters[0].cors.exposeHeaders[0]: ":status" is not a header name`},
		{name: "negative maxAge", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{MaxAge: -1})},
			refused: "spec.rules[0].filters[0].cors.maxAge: -1 is not a number of seconds"},
		{name: "settings missing", filters: []gatewayv1.HTTPRouteFilter{corsFilter(nil)},
			refused: "spec.rules[0].filters[0].cors: the filter's settings are missing"},
		{name: "repeated", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{}), corsFilter(&gatewayv1.HTTPCORSFilter{})},
			refused: "spec.rules[0].filters[1]: CORS filter cannot be repeated"},
		{name: "lists, credentials, maxAge (the conformance route cors-1)", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{
			AllowOrigins: origins("https://www.foo.com", "https://*.bar.com"), AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "OPTIONS"},
			AllowHeaders: []gatewayv1.HTTPHeaderName{"x-header-1", "x-header-2"}, ExposeHeaders: []gatewayv1.HTTPHeaderName{"x-header-3", "x-header-4"},
			AllowCredentials: &yes, MaxAge: 3600})},
			want: &table.CORS{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com"}, AllowMethods: "GET, OPTIONS", AllowHeaders: "x-header-1, x-header-2",
				ExposeHeaders: "x-header-3, x-header-4", AllowCredentials: true, MaxAge: 3600, Gateway: &table.GatewayCORS{
					Origins: []table.OriginPattern{{Scheme: "https", Host: "www.foo.com", Port: 443}, {Scheme: "https", Host: ".bar.com", Wildcard: true, Port: 443}},
					Methods: []string{"GET", "OPTIONS"}, Headers: []string{"x-header-1", "x-header-2"}}}},
		{name: "wildcards; maxAge unset is 5", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{
			AllowOrigins: origins("*"), AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"}, AllowHeaders: []gatewayv1.HTTPHeaderName{"*"},
			ExposeHeaders: []gatewayv1.HTTPHeaderName{"x-a", "*"}})},
			want: &table.CORS{AllowOrigins: []string{"*"}, MaxAge: 5, Gateway: &table.GatewayCORS{AnyOrigin: true, AnyMethod: true, AnyHeader: true, AnyExpose: true}}},
		{name: "nothing set: no origin allowed", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{})},
			want: &table.CORS{MaxAge: 5, Gateway: &table.GatewayCORS{}}},
		{name: "origins with ports and upper case", filters: []gatewayv1.HTTPRouteFilter{corsFilter(&gatewayv1.HTTPCORSFilter{
			AllowOrigins: origins("http://App.Example:8080", "https://*:8443", "http://*")})},
			want: &table.CORS{AllowOrigins: []string{"http://App.Example:8080", "https://*:8443", "http://*"}, MaxAge: 5, Gateway: &table.GatewayCORS{
				Origins: []table.OriginPattern{{Scheme: "http", Host: "app.example", Port: 8080}, {Scheme: "https", Wildcard: true, Port: 8443}, {Scheme: "http", Wildcard: true, Port: 80}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rule := toBackend("", "web")
			rule.Filters = tc.filters
			tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("infra", "r", 0, []parent{onGW("http")}, nil, rule)}))
			id := types.NamespacedName{Namespace: "infra", Name: "r"}
			acc := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionAccepted)
			r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
			if tc.refused != "" {
				if msg := acceptedMessage(tab.Gateway, id); acc != "False/UnsupportedValue" || r != nil || !strings.HasPrefix(msg, tc.refused) {
					t.Errorf("Accepted = %s %q, route %v; want refused with %q…", acc, msg, r, tc.refused)
				}
				return
			}
			if acc != "True/Accepted" || r == nil {
				t.Fatalf("Accepted = %s (%s), route %v", acc, acceptedMessage(tab.Gateway, id), r)
			}
			if diff := cmp.Diff(tc.want, r.Options.Policy.CORS); diff != "" {
				t.Errorf("Policy.CORS (-want +got):\n%s", diff)
			}
		})
	}
}
