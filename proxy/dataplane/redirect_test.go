package dataplane

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestRedirectLocation: a RequestRedirect keeps every part of the request it does not set;
// a new scheme brings its well-known port; the port is left out when it is the scheme's
// well-known one; the prefix the route matched is what a prefix path replaces.
func TestRedirectLocation(t *testing.T) {
	str := func(s string) *string { return &s }
	prefix := &table.Route{Path: "/foo", PathType: "Prefix"}
	exact := &table.Route{Path: "/foo", PathType: "Exact"}
	for _, tc := range []struct {
		name  string
		url   string // the request's
		tls   bool
		local int // the listener port the request came to
		route *table.Route
		rr    table.RequestRedirect
		want  string
	}{
		{"to https: the well-known port, path and query kept", "http://a.example/foo/bar?q=1", false, 80, prefix,
			table.RequestRedirect{Scheme: "https"}, "https://a.example/foo/bar?q=1"},
		{"to https from a listener on 8080: still the well-known port", "http://a.example:8080/foo", false, 8080, prefix,
			table.RequestRedirect{Scheme: "https"}, "https://a.example/foo"},
		{"host only: scheme and the listener's port kept", "http://a.example:8080/foo", false, 8080, prefix,
			table.RequestRedirect{Host: "b.example"}, "http://b.example:8080/foo"},
		{"host only on port 80: no port", "http://a.example/foo", false, 80, prefix,
			table.RequestRedirect{Host: "b.example"}, "http://b.example/foo"},
		{"over TLS: https kept", "https://a.example/foo", true, 443, prefix,
			table.RequestRedirect{Host: "b.example"}, "https://b.example/foo"},
		{"port set", "http://a.example/foo", false, 80, prefix,
			table.RequestRedirect{Port: 8443, Scheme: "https"}, "https://a.example:8443/foo"},
		{"port 80 with http: left out", "http://a.example:8080/foo", false, 8080, prefix,
			table.RequestRedirect{Port: 80}, "http://a.example/foo"},
		{"full path", "http://a.example/foo/bar?q=1", false, 80, prefix,
			table.RequestRedirect{FullPath: str("/x")}, "http://a.example/x?q=1"},
		{"prefix replaced, rest kept", "http://a.example/foo/bar", false, 80, prefix,
			table.RequestRedirect{PrefixPath: str("/new")}, "http://a.example/new/bar"},
		{"prefix replaced by /: no double slash", "http://a.example/foo/bar", false, 80, prefix,
			table.RequestRedirect{PrefixPath: str("/")}, "http://a.example/bar"},
		{"prefix replaced, nothing after it", "http://a.example/foo", false, 80, prefix,
			table.RequestRedirect{PrefixPath: str("/")}, "http://a.example/"},
		{"exact route: the whole path", "http://a.example/foo", false, 80, exact,
			table.RequestRedirect{PrefixPath: str("/new")}, "http://a.example/new"},
		{"IPv6 host without port", "http://[2001:db8::1]/foo", false, 80, prefix,
			table.RequestRedirect{Scheme: "https"}, "https://[2001:db8::1]/foo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.url, nil)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tc.local}))
			if got, ok := redirectLocation(r, tc.route, &tc.rr); !ok || got != tc.want {
				t.Errorf("Location %q (%v), want %q", got, ok, tc.want)
			}
		})
	}
}

// TestRequestRedirectServed: through the proxy, on both paths, a route with a RequestRedirect
// answers its code and Location and never reaches the backend.
func TestRequestRedirectServed(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		reached := make(chan struct{}, 1)
		be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }))
		t.Cleanup(be.Close)
		tab := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(be)}})
		for _, r := range tab.Routes() {
			r.Options.Policy.RequestRedirect = &table.RequestRedirect{Host: "b.test", Code: http.StatusMovedPermanently}
		}
		_, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		_, port, _ := net.SplitHostPort(addr)
		req, _ := http.NewRequest("GET", "http://"+addr+"/x?y=1", nil)
		req.Host = "a.test"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := "http://b.test:" + port + "/x?y=1"; resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want {
			t.Errorf("%d Location %q, want 301 %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		select {
		case <-reached:
			t.Error("the backend was reached")
		default:
		}
	})
}

// TestUnresolvedBackend: a route to a backendRef that resolves to nothing answers 500 (Gateway
// API), not 503, on both paths, and counts it.
func TestUnresolvedBackend(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		tab := buildTable(t, route{host: "a.test", path: "/"})
		for _, r := range tab.Routes() {
			r.Backend.Unresolved = true
		}
		_, addr, _ := startProxy(t, opts, tab)
		resp, _ := get(t, &http.Client{}, "http://"+addr+"/", map[string]string{"Host": "a.test"})
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("status %d, want 500", resp.StatusCode)
		}
	})
}

// TestRouteRequestTimeout: a route's RequestTimeout (HTTPRoute timeouts) answers 504 when the
// backend has not answered by then, on both paths, and does not touch a faster backend.
func TestRouteRequestTimeout(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(slow.Close)
		tab := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(slow)}})
		for _, r := range tab.Routes() {
			r.Options.Policy.RequestTimeout = 200 * time.Millisecond
		}
		_, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second}
		start := time.Now()
		resp, _ := get(t, c, "http://"+addr+"/slow", map[string]string{"Host": "a.test"})
		if took := time.Since(start); resp.StatusCode != http.StatusGatewayTimeout || took > 5*time.Second {
			t.Errorf("a backend slower than the route's timeout: %d after %v, want 504 after about 200ms", resp.StatusCode, took)
		}
		if resp, _ := get(t, c, "http://"+addr+"/fast", map[string]string{"Host": "a.test"}); resp.StatusCode != http.StatusNoContent {
			t.Errorf("a fast backend: %d, want 204", resp.StatusCode)
		}
		c.CloseIdleConnections()
	})
}
