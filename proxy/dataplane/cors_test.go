package dataplane

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// corsGatewayTable is a Gateway table for infra/gw, one HTTP listener on addr's port, whose
// HTTPRoutes carry CORS filters (compiled by gatewayapi.Translate, as the proxy does):
//
//	/cors-1           the conformance route: origins https://www.foo.com and https://*.bar.com,
//	                  methods GET, OPTIONS, headers x-header-1, x-header-2, expose x-header-3,
//	                  x-header-4, credentials, maxAge 3600 → backend "api"
//	/cors-star-creds  everything "*" and credentials → backend "loud"
//	/cors-star        everything "*", no credentials → backend "loud"
//	/cors-loud        origin https://app.example alone → backend "loud"
//	/plain            no CORS filter → backend "loud"
//
// Backend "loud" answers with its own Access-Control-* headers (origin "*" with credentials).
func corsGatewayTable(t *testing.T, addr string, backends map[string]string) *table.Table {
	t.Helper()
	in := gatewayapi.Input{Gateway: listenerGateway(t, addr), AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	yes := true
	star := []gatewayv1.HTTPHeaderName{"*"}
	route := func(name, prefix, svc string, cors *gatewayv1.HTTPCORSFilter) {
		rule := gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(prefix)}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}}}
		if cors != nil {
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: cors}}
		}
		in.HTTPRoutes = append(in.HTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Rules:           []gatewayv1.HTTPRouteRule{rule}}})
	}
	route("cors-1", "/cors-1", "api", &gatewayv1.HTTPCORSFilter{
		AllowOrigins: []gatewayv1.CORSOrigin{"https://www.foo.com", "https://*.bar.com"}, AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "OPTIONS"},
		AllowHeaders: []gatewayv1.HTTPHeaderName{"x-header-1", "x-header-2"}, ExposeHeaders: []gatewayv1.HTTPHeaderName{"x-header-3", "x-header-4"},
		AllowCredentials: &yes, MaxAge: 3600})
	route("star-creds", "/cors-star-creds", "loud", &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"*"},
		AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"}, AllowHeaders: star, ExposeHeaders: star, AllowCredentials: &yes})
	route("star", "/cors-star", "loud", &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"*"},
		AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"}, AllowHeaders: star, ExposeHeaders: star})
	route("loud", "/cors-loud", "loud", &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"https://app.example"}})
	route("plain", "/plain", "loud", nil)
	addBackends(t, &in, backends, "infra")
	res := gatewayapi.Translate(in)
	tab, problems := res.Table, res.Problems
	if len(problems) > 0 {
		t.Fatalf("build gateway table: %v", problems)
	}
	for _, rs := range tab.Gateway.Routes {
		for _, p := range rs.Parents {
			for _, c := range p.Conditions {
				if c.Status != metav1.ConditionTrue {
					t.Fatalf("route %v: %s=%s %s: %s", rs.Route, c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
	}
	return tab
}

// loudBackend answers like echoBackend, with CORS headers of its own that no route of
// corsGatewayTable allows (any origin, with credentials) and a header a script could read
// only when exposed.
func loudBackend(t *testing.T) string {
	t.Helper()
	echo := echoHandler("loud")
	return echoBackendHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "*")
		h.Set("access-control-expose-headers", "X-Secret")
		h.Set("X-Total", "3")
		h.Set("Vary", "Accept-Encoding")
		echo.ServeHTTP(w, r)
	}))
}

