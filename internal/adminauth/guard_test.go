package adminauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeReviewer knows tokens by value and grants paths per user; it counts its calls.
type fakeReviewer struct {
	mu      sync.Mutex
	users   map[string]string // token → user name
	grants  map[string]string // "user verb path" → "" when allowed
	err     error
	authn   int
	authz   int
	entered chan struct{} // when set, Authenticate says it was called…
	blockCh chan struct{} // …and then waits for this (ignoring ctx, as a slow API server)
}

func (f *fakeReviewer) Authenticate(_ context.Context, token string) (User, bool, error) {
	if f.blockCh != nil {
		f.entered <- struct{}{}
		<-f.blockCh
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.authn++
	if f.err != nil {
		return User{}, false, f.err
	}
	name, ok := f.users[token]
	return User{Name: name}, ok, nil
}

func (f *fakeReviewer) Authorize(_ context.Context, u User, verb, path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.authz++
	_, ok := f.grants[u.Name+" "+verb+" "+path]
	return ok, nil
}

func (f *fakeReviewer) calls() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authn, f.authz
}

func newFake() *fakeReviewer {
	return &fakeReviewer{
		users:  map[string]string{"good": "prometheus", "nobody": "nobody"},
		grants: map[string]string{"prometheus get /metrics": ""},
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })

