package dataplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/internal/adminauth"
)

// tokenReviewer accepts one token, for one user, granted get on /metrics only.
type tokenReviewer struct{}

func (tokenReviewer) Authenticate(_ context.Context, token string) (adminauth.User, bool, error) {
	return adminauth.User{Name: "system:serviceaccount:monitoring:prometheus"}, token == "scraper", nil
}

func (tokenReviewer) Authorize(_ context.Context, _ adminauth.User, verb, path string) (bool, error) {
	return verb == "get" && path == "/metrics", nil
}

// TestAdmin: the admin handler alone (what the guard lets through): /healthz while the process
// runs, /readyz by the ready func, /metrics from the gatherer.
func TestAdmin(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	var ready error
	srv := httptest.NewServer(AdminHandler(reg, func() error { return ready }))
	defer srv.Close()
	stale := errors.New("stale")
	for _, step := range []struct {
		ready error
		path  string
		want  int
	}{
		{nil, "/healthz", 200},
		{nil, "/readyz", 200},
		{nil, "/metrics", 200},
		{stale, "/readyz", 503},
		{stale, "/healthz", 200},
	} {
		ready = step.ready
		resp, err := http.Get(srv.URL + step.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != step.want {
			t.Errorf("%s (ready: %v): %d, want %d", step.path, step.ready, resp.StatusCode, step.want)
		}
	}
}

// TestAdminGuarded is the admin port as cmd/metalgate serves it (AdminHandler behind an
// adminauth.Guard opening AdminOpenPaths): the kubelet's probes from the node address, with
// no token, get their answer; /metrics and /debug/backends answer loopback, and otherwise only
// a token authorised for that path. (The Guard against a real API server:
// internal/adminauth.)
func TestAdminGuarded(t *testing.T) {
	s, err := New(Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	guard, err := adminauth.New(adminauth.Options{Reviewer: tokenReviewer{}, OpenPaths: AdminOpenPaths, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	notReady := errors.New("stale")
	var ready error
	h := guard.Wrap(AdminHandler(reg, func() error { return ready }, NewDebug(s).Route()))

	const node, pod, loopback = "198.51.100.11:52000", "203.0.113.140:41000", "127.0.0.1:39000"
	tests := []struct {
		name   string
		remote string
		path   string
		token  string
		ready  error
		want   int
	}{
		{name: "liveness probe", remote: node, path: "/healthz", want: 200},
		{name: "readiness probe", remote: node, path: "/readyz", want: 200},
		{name: "readiness probe, stale", remote: node, path: "/readyz", ready: notReady, want: 503},
		{name: "metrics from a pod", remote: pod, path: "/metrics", want: 401},
		{name: "debug from a pod", remote: pod, path: contract.DebugBackendsPath + "?ingress=a/b", want: 401},
		{name: "debug from the node", remote: node, path: contract.DebugBackendsPath + "?ingress=a/b", want: 401},
		{name: "metrics with a bad token", remote: pod, path: "/metrics", token: "forged", want: 401},
		{name: "metrics with the scraper's token", remote: pod, path: "/metrics", token: "scraper", want: 200},
		{name: "debug with the scraper's token", remote: pod, path: contract.DebugBackendsPath + "?ingress=a/b", token: "scraper", want: 403},
		{name: "metrics from loopback", remote: loopback, path: "/metrics", want: 200},
		// Loopback gets the handler's own answer (503: no table yet), not a refusal.
		{name: "debug from loopback", remote: loopback, path: contract.DebugBackendsPath + "?ingress=a/b", want: 503},
		{name: "unknown path from loopback", remote: loopback, path: "/debug/pprof/", want: 404},
		{name: "unknown path from a pod", remote: pod, path: "/debug/pprof/", want: 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready = tc.ready
			req := httptest.NewRequest(http.MethodGet, "http://admin"+tc.path, nil)
			req.RemoteAddr = tc.remote
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("%s from %s: %d %q, want %d", tc.path, tc.remote, rec.Code, rec.Body.String(), tc.want)
			}
		})
	}

	// Over a real connection from 127.0.0.1 (RemoteAddr as net/http fills it in).
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || len(b) == 0 {
		t.Errorf("GET /metrics over loopback: %d, %d bytes", resp.StatusCode, len(b))
	}
}
