package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// gwRoute is an HTTPRoute in ns on listener "web" of Gateway gwNS/gw: PathPrefix prefix,
// the given header matches, to Service svc port 80.
func gwRoute(ns, name, gwNS, prefix, svc string, headers ...gatewayv1.HTTPHeaderMatch) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
			Namespace: ptr(gatewayv1.Namespace(gwNS)), Name: "gw", SectionName: ptr(gatewayv1.SectionName("web"))}}},
		Rules: []gatewayv1.HTTPRouteRule{{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(prefix)}, Headers: headers}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}}}}}}
}

// startGatewayProxy runs the proxy of Gateway gwNS/gw on the API server of c, and returns
// it and the port it listens on (the port the Gateway's listener needs).
func startGatewayProxy(t *testing.T, c *rest.Config, gwNS string) (*proxy, int32) {
	t.Helper()
	p := startProxyOn(t, c, "", func(o *controlplane.Options) {
		o.WatchNamespaces, o.PublishService = nil, types.NamespacedName{}
		o.Gateway = types.NamespacedName{Namespace: gwNS, Name: "gw"}
	}, nil)
	_, portStr, err := net.SplitHostPort(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	if _, err := fmt.Sscan(portStr, &port); err != nil {
		t.Fatal(err)
	}
	return p, port
}

// gatewayOn is Gateway gwNS/gw of class metalgate with one HTTP listener "web" on port,
// admitting routes of its own namespace.
func gatewayOn(gwNS string, port int32) *gatewayv1.Gateway {
	same := gatewayv1.NamespacesFromSame
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "gw"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{{Name: "web", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &same}}}}}}
}

// TestGatewayProxyServesItsGateway: `metalgate proxy --gateway` mode against a real API
// server with the Gateway API CRDs and the real data plane on loopback. The Gateway's HTTP
// listener is the port the data plane listens on and admits routes from its own namespace.
func TestGatewayProxyServesItsGateway(t *testing.T) {
	kube.Need(t)
	gwNS, otherNS := namespace(t), namespace(t)
	p, port := startGatewayProxy(t, cfg, gwNS)
	api, thief, ing := startBackend(t, "api"), startBackend(t, "thief"), startBackend(t, "ingress")
	for _, x := range []struct {
		ns, svc string
		be      *backend
	}{{gwNS, "api", api}, {otherNS, "thief", thief}, {gwNS, "ing", ing}} {
		create(t, service(x.ns, x.svc, "ClusterIP"))
		setSlice(t, x.ns, x.svc, x.be)
	}
	create(t, gatewayOn(gwNS, port))
	// Hostile objects first, so that once the good route serves they are in the table too:
	// a catch-all route from a namespace the listener does not admit, and an Ingress of
	// the metalgate class (a Gateway proxy serves no Ingress).
	create(t, gwRoute(otherNS, "steal", gwNS, "/", "thief"))
	create(t, ingress(gwNS, "legacy", "metalgate", "legacy.example", "ing"))
	create(t, gwRoute(gwNS, "api", gwNS, "/api", "api", gatewayv1.HTTPHeaderMatch{Name: "X-Team", Value: "a"}))

	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	do := func(host, path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+p.addr+path, nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	team := map[string]string{"X-Team": "a"}
	testenv.Eventually(t, 20*time.Second, "the HTTPRoute routed", func() error {
		if code, body := do("any.example", "/api/v1", team); code != http.StatusOK || !strings.Contains(body, `"api"`) {
			return fmt.Errorf("GET /api/v1 with X-Team: a → %d %q, want 200 from api", code, body)
		}
		return nil
	})
	for _, tc := range []struct {
		name, host, path string
		hdr              map[string]string
	}{
		{"route from a namespace the listener does not allow", "any.example", "/x", nil},
		{"same, on a path only it names", "any.example", "/", team},
		{"header match missing", "any.example", "/api/v1", nil},
		{"header value differs", "any.example", "/api/v1", map[string]string{"X-Team": "b"}},
		{"an Ingress of the metalgate class", "legacy.example", "/", nil},
	} {
		if code, body := do(tc.host, tc.path, tc.hdr); code != http.StatusNotFound {
			t.Errorf("%s: GET %s%s → %d %q, want 404", tc.name, tc.host, tc.path, code, body)
		}
	}
	// Deleting the Gateway empties the table.
	if err := k8sClient.Delete(context.Background(), &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "gw"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the routes gone with their Gateway", func() error {
		if code, _ := do("any.example", "/api/v1", team); code != http.StatusNotFound {
			return fmt.Errorf("after the Gateway's deletion GET /api/v1 → %d, want 404", code)
		}
		return nil
	})
}