// TestGatewayCORS: an HTTPRoute's CORS filter on both forwarding paths, with a real HTTP
// client. Hostile cases first: origins that merely contain an allowed one, another scheme or
// port, "null"; preflights for a method or header not allowed; a backend's own CORS headers;
// credentials never answered with "*". Then the conformance suite's cases.
func TestGatewayCORS(t *testing.T) {
	const absent = "<absent>"
	preflight := func(origin, method, headers string) map[string]string {
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method}
		if headers != "" {
			h["Access-Control-Request-Headers"] = headers
		}
		return h
	}
	noCORS := map[string]string{"Access-Control-Allow-Origin": absent, "Access-Control-Allow-Credentials": absent,
		"Access-Control-Allow-Methods": absent, "Access-Control-Allow-Headers": absent, "Access-Control-Expose-Headers": absent, "Access-Control-Max-Age": absent}
	cors1 := map[string]string{"Access-Control-Allow-Methods": "GET, OPTIONS", "Access-Control-Allow-Headers": "x-header-1, x-header-2",
		"Access-Control-Expose-Headers": "x-header-3, x-header-4", "Access-Control-Max-Age": "3600", "Access-Control-Allow-Credentials": "true"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		want               map[string]string // header → value, absent for none
		backend            string            // the backend that must have answered; "" the proxy
		check              func(t *testing.T, h http.Header)
	}{
		{name: "preflight from an allowed host as a suffix of another", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://evilbar.com", "GET", ""), status: 204, want: noCORS},
		{name: "preflight from the wildcard's domain followed by another", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.bar.com.evil.test", "GET", ""), status: 204, want: noCORS},
		{name: "preflight from an exact origin followed by another domain", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com.evil.test", "GET", ""), status: 204, want: noCORS},
		{name: "preflight from another scheme", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("http://www.foo.com", "GET", ""), status: 204, want: noCORS},
		{name: "preflight from another port", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com:8443", "GET", ""), status: 204, want: noCORS},
		{name: "preflight from null", method: "OPTIONS", path: "/cors-star-creds",
			hdr: preflight("null", "GET", ""), status: 204, want: noCORS},
		{name: "preflight for a method not allowed", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com", "DELETE", ""), status: 204, want: noCORS},
		{name: "preflight for a header not allowed", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com", "GET", "x-header-1, x-header-9"), status: 204, want: noCORS},
		{name: "request from an origin not allowed, backend claims any origin", method: "GET", path: "/cors-loud",
			hdr: map[string]string{"Origin": "https://evil.example", "Cookie": "sid=1"}, status: 200, backend: "loud", want: with(noCORS, "Vary", "Accept-Encoding, Origin")},
		{name: "request from an allowed origin, backend's CORS headers replaced", method: "GET", path: "/cors-loud",
			hdr: map[string]string{"Origin": "https://app.example", "Cookie": "sid=1"}, status: 200, backend: "loud",
			want: with(noCORS, "Access-Control-Allow-Origin", "https://app.example", "Vary", "Accept-Encoding, Origin")},
		{name: "request without Origin, backend's CORS headers removed", method: "GET", path: "/cors-loud",
			status: 200, backend: "loud", want: with(noCORS, "Vary", "Accept-Encoding, Origin")},
		{name: "credentialed request under *: the origin, never *", method: "GET", path: "/cors-star-creds",
			hdr: map[string]string{"Origin": "https://other.example", "Cookie": "sid=1", "Authorization": "Bearer x"}, status: 200, backend: "loud",
			want: map[string]string{"Access-Control-Allow-Origin": "https://other.example", "Access-Control-Allow-Credentials": "true", "Access-Control-Allow-Methods": absent},
			check: func(t *testing.T, h http.Header) {
				// Expose "*" with credentials: the response's own names, not "*".
				got := h.Get("Access-Control-Expose-Headers")
				if !strings.Contains(got, "X-Total") || strings.Contains(got, "*") || strings.Contains(got, "Content-Type") || strings.Contains(got, "X-Secret") {
					t.Errorf("Access-Control-Expose-Headers %q: want the response's header names (X-Total), no *, no safelisted or removed ones", got)
				}
			}},
		{name: "preflight under * with credentials: the method and headers asked for, never *", method: "OPTIONS", path: "/cors-star-creds",
			hdr: preflight("https://other.example", "PATCH", "x-a,  Authorization"), status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": "https://other.example", "Access-Control-Allow-Credentials": "true",
				"Access-Control-Allow-Methods": "PATCH", "Access-Control-Allow-Headers": "x-a, Authorization", "Access-Control-Expose-Headers": absent,
				"Access-Control-Max-Age": "5", "Vary": "Origin"}},
		{name: "preflight under * without credentials", method: "OPTIONS", path: "/cors-star",
			hdr: preflight("https://foobar.com:12345", "PUT", ""), status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": "https://foobar.com:12345", "Access-Control-Allow-Credentials": absent,
				"Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Headers": absent, "Access-Control-Expose-Headers": "*", "Access-Control-Max-Age": "5"}},
		{name: "request under * without credentials", method: "PUT", path: "/cors-star",
			hdr: map[string]string{"Origin": "https://foobar.com"}, status: 200, backend: "loud",
			want: map[string]string{"Access-Control-Allow-Origin": "https://foobar.com", "Access-Control-Allow-Credentials": absent, "Access-Control-Expose-Headers": "*"}},
		{name: "OPTIONS that is not a preflight goes to the backend", method: "OPTIONS", path: "/cors-1",
			hdr: map[string]string{"Origin": "https://www.foo.com"}, status: 200, backend: "api",
			want: map[string]string{"Access-Control-Allow-Origin": "https://www.foo.com", "Access-Control-Max-Age": absent}},
		{name: "a route without the filter passes the backend's headers", method: "GET", path: "/plain",
			hdr: map[string]string{"Origin": "https://evil.example"}, status: 200, backend: "loud",
			want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "X-Secret", "Vary": "Accept-Encoding"}},
		// The conformance suite's HTTPRouteCORS cases for cors-1.
		{name: "preflight from an exact origin", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com", "GET", "x-header-1, x-header-2"), status: 204, want: with(cors1, "Access-Control-Allow-Origin", "https://www.foo.com")},
		{name: "preflight from a wildcard origin", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.bar.com", "GET", "x-header-1, x-header-2"), status: 204, want: with(cors1, "Access-Control-Allow-Origin", "https://www.bar.com")},
		{name: "preflight from a wildcard origin, several labels", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://xpto.www.bar.com", "GET", "x-header-1, x-header-2"), status: 204, want: with(cors1, "Access-Control-Allow-Origin", "https://xpto.www.bar.com")},
		{name: "preflight for a safelisted method not listed", method: "OPTIONS", path: "/cors-1",
			hdr: preflight("https://www.foo.com", "POST", ""), status: 204, want: with(cors1, "Access-Control-Allow-Origin", "https://www.foo.com")},
		{name: "request from a wildcard origin", method: "GET", path: "/cors-1",
			hdr: map[string]string{"Origin": "https://www.bar.com"}, status: 200, backend: "api",
			want: map[string]string{"Access-Control-Allow-Origin": "https://www.bar.com", "Access-Control-Allow-Credentials": "true",
				"Access-Control-Expose-Headers": "x-header-3, x-header-4", "Access-Control-Allow-Methods": absent, "Access-Control-Max-Age": absent, "Vary": "Origin"}},
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		backends := map[string]string{"api": hostport(echoBackend(t, "api")), "loud": loudBackend(t)}
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		s.Swap(corsGatewayTable(t, httpAddr, backends))
		c := &http.Client{}
		defer c.CloseIdleConnections()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req, err := http.NewRequest(tc.method, "http://"+httpAddr+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.hdr {
					req.Header.Set(k, v)
				}
				resp, e := doJSON(t, c, req)
				if resp.StatusCode != tc.status || e.Backend != tc.backend {
					t.Errorf("%s %s → %d from backend %q, want %d from %q", tc.method, tc.path, resp.StatusCode, e.Backend, tc.status, tc.backend)
				}
				for k, want := range tc.want {
					got := strings.Join(resp.Header.Values(k), ", ")
					if got == "" {
						got = absent
					}
					if got != want {
						t.Errorf("%s %q, want %q", k, got, want)
					}
				}
				if tc.check != nil {
					tc.check(t, resp.Header)
				}
			})
		}
	})
}

// doJSON sends req with c and reads the answer whole; an answer from an echo backend is
// decoded (Backend "" for the proxy's own answers).
func doJSON(t *testing.T, c *http.Client, req *http.Request) (*http.Response, echoReply) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e echoReply
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: answer %q: %v", req.Method, req.URL.Path, b, err)
		}
	}
	return resp, e
}
