package dataplane

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestStreamingAndTrailers: a chunked response is passed on as the backend writes it (the
// client reads the first part while the backend waits for it to), and its trailers, announced
// or not, reach the client; hop-by-hop response headers do not. On the direct path (GET) and
// through ReverseProxy (the reference transport), to an HTTP/1.1 client and to an HTTP/2 one.
func TestStreamingAndTrailers(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		for _, h2 := range []bool{false, true} {
			clientGotFirst := make(chan struct{})
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "X-Sum")
				w.Header().Set("Connection", "X-Secret")
				w.Header().Set("X-Secret", "hop")
				w.Header().Set("X-Kept", "yes")
				_, _ = io.WriteString(w, "first\n")
				w.(http.Flusher).Flush()
				select {
				case <-clientGotFirst:
				case <-r.Context().Done():
					return
				}
				_, _ = io.WriteString(w, "second\n")
				w.Header().Set("X-Sum", "42")
				w.Header().Set(http.TrailerPrefix+"X-Late", "unannounced")
			}))
			defer be.Close()
			tab := buildTable(t, route{host: "s.test", path: "/", endpoints: []string{hostport(be)}})
			_, addr, tlsAddr := startProxy(t, opts, tab)
			url, client := "http://"+addr+"/", http.DefaultClient
			if h2 {
				tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "s.test", InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
				defer tr.CloseIdleConnections()
				url, client = "https://"+tlsAddr+"/", &http.Client{Transport: tr}
			}
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "s.test"
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor {
				t.Fatalf("the client spoke %s, want HTTP/%d", resp.Proto, wantMajor)
			}
			if got := resp.Header.Get("X-Secret"); got != "" {
				t.Errorf("header named in Connection forwarded: X-Secret: %q", got)
			}
			if got := resp.Header.Get("X-Kept"); got != "yes" {
				t.Errorf("X-Kept: %q, want yes", got)
			}
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "first\n" {
				t.Fatalf("first part: %q, %v", line, err)
			}
			close(clientGotFirst)
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "second\n" {
				t.Fatalf("rest: %q, %v", rest, err)
			}
			if got := resp.Trailer.Get("X-Sum"); got != "42" {
				t.Errorf("announced trailer X-Sum: %q, want 42 (trailers %v)", got, resp.Trailer)
			}
			if got := resp.Trailer.Get("X-Late"); got != "unannounced" {
				t.Errorf("unannounced trailer X-Late: %q (trailers %v)", got, resp.Trailer)
			}
		}
	})
}

// TestDirectPathHeaders: the direct path forwards what ReverseProxy would: headers named in
// Connection and the other hop-by-hop ones are dropped, Te: trailers is kept, a HEAD gets
// the backend's headers and no body, and a value with a line break cannot inject a header.
func TestDirectPathHeaders(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "d.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reference := opts.DisableDirectPath
		_, addr, _ := startProxy(t, opts, tab)
		_, e := get(t, http.DefaultClient, "http://"+addr+"/p?q=1", map[string]string{"Host": "d.test",
			"Connection": "X-Hop, keep-alive", "X-Hop": "secret", "Te": "trailers, deflate", "Keep-Alive": "timeout=5",
			"Proxy-Authorization": "Basic eA==", "X-Other": "kept"})
		for k, want := range map[string]string{"X-Hop": "", "Keep-Alive": "", "Proxy-Authorization": "", "Connection": "",
			"Te": "trailers", "X-Other": "kept"} {
			if got := strings.Join(e.Header[k], ","); got != want {
				t.Errorf("reference=%v: backend saw %s: %q, want %q", reference, k, got, want)
			}
		}
		if e.Path != "/p" || e.Host != "d.test" {
			t.Errorf("reference=%v: backend saw host %q path %q", reference, e.Host, e.Path)
		}
		// Queries that do not parse are re-encoded as ReverseProxy does (here: ';' is
		// not a separator, so "a=1;b=2" is dropped), on either path.
		for q, want := range map[string]string{"a=1&b=%41": "a=1&b=%41", "a=1;b=2&c=3": "c=3", "x=%zz&c=3": "c=3"} {
			_, e := get(t, http.DefaultClient, "http://"+addr+"/q?"+q, map[string]string{"Host": "d.test"})
			if e.Query != want {
				t.Errorf("reference=%v: query %q reached the backend as %q, want %q", reference, q, e.Query, want)
			}
		}
		req, err := http.NewRequest(http.MethodHead, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "d.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("reference=%v: HEAD: status %d, %d body bytes, Content-Type %q", reference, resp.StatusCode, len(b), resp.Header.Get("Content-Type"))
		}
	})
}

// TestWriteHeadCleansValues: writeHead turns line breaks in a value into spaces, as
// Request.Write does, so a value cannot start another header.
func TestWriteHeadCleansValues(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "http://x.test/a", nil)
	r.Header.Set("X-Bad", "v\r\nX-Injected: 1")
	var sb strings.Builder
	bw := bufio.NewWriter(&sb)
	if err := s.writeHead(bw, r, &attempt{clientIP: "192.0.2.1", reqID: "id"}); err != nil {
		t.Fatal(err)
	}
	_ = bw.Flush()
	if strings.Contains(sb.String(), "\r\nX-Injected") {
		t.Errorf("header injected:\n%s", sb.String())
	}
	if !strings.HasPrefix(sb.String(), "GET /a HTTP/1.1\r\nHost: x.test\r\n") || !strings.HasSuffix(sb.String(), "X-Request-Id: id\r\n\r\n") {
		t.Errorf("request head:\n%s", sb.String())
	}
}

