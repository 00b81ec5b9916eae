package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/internal/testenv"
)

// TestProxyDrainsOnShutdown runs the proxy runner (--static-config, no API server) and ends
// it as SIGTERM does: /readyz fails at once, while the listener still accepts for
// --shutdown-delay; a client holding a keep-alive connection gets its next response with
// Connection: close, a request in flight completes with 200, no request fails, and the
// runner returns only after the delay.
func TestProxyDrainsOnShutdown(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "backend %s", r.URL.Path)
	}))
	defer backend.Close()
	host, port, _ := net.SplitHostPort(backend.Listener.Addr().String())
	static := filepath.Join(t.TempDir(), "static.yaml")
	if err := os.WriteFile(static, []byte(fmt.Sprintf(drainStaticConfig, host, port)), 0o600); err != nil {
		t.Fatal(err)
	}

	const delay = 5 * time.Second
	httpAddr, adminAddr := freeAddr(t), freeAddr(t)
	var opts proxyOptions
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse([]string{"--static-config", static, "--http-bind-address", httpAddr, "--https-bind-address", "0",
		"--admin-bind-address", adminAddr, "--shutdown-delay", delay.String(), "--shutdown-timeout", "20s"}); err != nil {
		t.Fatal(err)
	}
	opts.registry = prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testenv.Logger(t, "proxy")))
	defer cancel()
	procs := goruntime.GOMAXPROCS(0)
	done := make(chan error, 1)
	go func() { done <- runProxy(ctx, opts) }()

	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	readyz := func() (int, error) {
		resp, err := probe.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	held := &http.Transport{}
	defer held.CloseIdleConnections()
	// get sends GET path on rt; it returns the response's Connection: close and whether the
	// connection was reused. Any failure fails the test.
	get := func(rt http.RoundTripper, path string) (closes, reused bool) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
		req.Host = "a.example"
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != "backend "+path {
			t.Fatalf("GET %s → %d %q (%v), want 200 from the backend", path, resp.StatusCode, b, err)
		}
		return resp.Close, reused
	}

	testenv.Eventually(t, 30*time.Second, "the proxy is ready", func() error {
		if code, err := readyz(); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz → %d %v", code, err)
		}
		return nil
	})
	if closes, _ := get(held, "/first"); closes {
		t.Fatal("before shutdown: the response says Connection: close")
	}
	slow := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/slow", nil)
		req.Host = "a.example"
		resp, err := probe.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != "backend /slow" {
				err = fmt.Errorf("→ %d %q", resp.StatusCode, b)
			}
		}
		slow <- err
	}()
	testenv.Receive(t, 10*time.Second, "the slow request reaches the backend", arrived)

	stopped := time.Now()
	cancel() // what SIGTERM does (main's signal context)
	testenv.Eventually(t, 2*time.Second, "/readyz fails once shutdown begins", func() error {
		if code, err := readyz(); err != nil || code == http.StatusOK {
			return fmt.Errorf("/readyz → %d %v, want a failure status", code, err)
		}
		return nil
	})
	if closes, reused := get(held, "/held"); !closes || !reused {
		t.Errorf("held keep-alive connection while draining: Connection: close %v, reused %v; want both", closes, reused)
	}
	close(release)
	if err := testenv.Receive(t, 20*time.Second, "the request in flight completes", slow); err != nil {
		t.Errorf("request in flight at shutdown: %v", err)
	}
	if err := testenv.Receive(t, 30*time.Second, "the runner returns", done); err != nil {
		t.Errorf("runner: %v", err)
	}
	if got := goruntime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the runner returned, want %d as before it (the runner raises it for password checks)", got, procs)
	}
	if took := time.Since(stopped); took < delay {
		t.Errorf("the runner returned %v after shutdown began, before --shutdown-delay %v", took, delay)
	}
	if c, err := net.Dial("tcp", httpAddr); err == nil {
		c.Close()
		t.Error("the listener still accepts after the runner returned")
	}
}

const drainStaticConfig = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: metalgate}
spec: {controller: metalgate.io/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: a, namespace: web}
spec:
  ingressClassName: metalgate
  rules:
  - host: a.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {name: http}}}}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: web}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: web, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: %[2]s}]
endpoints: [{addresses: ["%[1]s"], conditions: {ready: true}}]
`