// TestGuard is the decision table with a fake reviewer: the logic, not the API server (see
// TestGuardAgainstAPIServer for that).
func TestGuard(t *testing.T) {
	tests := []struct {
		name        string
		noReviewer  bool
		hostNetwork bool
		method      string
		remote      string
		path        string
		auth        string
		wantCode    int
		wantReason  Reason
	}{
		// Host network (the speaker): loopback is any process on the node, so it is no credential.
		{name: "host network: loopback without token", hostNetwork: true, remote: "127.0.0.1:40000", path: "/metrics", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "host network: loopback v6 without token", hostNetwork: true, remote: "[::1]:40000", path: "/debug/announcements", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "host network: loopback v4-mapped without token", hostNetwork: true, remote: "[::ffff:127.0.0.1]:40000", path: "/metrics", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "host network: loopback bad path", hostNetwork: true, remote: "127.0.0.1:40000", path: "/debug/../metrics", wantCode: 400, wantReason: ReasonBadPath},
		{name: "host network: loopback bad token", hostNetwork: true, remote: "127.0.0.1:40000", path: "/metrics", auth: "Bearer forged", wantCode: 401, wantReason: ReasonInvalidToken},
		{name: "host network: loopback not granted", hostNetwork: true, remote: "127.0.0.1:40000", path: "/metrics", auth: "Bearer nobody", wantCode: 403, wantReason: ReasonForbidden},
		{name: "host network: loopback granted", hostNetwork: true, remote: "127.0.0.1:40000", path: "/metrics", auth: "Bearer good", wantCode: 200},
		{name: "host network: node address granted", hostNetwork: true, remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer good", wantCode: 200},
		{name: "host network: open path", hostNetwork: true, remote: "127.0.0.1:1", path: "/healthz", wantCode: 200},
		{name: "loopback v4", remote: "127.0.0.1:40000", path: "/metrics", wantCode: 200},
		{name: "loopback v4 other", remote: "127.3.4.5:40000", path: "/debug/x", wantCode: 200},
		{name: "loopback v6", remote: "[::1]:40000", path: "/metrics", wantCode: 200},
		{name: "loopback v4-mapped", remote: "[::ffff:127.0.0.1]:40000", path: "/metrics", wantCode: 200},
		{name: "loopback without reviewer", noReviewer: true, remote: "127.0.0.1:1", path: "/metrics", wantCode: 200},
		{name: "healthz open", remote: "198.51.100.7:1", path: "/healthz", wantCode: 200},
		{name: "readyz open", remote: "198.51.100.7:1", path: "/readyz", wantCode: 200},
		{name: "healthz prefix is not open", remote: "198.51.100.7:1", path: "/healthz/../metrics", wantCode: 400, wantReason: ReasonBadPath},
		{name: "double slash", remote: "198.51.100.7:1", path: "//metrics", auth: "Bearer good", wantCode: 400, wantReason: ReasonBadPath},
		{name: "no token", remote: "198.51.100.7:1", path: "/metrics", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "basic auth is no token", remote: "198.51.100.7:1", path: "/metrics", auth: "Basic Zm9vOmJhcg==", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "empty bearer", remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer ", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "bad token", remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer forged", wantCode: 401, wantReason: ReasonInvalidToken},
		{name: "not granted", remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer nobody", wantCode: 403, wantReason: ReasonForbidden},
		{name: "granted", remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer good", wantCode: 200},
		{name: "scheme case-insensitive", remote: "198.51.100.7:1", path: "/metrics", auth: "bearer good", wantCode: 200},
		{name: "HEAD is get", method: http.MethodHead, remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer good", wantCode: 200},
		{name: "POST is post", method: http.MethodPost, remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer good", wantCode: 403, wantReason: ReasonForbidden},
		{name: "granted path only", remote: "198.51.100.7:1", path: "/debug/backends", auth: "Bearer good", wantCode: 403, wantReason: ReasonForbidden},
		{name: "node address", remote: "[2001:db8::11]:1", path: "/metrics", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "unparsable remote", remote: "@", path: "/metrics", wantCode: 401, wantReason: ReasonNoCredentials},
		{name: "static mode refuses tokens", noReviewer: true, remote: "198.51.100.7:1", path: "/metrics", auth: "Bearer good", wantCode: 403, wantReason: ReasonLoopbackOnly},
		{name: "static mode healthz", noReviewer: true, remote: "198.51.100.7:1", path: "/healthz", wantCode: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := Options{Registerer: reg, HostNetwork: tc.hostNetwork}
			if !tc.noReviewer {
				opts.Reviewer = newFake()
			}
			g, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, "http://admin"+tc.path, nil)
			req.URL.Path = tc.path // as the server parsed it, uncleaned
			req.RemoteAddr = tc.remote
			// A forwarding header never makes a caller loopback.
			req.Header.Set("X-Forwarded-For", "127.0.0.1")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			g.Wrap(ok).ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("code = %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.wantCode)
			}
			if tc.wantCode == 200 && rec.Body.String() != "served" {
				t.Errorf("body = %q, want the wrapped handler's", rec.Body.String())
			}
			if tc.wantCode == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tc.hostNetwork && strings.Contains(rec.Body.String(), "loopback") {
				t.Errorf("body = %q: a host-network guard must not offer loopback as a way in", rec.Body.String())
			}
			for _, r := range reasons {
				want := 0.0
				if r == tc.wantReason {
					want = 1
				}
				if got := testutil.ToFloat64(g.refusals.WithLabelValues(string(r))); got != want {
					t.Errorf("refused{reason=%s} = %v, want %v", r, got, want)
				}
			}
		})
	}
}

// TestGuardCache: decisions are remembered per (token, verb, path), refusals apart from
// grants, review errors not at all.
func TestGuardCache(t *testing.T) {
	f := newFake()
	g, err := New(Options{Reviewer: f, CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(ok)
	get := func(token, path string) int {
		req := httptest.NewRequest(http.MethodGet, "http://admin"+path, nil)
		req.RemoteAddr = "198.51.100.7:1"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	type step struct {
		desc        string
		token, path string
		err         error
		wantCode    int
		wantReviews [2]int // TokenReviews, SubjectAccessReviews so far
	}
	steps := []step{
		{desc: "first grant asks", token: "good", path: "/metrics", wantCode: 200, wantReviews: [2]int{1, 1}},
		{desc: "second grant is remembered", token: "good", path: "/metrics", wantCode: 200, wantReviews: [2]int{1, 1}},
		{desc: "another path asks again", token: "good", path: "/debug/x", wantCode: 403, wantReviews: [2]int{2, 2}},
		{desc: "its refusal is remembered", token: "good", path: "/debug/x", wantCode: 403, wantReviews: [2]int{2, 2}},
		{desc: "bad token asks", token: "forged1", path: "/metrics", wantCode: 401, wantReviews: [2]int{3, 2}},
		{desc: "bad tokens fill the refusal cache", token: "forged2", path: "/metrics", wantCode: 401, wantReviews: [2]int{4, 2}},
		{desc: "and push out older refusals", token: "good", path: "/debug/x", wantCode: 403, wantReviews: [2]int{5, 3}},
		{desc: "but not the grant", token: "good", path: "/metrics", wantCode: 200, wantReviews: [2]int{5, 3}},
		{desc: "an API error is not cached", token: "new", path: "/metrics", err: errors.New("connection refused"), wantCode: 503, wantReviews: [2]int{6, 3}},
		{desc: "the next request asks again", token: "new", path: "/metrics", err: errors.New("connection refused"), wantCode: 503, wantReviews: [2]int{7, 3}},
	}
	for _, s := range steps {
		f.mu.Lock()
		f.err = s.err
		f.mu.Unlock()
		if got := get(s.token, s.path); got != s.wantCode {
			t.Fatalf("%s: code = %d, want %d", s.desc, got, s.wantCode)
		}
		if a, z := f.calls(); [2]int{a, z} != s.wantReviews {
			t.Fatalf("%s: reviews (TokenReview, SAR) = (%d, %d), want %v", s.desc, a, z, s.wantReviews)
		}
	}
}

// TestGuardBoundsReviews: with MaxReviews in flight, the next request waits for a slot and
// gives up with 503 when its review time is over; the slot holders finish.
func TestGuardBoundsReviews(t *testing.T) {
	f := newFake()
	f.entered, f.blockCh = make(chan struct{}, 1), make(chan struct{})
	g, err := New(Options{Reviewer: f, MaxReviews: 1, ReviewTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(ok)
	serve := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "http://admin/metrics", nil)
		req.RemoteAddr = "198.51.100.7:1"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	first := make(chan int)
	go func() { first <- serve("good") }()
	<-f.entered // the first request holds the only slot until blockCh closes
	if c := serve("good"); c != http.StatusServiceUnavailable {
		t.Errorf("second request = %d, want 503 (no review slot within the timeout)", c)
	}
	close(f.blockCh)
	if c := <-first; c != http.StatusOK {
		t.Errorf("first request = %d, want 200", c)
	}
}

func TestCanonical(t *testing.T) {
	got := map[string]bool{}
	for _, p := range []string{"/metrics", "/debug/backends", "/debug/", "/", "", "metrics", "/a/../metrics", "/./metrics", "//metrics", "/debug//x", "/debug/x/."} {
		got[p] = canonical(p)
	}
	want := map[string]bool{"/metrics": true, "/debug/backends": true, "/debug/": true, "/": true, "": false, "metrics": false,
		"/a/../metrics": false, "/./metrics": false, "//metrics": false, "/debug//x": false, "/debug/x/.": false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("canonical (-want +got):\n%s", d)
	}
}

// TestSharedRegisterer: two Guards on one registry share the counter instead of failing.
func TestSharedRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatalf("second Guard on the same registry: %v", err)
	}
	if a.refusals != b.refusals {
		t.Error("the Guards count into different counters")
	}
}

// TestHostNetworkNeedsReviewer: a host-network guard without a reviewer could serve no one
// past the open paths; New says so rather than start a port that refuses everything.
func TestHostNetworkNeedsReviewer(t *testing.T) {
	_, err := New(Options{HostNetwork: true})
	if err == nil || !strings.Contains(err.Error(), "HostNetwork") || !strings.Contains(err.Error(), "Reviewer") {
		t.Fatalf("New(HostNetwork without Reviewer) = %v, want an error naming HostNetwork and Reviewer", err)
	}
}
