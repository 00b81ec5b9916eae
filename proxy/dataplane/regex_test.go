package dataplane

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// TestGatewayRegularExpressionPath: an HTTPRoute RegularExpression path through the proxy, on
// both forwarding paths: the expression takes only whole paths, and its full-path rewrite
// reaches the backend as written ("$1" literal), the query kept; what it does not take is 404.
func TestGatewayRegularExpressionPath(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		api := echoBackend(t, "api")
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		gw := listenerGateway(t, httpAddr)
		in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true, HTTPRoutes: []*gatewayv1.HTTPRoute{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "re"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr(`/v[0-9]+/items/[a-z]+`)}}},
					Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
						Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/items$1")}}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: "api", Port: ptr(gatewayv1.PortNumber(80))}}}},
				}}}}}}
		addBackends(t, &in, map[string]string{"api": hostport(api)}, "app", "infra")
		res := gatewayapi.Translate(in)
		tab, problems := res.Table, res.Problems
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s.Swap(tab)
		c := &http.Client{}
		defer c.CloseIdleConnections()
		for _, tc := range []struct {
			path, want string // want: the backend's path, "" for 404
		}{
			{"/v1/items/abc/more", ""}, // hostile first: a longer path is not taken
			{"/x/v1/items/abc", ""},
			{"/v1/items/ABC", ""},
			{"/v12/items/abc?x=1", "/items$1"},
		} {
			resp, e := get(t, c, "http://"+httpAddr+tc.path, nil)
			switch {
			case tc.want == "" && resp.StatusCode != http.StatusNotFound:
				t.Errorf("%s: %d, want 404", tc.path, resp.StatusCode)
			case tc.want != "" && (resp.StatusCode != http.StatusOK || e.Path != tc.want || e.Query != "x=1"):
				t.Errorf("%s: %d path %q query %q, want 200 %q x=1", tc.path, resp.StatusCode, e.Path, e.Query, tc.want)
			}
		}
	})
}
