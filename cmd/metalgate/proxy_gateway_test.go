package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestProxyGatewayFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // substring of the error
	}{
		{[]string{"--gateway=gw"}, `--gateway "gw": want <namespace>/<name>`},
		{[]string{"--gateway=/gw"}, "want <namespace>/<name>"},
		{[]string{"--gateway=ns/"}, "want <namespace>/<name>"},
		{[]string{"--gateway=ns/a/b"}, "want <namespace>/<name>"},
		{[]string{"--gateway=Infra/gw"}, `namespace "Infra"`},
		{[]string{"--gateway=in.fra/gw"}, `namespace "in.fra"`},
		{[]string{"--gateway=" + strings.Repeat("n", 64) + "/gw"}, "namespace"},
		{[]string{"--gateway=infra/GW"}, `name "GW"`},
		{[]string{"--gateway=infra/-gw"}, `name "-gw"`},
		{[]string{"--gateway=infra/gw", "--static-config=x.yaml"}, "--gateway and --static-config exclude each other"},
		{[]string{"--gateway=infra/gw", "--watch-namespace=a"}, "--gateway and --watch-namespace exclude each other"},
	} {
		err := proxyCommand(context.Background(), tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("metalgate proxy %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	for _, ok := range []string{"infra/gw", "a/gw.example-1"} {
		ref, err := parseGatewayRef(ok)
		if err != nil || ref.String() != ok {
			t.Errorf("parseGatewayRef(%q) = %v, %v; want %s", ok, ref, err, ok)
		}
	}
}

func TestGatewayPorts(t *testing.T) {
	l := func(name string, port int32, p gatewayv1.ProtocolType) gatewayv1.Listener {
		return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: p}
	}
	tls := func(name string, port int32, mode gatewayv1.TLSModeType) gatewayv1.Listener {
		return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.TLSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{Mode: &mode}}
	}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"}, Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
		l("b", 8080, gatewayv1.HTTPProtocolType), l("secure", 443, gatewayv1.HTTPSProtocolType), l("a", 80, gatewayv1.HTTPProtocolType),
		l("a2", 8080, gatewayv1.HTTPProtocolType), l("tcp", 9000, gatewayv1.TCPProtocolType), l("secure2", 8443, gatewayv1.HTTPSProtocolType),
		l("mixed-http", 9443, gatewayv1.HTTPProtocolType), l("mixed-https", 9443, gatewayv1.HTTPSProtocolType),
		tls("pass", 6443, gatewayv1.TLSModePassthrough), tls("terminate", 7443, gatewayv1.TLSModeTerminate), tls("pass2", 443, gatewayv1.TLSModePassthrough)}}}
	httpPorts, httpsPorts, skipped := gatewayPorts(gw)
	if got := fmtInts(httpPorts); got != "80 8080" {
		t.Errorf("HTTP ports %v, want [80 8080]", httpPorts)
	}
	// TLS Passthrough ports are served by the TLS listener too (by server name); TLS and
	// HTTPS on one port (secure, pass2) conflict.
	if got := fmtInts(httpsPorts); got != "6443 8443" {
		t.Errorf("HTTPS and TLS Passthrough ports %v, want [6443 8443]", httpsPorts)
	}
	want := []string{`"secure" (HTTPS, port 443): the port has listeners of other protocols`,
		`"tcp" (TCP, port 9000): not HTTP, HTTPS or TLS Passthrough`, `"mixed-http" (HTTP, port 9443): the port has listeners of other protocols`,
		`"mixed-https" (HTTPS, port 9443): the port has listeners of other protocols`, `"terminate" (TLS, port 7443): not HTTP, HTTPS or TLS Passthrough`,
		`"pass2" (TLS, port 443): the port has listeners of other protocols`}
	if len(skipped) != len(want) {
		t.Fatalf("skipped %q, want %d", skipped, len(want))
	}
	for i, w := range want {
		if !strings.Contains(skipped[i], w) {
			t.Errorf("skipped[%d] = %q, want it to say %q", i, skipped[i], w)
		}
	}
}

func fmtInts(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, " ")
}

// TestListenPorts: one listener over several ports; each connection keeps the port it came
// in on as its local address (what the data plane routes by), and Close ends Accept.
func TestListenPorts(t *testing.T) {
	var ports []int32
	for range 2 { // free ports: listen, note, close
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, int32(ln.Addr().(*net.TCPAddr).Port))
		ln.Close()
	}
	m, err := listenPorts("127.0.0.1", ports)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listenPorts("127.0.0.1", ports[:1]); err == nil || !strings.Contains(err.Error(), "listen on Gateway listener port "+strconv.Itoa(int(ports[0]))) {
		t.Errorf("a port in use: error %v, want one naming the port", err)
	}
	for _, p := range ports {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p))))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := m.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.LocalAddr().(*net.TCPAddr).Port; int32(got) != p {
			t.Errorf("connection to port %d accepted with local port %d", p, got)
		}
		sc.Close()
		c.Close()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Accept(); err == nil {
		t.Error("Accept after Close returned no error")
	}
}

// TestProxyGatewayServes runs `metalgate proxy --gateway=…` against a real API server with
// the Gateway API CRDs: it listens on the Gateway's HTTP listener port and routes by its
// HTTPRoutes. (The API server refuses loopback endpoints, so the routed Service has none:
// a matched route answers 503 from the proxy, an unmatched request 404; the request reaching
// a backend is TestGatewayProxyServesItsGateway in proxy/controlplane.)
func TestProxyGatewayServes(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if err := addGatewayTypes(scheme); err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.GatewayCRDs}, Scheme: scheme})
	c, kubeconfig := env.Client, env.Kubeconfig
	ctx := context.Background()
	addr := freeAddr(t)
	_, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate",
			Listeners: []gatewayv1.Listener{{Name: "web", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}}}},
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "api"}, Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptrTo(gatewayv1.PathMatchPathPrefix), Value: ptrTo("/api")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "api", Port: ptrTo(gatewayv1.PortNumber(80))}}}}}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	var logs testenv.Buffer
	done := make(chan int)
	go func() {
		done <- run(rctx, []string{"proxy", "--kubeconfig", kubeconfig, "--gateway=infra/gw", "--admin-bind-address", "0",
			"--affinity-key-secret", "-"}, io.Discard, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("proxy exited with %d", code)
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	get := func(path string) (int, string) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The first table is in once an unrouted path answers 404 (before it, everything is
	// 503 "no routing table yet").
	testenv.Eventually(t, 30*time.Second, "the proxy serves the Gateway's listener", func() error {
		if code, body := get("/other"); code != http.StatusNotFound {
			return fmt.Errorf("GET /other on the listener port → %d %q, want 404", code, body)
		}
		return nil
	})
	if code, body := get("/api/x"); code != http.StatusServiceUnavailable || strings.Contains(body, "no routing table") {
		t.Errorf("GET /api/x → %d %q, want 503 from the matched route (its Service has no endpoints)", code, body)
	}
}

func ptrTo[T any](v T) *T { return &v }
