package dataplane

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// TestGatewaySplit: a rule with three weighted backendRefs (1:2:3, and one of weight 0)
// shares 1,200 requests among the three by weight, on both forwarding paths; the weight-0
// backend gets none, and a backendRef naming no Service gets its share as 500s.
func TestGatewaySplit(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		backends := map[string]string{}
		for _, name := range []string{"a", "b", "c", "zero"} {
			backends[name] = hostport(echoBackend(t, name))
		}
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		gw := listenerGateway(t, httpAddr)
		ref := func(svc string, w int32) gatewayv1.HTTPBackendRef {
			return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{Weight: ptr(w), BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}
		}
		in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true, HTTPRoutes: []*gatewayv1.HTTPRoute{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "split"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{
					ref("a", 1), ref("zero", 0), ref("b", 2), ref("c", 3), ref("missing", 2)}}}}}}}
		addBackends(t, &in, backends, "app", "infra")
		res := gatewayapi.Translate(in)
		tab, problems := res.Table, res.Problems
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s.Swap(tab)
		c := &http.Client{}
		defer c.CloseIdleConnections()
		got := map[string]int{}
		const n = 1200
		for range n {
			resp, e := get(t, c, "http://"+httpAddr+"/", nil)
			switch resp.StatusCode {
			case http.StatusOK:
				got[e.Backend]++
			case http.StatusInternalServerError:
				got["500"]++
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		// Expected 150, 300, 450, 300 of 1,200 (weights 1, 2, 3 and 2 of 8); each bound is
		// more than five standard deviations away.
		for name, want := range map[string]int{"a": 150, "b": 300, "c": 450, "500": 300} {
			if d := got[name] - want; d < -90 || d > 90 {
				t.Errorf("%s got %d of %d requests, want about %d", name, got[name], n, want)
			}
		}
		if got["zero"] != 0 {
			t.Errorf("the weight-0 backend got %d requests", got["zero"])
		}
	})
}

// TestGatewayBackendRefFilters: header modifiers on backendRefs, on both forwarding paths:
// each request reaches its backend with that backendRef's request edits after the rule's (a
// client's own "Backend" header is replaced, never passed on), and its answer gets that
// backendRef's response edits; another backend's edits never reach it.
func TestGatewayBackendRefFilters(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		backends := map[string]string{"a": hostport(echoBackend(t, "a")), "b": hostport(echoBackend(t, "b"))}
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		ref := func(svc string) gatewayv1.HTTPBackendRef {
			return gatewayv1.HTTPBackendRef{
				BackendRef: gatewayv1.BackendRef{Weight: ptr(int32(1)), BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}},
				Filters: []gatewayv1.HTTPRouteFilter{
					{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
						Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: svc}}}},
					{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{
						Add: []gatewayv1.HTTPHeader{{Name: "X-Served-By", Value: svc}}}},
				}}
		}
		in := gatewayapi.Input{Gateway: listenerGateway(t, httpAddr), AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true, HTTPRoutes: []*gatewayv1.HTTPRoute{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "filtered"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
						Set: []gatewayv1.HTTPHeader{{Name: "X-Rule", Value: "1"}}}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{ref("a"), ref("b")}}}}}}}
		addBackends(t, &in, backends, "app", "infra")
		res := gatewayapi.Translate(in)
		tab, problems := res.Table, res.Problems
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s.Swap(tab)
		c := &http.Client{}
		defer c.CloseIdleConnections()
		seen := map[string]int{}
		for range 60 {
			resp, e := get(t, c, "http://"+httpAddr+"/", map[string]string{"Backend": "spoofed"})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			seen[e.Backend]++
			if got := e.Header["Backend"]; len(got) != 1 || got[0] != e.Backend {
				t.Errorf("backend %s got Backend: %q, want only its own", e.Backend, got)
			}
			if got := e.Header["X-Rule"]; len(got) != 1 || got[0] != "1" {
				t.Errorf("backend %s got X-Rule: %q, want the rule's 1", e.Backend, got)
			}
			if got := resp.Header.Values("X-Served-By"); len(got) != 1 || got[0] != e.Backend {
				t.Errorf("answer of %s has X-Served-By: %q", e.Backend, got)
			}
		}
		if seen["a"] == 0 || seen["b"] == 0 {
			t.Errorf("requests by backend %v, want both", seen)
		}
	})
}
