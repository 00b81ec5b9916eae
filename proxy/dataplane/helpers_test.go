package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

func ptr[T any](v T) *T { return &v }

// forEachPath runs f once per forwarding path: the direct path, and ReverseProxy with
// http.Transport alone (the reference). Every data-plane test that forwards runs on both;
// each run checks that no goroutine outlives it.
func forEachPath(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Helper()
	for _, p := range []struct {
		name      string
		reference bool
	}{{"direct", false}, {"reference", true}} {
		t.Run(p.name, func(t *testing.T) {
			leakCheck(t)
			f(t, Options{DisableDirectPath: p.reference})
		})
	}
}

// leakCheck fails t when goroutines it started are still running after its cleanups (the
// proxies it started have shut down, the shared client's idle connections are closed).
// Goroutines that serve a closed connection end soon but not at once — on a loaded machine
// later than goleak's own retries (about 0.4 s) allow — so it looks again until a deadline:
// a real leak never ends and still fails.
func leakCheck(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			if goleak.Find(before) == nil {
				return
			}
		}
		goleak.VerifyNone(t, before)
	})
}

// route is one Ingress rule for a test table: host and path prefix to a Service whose
// endpoints are the given backend addresses.
type route struct {
	host, path  string
	annotations map[string]string
	endpoints   []string // host:port
	tlsSecret   *corev1.Secret
	secrets     []*corev1.Secret // more Secrets (basic auth)
	namespace   string           // of the Ingress, Service and slices; default "ns"
}

// buildTable makes a table the way the control plane does, from Kubernetes objects; any
// problem fails t.
func buildTable(t testing.TB, routes ...route) *table.Table {
	t.Helper()
	tab, problems := buildTableProblems(t, routes...)
	if len(problems) > 0 {
		t.Fatalf("build table: %v", problems)
	}
	return tab
}

// buildTableProblems is buildTable that returns the problems.
func buildTableProblems(t testing.TB, routes ...route) (*table.Table, []table.Problem) {
	t.Helper()
	return ingress.Build(tableInput(routes...))
}

// tableInput is the input buildTable builds from.
func tableInput(routes ...route) ingress.Input {
	// Test backends are hand-made slices of loopback addresses: both opted in, as in
	// --static-config.
	in := ingress.Input{Classes: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}},
		AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true, NginxAnnotations: true}
	for i, r := range routes {
		name, ns := fmt.Sprintf("r%d", i), r.namespace
		if ns == "" {
			ns = "ns"
		}
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: r.annotations,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0))},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr("mg"), Rules: []networkingv1.IngressRule{{Host: r.host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: r.path, PathType: ptr(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}},
				}}}}}}}}
		in.Secrets = append(in.Secrets, r.secrets...)
		if r.tlsSecret != nil {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{r.host}, SecretName: r.tlsSecret.Name}}
			in.Secrets = append(in.Secrets, r.tlsSecret)
		}
		in.Ingresses = append(in.Ingresses, ing)
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		for j, ep := range r.endpoints {
			h, p, _ := net.SplitHostPort(ep)
			var port int32
			fmt.Sscan(p, &port)
			in.Slices = append(in.Slices, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j), Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
			})
		}
	}
	return in
}

// echo is a backend that answers with its name and the request it saw, as JSON.
type echoReply struct {
	Backend string              `json:"backend"`
	Proto   string              `json:"proto"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Header  map[string][]string `json:"header"`
	Body    string              `json:"body"`
}

func echoBackend(t testing.TB, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(echoHandler(name))
	t.Cleanup(srv.Close)
	return srv
}

func echoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoReply{Backend: name, Proto: r.Proto, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header, Body: string(b)})
	})
}

func hostport(s *httptest.Server) string { return s.Listener.Addr().String() }

// startProxy runs a data plane on loopback listeners; it returns the plain and TLS addresses.
func startProxy(t testing.TB, opts Options, tab *table.Table) (s *Server, httpAddr, httpsAddr string) {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(tab)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, hl, tl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, hl.Addr().String(), tl.Addr().String()
}

func get(t testing.TB, c *http.Client, url string, hdr map[string]string) (*http.Response, echoReply) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e echoReply
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
	}
	return resp, e
}