// TestResponseHeaderTimeout: a backend that never answers gets 504 once ResponseHeaderTimeout
// has passed, counted as a timeout, on the direct path and through ReverseProxy; the
// endpoint is not ejected by one timeout.
func TestResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer be.Close()
	defer close(release)
	tab := buildTable(t, route{host: "t.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reference := opts.DisableDirectPath
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		opts.ResponseHeaderTimeout, opts.Metrics = 50*time.Millisecond, m
		_, addr, _ := startProxy(t, opts, tab)
		resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "t.test"})
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("reference=%v: status %d, want 504", reference, resp.StatusCode)
		}
		if n := testutil.ToFloat64(m.UpstreamErrors.WithLabelValues("timeout")); n != 1 {
			t.Errorf("reference=%v: %v timeouts counted, want 1", reference, n)
		}
	})
}

// TestTakesDirectPath: which requests the direct path takes. HTTP/2 requests take it as
// HTTP/1.x ones do (the backend gets HTTP/1.1 either way); anything with a body, an upgrade,
// an expectation or a backend that is not HTTP/1.1 goes through ReverseProxy.
func TestTakesDirectPath(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain := &pool{backend: &table.Backend{Protocol: table.ProtocolHTTP}}
	h2c := &pool{backend: &table.Backend{Protocol: table.ProtocolH2C}}
	req := func(method string, major int, edit func(*http.Request)) *http.Request {
		r := httptest.NewRequest(method, "http://d.test/a?b=c", nil)
		r.ProtoMajor, r.ProtoMinor = major, 0
		if major == 1 {
			r.ProtoMinor = 1
		}
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    *http.Request
		p    *pool
		want bool
	}{
		{"HTTP/2 POST with a body", req(http.MethodPost, 2, func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), 1
		}), plain, false},
		{"HTTP/2 GET with a body", req(http.MethodGet, 2, func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), 1
		}), plain, false},
		{"HTTP/2 GET with trailers announced", req(http.MethodGet, 2, func(r *http.Request) { r.Trailer = http.Header{"X-T": nil} }), plain, false},
		{"HTTP/2 GET to an h2c backend", req(http.MethodGet, 2, nil), h2c, false},
		{"HTTP/2 GET with an unusual Host", req(http.MethodGet, 2, func(r *http.Request) { r.Host = "" }), plain, false},
		{"HTTP/2 GET with a query ReverseProxy re-encodes", req(http.MethodGet, 2, func(r *http.Request) { r.URL.RawQuery = "a;b" }), plain, false},
		{"HTTP/1.1 GET with Upgrade", req(http.MethodGet, 1, func(r *http.Request) { r.Header.Set("Upgrade", "websocket") }), plain, false},
		{"HTTP/3 GET", req(http.MethodGet, 3, nil), plain, false},
		{"HTTP/1.1 GET", req(http.MethodGet, 1, nil), plain, true},
		{"HTTP/1.1 GET with Connection: close", req(http.MethodGet, 1, func(r *http.Request) { r.Close = true; r.Header.Set("Connection", "close") }), plain, true},
		{"HTTP/1.0 GET without keep-alive", req(http.MethodGet, 1, func(r *http.Request) { r.ProtoMinor, r.Close = 0, true }), plain, true},
		{"HTTP/2 GET", req(http.MethodGet, 2, nil), plain, true},
		{"HTTP/2 HEAD", req(http.MethodHead, 2, nil), plain, true},
	} {
		if got := s.takesDirectPath(tc.r, tc.p); got != tc.want {
			t.Errorf("%s: direct path %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClientConnectionClose: a client that will not keep its connection (HTTP/1.0 without
// keep-alive, or Connection: close) gets its response and then the end of the connection, on
// both paths (both take it: TestTakesDirectPath), while the backend sees neither its
// Connection header nor its protocol version, and keeps its own connection: the two requests
// reach the backend over one pooled connection.
func TestClientConnectionClose(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		var mu sync.Mutex
		var conns int
		var seen []string
		be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s %s Connection=%q", r.URL.Path, r.Proto, r.Header.Values("Connection")))
			mu.Unlock()
			_, _ = io.WriteString(w, "hello "+r.URL.Path)
		}))
		be.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				mu.Lock()
				conns++
				mu.Unlock()
			}
		}
		be.Start()
		defer be.Close()
		tab := buildTable(t, route{host: "c.test", path: "/", endpoints: []string{hostport(be)}})
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct{ path, raw string }{
			{"/a", "GET /a HTTP/1.0\r\nHost: c.test\r\n\r\n"},
			{"/b", "GET /b HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n"},
		} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tc.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != "hello "+tc.path {
				t.Errorf("%s: %d %q (%v), want 200 %q", tc.path, resp.StatusCode, body, err, "hello "+tc.path)
			}
			if n, err := br.ReadByte(); err != io.EOF {
				t.Errorf("%s: after the response the connection gave %q, %v; want it closed (EOF)", tc.path, n, err)
			}
			c.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{`/a HTTP/1.1 Connection=[]`, `/b HTTP/1.1 Connection=[]`}
		if !slices.Equal(seen, want) {
			t.Errorf("backend saw %q, want %q", seen, want)
		}
		if conns != 1 {
			t.Errorf("backend connections: %d, want 1 (the client's close is not the backend's)", conns)
		}
	})
}
