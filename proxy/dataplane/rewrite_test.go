package dataplane

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// uriBackend answers with the request target exactly as it arrived on the wire
// (RequestURI) and counts the requests.
func uriBackend(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	addr := echoBackendHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, r.RequestURI)
	}))
	return addr, &hits
}

// rewriteGatewayTable is a Gateway table for infra/gw, one HTTP listener on addr's port, with
// one HTTPRoute whose rules rewrite: PathPrefix /file to /static and /root to / (both
// ReplacePrefixMatch), and /full to /fixed (ReplaceFullPath), all to backend "uri".
func rewriteGatewayTable(t *testing.T, addr, backend string) *table.Table {
	t.Helper()
	in := gatewayapi.Input{Gateway: listenerGateway(t, addr), AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	rule := func(prefix string, mod gatewayv1.HTTPPathModifier) gatewayv1.HTTPRouteRule {
		return gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(prefix)}}},
			Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &mod}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "uri", Port: ptr(gatewayv1.PortNumber(80))}}}}}
	}
	prefix := func(p string) gatewayv1.HTTPPathModifier {
		return gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr(p)}
	}
	in.HTTPRoutes = append(in.HTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "rw"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{rule("/file", prefix("/static")), rule("/root", prefix("/")),
				rule("/full", gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/fixed")})}}})
	addBackends(t, &in, map[string]string{"uri": backend}, "infra")
	res := gatewayapi.Translate(in)
	tab, problems := res.Table, res.Problems
	if len(problems) > 0 {
		t.Fatalf("build gateway table: %v", problems)
	}
	return tab
}

// TestRewriteNormalised: a rewritten path never reaches a backend with a dot-segment or a
// leading "//", on both paths, for Ingress rewrite-target (regex groups and prefix) and
// Gateway URLRewrite (ReplacePrefixMatch, ReplaceFullPath). The client's path is normalised
// before routing; what a rewrite builds from it — a group glued to the target's text, a
// group that starts with '/' — is checked again and refused with 400 (resolving
// "/static/../secret" would hand the backend "/secret", the path the rewrite's target keeps
// the client from). Hostile cases first, then the rewrites that must still work.
func TestRewriteNormalised(t *testing.T) {
	type policy struct {
		slashes  EscapedSlashes
		keepDups bool
	}
	keep, decode, dups := policy{slashes: EscapedSlashesKeep}, policy{slashes: EscapedSlashesDecode}, policy{keepDups: true}
	const gw = "gateway" // host of the Gateway cases: its route has no hostnames
	cases := []struct {
		name         string
		policy       policy
		host, target string
		wantStatus   int
		wantURI      string // what the backend received, for 200
	}{
		{name: "a group of '..' glued to the target", host: "f.test", target: "/file-../secret", wantStatus: 400},
		{name: "'%2e%2e' decoded, then glued", host: "f.test", target: "/file-%2e%2e/secret", wantStatus: 400},
		{name: "'.%2E' decoded, then glued", host: "f.test", target: "/file-.%2E/secret", wantStatus: 400},
		{name: "a final '..'", host: "f.test", target: "/file-..", wantStatus: 400},
		{name: "a final '.'", host: "f.test", target: "/file-.", wantStatus: 400},
		{name: "an encoded slash refused before routing", host: "f.test", target: "/file-..%2Fsecret", wantStatus: 400},
		{name: "an encoded slash kept: '../' after expansion", policy: keep, host: "f.test", target: "/file-..%2Fsecret", wantStatus: 400},
		{name: "encoded slashes and dots kept: '../../' after expansion", policy: keep, host: "f.test", target: "/file-%2e%2e%2f%2e%2e%2fsecret", wantStatus: 400},
		{name: "an encoded backslash kept: '..\\' after expansion", policy: keep, host: "f.test", target: "/file-..%5Csecret", wantStatus: 400},
		{name: "an encoded slash decoded: '../' after expansion", policy: decode, host: "f.test", target: "/file-..%2Fsecret", wantStatus: 400},
		{name: "a group starting with '/' makes '//host' (slashes kept)", policy: dups, host: "g.test", target: "/go/evil.example/x", wantStatus: 400},
		{name: "a group starting with '//' makes '///host' (slashes kept)", policy: dups, host: "g.test", target: "/go//evil.example/x", wantStatus: 400},
		{name: "gateway: ReplacePrefixMatch / makes '//host' (slashes kept)", policy: dups, host: gw, target: "/root//evil.example/x", wantStatus: 400},
		{name: "gateway: '..' after the prefix is resolved before routing", host: gw, target: "/file/../secret", wantStatus: 404},
		{name: "gateway: '%2e%2e' after the prefix is resolved before routing", host: gw, target: "/file/%2e%2e/secret", wantStatus: 404},
		{name: "gateway: '.%2E' in a full-path rewrite's route", host: gw, target: "/full/a/.%2E", wantStatus: 200, wantURI: "/fixed"},

		{name: "a group starting with '/' makes '//host' (slashes merged)", host: "g.test", target: "/go/evil.example/x", wantStatus: 200, wantURI: "/evil.example/x"},
		{name: "a group starting with '/' inside the target (slashes merged)", host: "f.test", target: "/file-/etc", wantStatus: 200, wantURI: "/static/etc"},
		{name: "a group starting with '/' inside the target (slashes kept)", policy: dups, host: "f.test", target: "/file-/etc", wantStatus: 200, wantURI: "/static//etc"},
		{name: "dots that are not a segment", host: "f.test", target: "/file-..a/b.", wantStatus: 200, wantURI: "/static/..a/b."},
		{name: "an encoded '%' stays data", host: "f.test", target: "/file-%252e%252e/secret", wantStatus: 200, wantURI: "/static/%252e%252e/secret"},
		{name: "a regex rewrite", host: "f.test", target: "/file-a/b?q=1", wantStatus: 200, wantURI: "/static/a/b?q=1"},
		{name: "a prefix rewrite", host: "p.test", target: "/api/users", wantStatus: 200, wantURI: "/v2/users"},
		{name: "gateway: ReplacePrefixMatch", host: gw, target: "/file/a/./b", wantStatus: 200, wantURI: "/static/a/b"},
		{name: "gateway: ReplacePrefixMatch / (slashes merged)", host: gw, target: "/root//evil.example/x", wantStatus: 200, wantURI: "/evil.example/x"},
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		be, hits := uriBackend(t)
		ing := buildTable(t,
			route{host: "f.test", path: "/file-(.*)", endpoints: []string{be}, annotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/static/$1"}},
			route{host: "g.test", path: "/go(.*)", endpoints: []string{be}, annotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/$1"}},
			route{host: "p.test", path: "/api", endpoints: []string{be}, annotations: map[string]string{"metalgate.io/rewrite-target": "/v2"}},
		)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := opts
				o.EscapedSlashes, o.KeepDuplicateSlashes = tc.policy.slashes, tc.policy.keepDups
				s, addr, _ := startProxy(t, o, ing)
				if tc.host == gw {
					s.Swap(rewriteGatewayTable(t, addr, be))
				}
				before := hits.Load()
				resp, body := rawRequest(t, addr, "GET "+tc.target+" HTTP/1.1\r\nHost: "+tc.host+"\r\nConnection: close\r\n\r\n")
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("%s: status %d, want %d (body %q)", tc.target, resp.StatusCode, tc.wantStatus, body)
				}
				if tc.wantStatus != 200 {
					if n := hits.Load() - before; n != 0 {
						t.Fatalf("%s: answered %d, yet the backend got the request", tc.target, resp.StatusCode)
					}
					return
				}
				if body != tc.wantURI {
					t.Errorf("%s reached the backend as %q, want %q", tc.target, body, tc.wantURI)
				}
			})
		}
	})
}
