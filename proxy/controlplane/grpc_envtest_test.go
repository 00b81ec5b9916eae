package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// grpcGWRoute is a GRPCRoute in ns on listener "web" of Gateway gwNS/gw: calls of service
// svc (method, if not "", exactly) to Service backend port 80.
func grpcGWRoute(ns, name, gwNS, svc, method, backend string) *gatewayv1.GRPCRoute {
	mm := &gatewayv1.GRPCMethodMatch{Service: ptr(svc)}
	if method != "" {
		mm.Method = ptr(method)
	}
	return &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gatewayv1.GRPCRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
			Namespace: ptr(gatewayv1.Namespace(gwNS)), Name: "gw", SectionName: ptr(gatewayv1.SectionName("web"))}}},
		Rules: []gatewayv1.GRPCRouteRule{{
			Matches: []gatewayv1.GRPCRouteMatch{{Method: mm}},
			BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(backend), Port: ptr(gatewayv1.PortNumber(80))}}}}}}}}
}

// grpcCall POSTs a gRPC-shaped request for /service/method through the proxy at addr and
// returns the status and the answering backend's name and protocol.
func grpcCall(c *http.Client, addr, path string) (code int, backend, proto string, err error) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+path, strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	var body struct{ Backend, Proto string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body.Backend, body.Proto, nil
}

// watchedKinds are the kinds m reports watch freshness for.
func watchedKinds(t *testing.T, m *controlplane.Metrics) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { m.Collect(ch); close(ch) }()
	var out []string
	for metric := range ch {
		var pb dto.Metric
		if err := metric.Write(&pb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(metric.Desc().String(), "metalgate_proxy_watch_healthy") {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "kind" {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestGatewayProxyServesGRPCRoute: a Gateway proxy watches GRPCRoutes and routes their calls
// to their backends over HTTP/2 without TLS. The GRPCRoute is created last, after an
// HTTPRoute serves: only its own watch event can bring it into the table. A GRPCRoute from a
// namespace the listener does not admit takes nothing.
func TestGatewayProxyServesGRPCRoute(t *testing.T) {
	kube.Need(t)
	gwNS, otherNS := namespace(t), namespace(t)
	p, port := startGatewayProxy(t, cfg, gwNS)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	grpc, thief, web := startBackendProtocols(t, "grpc", &h2c), startBackendProtocols(t, "thief", &h2c), startBackend(t, "web")
	for _, x := range []struct {
		ns, svc string
		be      *backend
	}{{gwNS, "grpc", grpc}, {otherNS, "thief", thief}, {gwNS, "web", web}} {
		create(t, service(x.ns, x.svc, "ClusterIP"))
		setSlice(t, x.ns, x.svc, x.be)
	}
	create(t, gatewayOn(gwNS, port))
	create(t, grpcGWRoute(otherNS, "steal", gwNS, "pkg.Svc", "", "thief"))
	create(t, gwRoute(gwNS, "web", gwNS, "/web", "web"))
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	testenv.Eventually(t, 20*time.Second, "the HTTPRoute routed", func() error {
		if code, body, err := call(c, p.addr+"/web", "any.example"); err != nil || code != http.StatusOK || body != "web" {
			return fmt.Errorf("GET /web → %d %q %v, want 200 from web", code, body, err)
		}
		return nil
	})
	create(t, grpcGWRoute(gwNS, "grpc", gwNS, "pkg.Svc", "Get", "grpc"))
	testenv.Eventually(t, 20*time.Second, "the GRPCRoute routed", func() error {
		if code, be, proto, err := grpcCall(c, p.addr, "/pkg.Svc/Get"); err != nil || code != http.StatusOK || be != "grpc" || proto != "HTTP/2.0" {
			return fmt.Errorf("POST /pkg.Svc/Get → %d from %q over %q (%v), want 200 from grpc over HTTP/2.0", code, be, proto, err)
		}
		return nil
	})
	if code, be, _, err := grpcCall(c, p.addr, "/pkg.Svc/Other"); err != nil || code != http.StatusNotFound {
		t.Errorf("POST /pkg.Svc/Other (only a route of a namespace the listener does not admit) → %d from %q (%v), want 404", code, be, err)
	}
	if got := watchedKinds(t, p.metrics); !slices.Contains(got, controlplane.KindGRPCRoute) {
		t.Errorf("watch freshness kinds %v lack %s", got, controlplane.KindGRPCRoute)
	}
}

// TestGatewayProxyWithoutGRPCRoute: on an API server without the GRPCRoute CRD (Gateway API
// before v1.1), a Gateway proxy becomes ready, serves its HTTPRoutes, and reports no watch of
// GRPCRoutes; a watch of a kind the API server lacks would fail and keep readiness down.
func TestGatewayProxyWithoutGRPCRoute(t *testing.T) {
	kube.Need(t)
	crds, err := testenv.CRDsExcept(testenv.GatewayCRDs, "grpcroutes")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: crds, Scheme: scheme})
	ctx, c := context.Background(), env.Client
	if err := c.List(ctx, &gatewayv1.GRPCRouteList{}); err == nil {
		t.Fatal("the API server serves GRPCRoutes: the test's premise does not hold")
	}
	const gwNS = "app"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwNS}}); err != nil {
		t.Fatal(err)
	}
	p, port := startGatewayProxy(t, env.Config, gwNS) // waits for readiness
	web := startBackend(t, "web")
	for _, o := range []client.Object{service(gwNS, "web", "ClusterIP"), gatewayOn(gwNS, port), gwRoute(gwNS, "web", gwNS, "/web", "web")} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	setSliceOn(t, c, gwNS, "web", web)
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	testenv.Eventually(t, 20*time.Second, "the HTTPRoute routed", func() error {
		if code, body, err := call(hc, p.addr+"/web", "any.example"); err != nil || code != http.StatusOK || body != "web" {
			return fmt.Errorf("GET /web → %d %q %v, want 200 from web", code, body, err)
		}
		return nil
	})
	if err := p.cp.Ready(); err != nil {
		t.Errorf("not ready: %v", err)
	}
	if got := watchedKinds(t, p.metrics); slices.Contains(got, controlplane.KindGRPCRoute) || !slices.Contains(got, controlplane.KindHTTPRoute) {
		t.Errorf("watch freshness kinds %v: want HTTPRoute, not GRPCRoute", got)
	}
}
