package dataplane

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

func TestHTTP1ForwardingHeaders(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "a")
		tab := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(be)}})
		for _, tc := range []struct {
			name    string
			trusted []netip.Prefix
			want    map[string]string
		}{
			{"untrusted", nil, map[string]string{
				"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "a.test", "X-Real-Ip": "127.0.0.1",
				"Forwarded": "for=127.0.0.1;host=a.test;proto=http", "X-Hop": "", "Connection": "", "X-Request-Id": "client-id-1"}},
			{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, map[string]string{
				"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "spoof.test", "X-Real-Ip": "203.0.113.7",
				"Forwarded": "for=203.0.113.7, for=127.0.0.1;host=a.test;proto=https", "X-Hop": "", "Connection": "", "X-Request-Id": "client-id-1"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				opts.TrustedProxies = tc.trusted
				_, addr, _ := startProxy(t, opts, tab)
				resp, e := get(t, http.DefaultClient, "http://"+addr+"/x", map[string]string{
					"Host": "a.test", "X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "spoof.test",
					"X-Real-Ip": "203.0.113.7", "Forwarded": "for=203.0.113.7", "Connection": "X-Hop", "X-Hop": "secret", "X-Request-Id": "client-id-1"})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				got := map[string]string{}
				for k := range tc.want {
					got[k] = strings.Join(e.Header[k], "|")
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("headers at the backend (-want +got):\n%s", diff)
				}
				if e.Host != "a.test" || resp.Header.Get("X-Request-Id") != "client-id-1" {
					t.Errorf("host %q, response request id %q", e.Host, resp.Header.Get("X-Request-Id"))
				}
			})
		}
		t.Run("requestIDGenerated", func(t *testing.T) {
			_, addr, _ := startProxy(t, opts, tab)
			resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "a.test"})
			id := resp.Header.Get("X-Request-Id")
			if len(id) != 32 || e.Header["X-Request-Id"][0] != id {
				t.Errorf("request id %q, backend saw %q", id, e.Header["X-Request-Id"])
			}
		})
		t.Run("notFound", func(t *testing.T) {
			_, addr, _ := startProxy(t, opts, tab)
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "other.test"})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("status %d, want 404", resp.StatusCode)
			}
		})
	})
}

func TestHTTP2OverTLSWithSNI(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "a")
		crtPEM, keyPEM := pemCert(t, "secure.test")
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "secure"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crtPEM, corev1.TLSPrivateKeyKey: keyPEM}}
		tab := buildTable(t,
			route{host: "secure.test", path: "/", endpoints: []string{hostport(be)}, tlsSecret: sec},
			route{host: "plain.test", path: "/", endpoints: []string{hostport(be)}},
		)
		_, _, tlsAddr := startProxy(t, opts, tab)
		for _, tc := range []struct{ sni, wantCN string }{
			{"secure.test", "secure.test"},
			{"plain.test", "metalgate-proxy-default"},
		} {
			t.Run(tc.sni, func(t *testing.T) {
				tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr}
				resp, e := get(t, c, "https://"+tlsAddr+"/h2", map[string]string{"Host": tc.sni})
				if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
					t.Fatalf("status %d proto %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
				}
				if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != tc.wantCN {
					t.Errorf("certificate CN %q, want %q", cn, tc.wantCN)
				}
				if e.Header["X-Forwarded-Proto"][0] != "https" || e.Proto != "HTTP/1.1" {
					t.Errorf("backend saw proto %q over %s", e.Header["X-Forwarded-Proto"], e.Proto)
				}
			})
		}
	})
}

func TestH2CBackend(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		be := httptest.NewUnstartedServer(echoHandler("grpc"))
		be.Config.Protocols = &p
		be.Start()
		defer be.Close()
		tab := buildTable(t, route{host: "g.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{ingress.AnnotationBackendProtocol: "grpc"}})
		_, addr, _ := startProxy(t, opts, tab)
		resp, e := get(t, http.DefaultClient, "http://"+addr+"/svc.Method", map[string]string{"Host": "g.test"})
		if resp.StatusCode != http.StatusOK || e.Proto != "HTTP/2.0" {
			t.Errorf("status %d, backend saw %q, want HTTP/2.0", resp.StatusCode, e.Proto)
		}
	})
}

func TestRedirectAndBodyLimit(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "a")
		tab := buildTable(t,
			route{host: "r.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{ingress.AnnotationSSLRedirect: "true"}},
			route{host: "b.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{ingress.AnnotationBodySize: "1k"}},
		)
		_, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, _ := get(t, c, "http://"+addr+"/p?q=1", map[string]string{"Host": "r.test"})
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "https://r.test/p?q=1" {
			t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, tc := range []struct {
			size    int
			chunked bool
			want    int
		}{{1000, false, 200}, {2000, false, 413}, {2000, true, 413}, {1000, true, 200}} {
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", body)
			req.Host = "b.test"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("body %d chunked=%v: status %d, want %d", tc.size, tc.chunked, resp.StatusCode, tc.want)
			}
		}
	})
}

// TestSmuggling sends ambiguous framing over raw TCP. Go's server refuses conflicting
// Content-Lengths and unknown transfer codings; with both Content-Length and chunked it
// follows RFC 9112 §6.3 (chunked wins, Content-Length is dropped), and since the proxy
// re-frames every request, the backend sees one request and never the smuggled bytes.
func TestSmuggling(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		var mu sync.Mutex
		var seen []string
		be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path+" body="+string(b))
			mu.Unlock()
		}))
		defer be.Close()
		tab := buildTable(t, route{host: "s.test", path: "/", endpoints: []string{hostport(be)}})
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			name, raw string
			want      int
		}{
			{"twoContentLengths", "POST / HTTP/1.1\r\nHost: s.test\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400},
			{"chunkedThenIdentity", "POST / HTTP/1.1\r\nHost: s.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 501},
			{"unknownCoding", "POST / HTTP/1.1\r\nHost: s.test\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501},
			{"spaceBeforeColon", "POST / HTTP/1.1\r\nHost: s.test\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
			{"clAndChunked", "POST /a HTTP/1.1\r\nHost: s.test\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nX: x", 200},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(c, tc.raw); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
				}
			})
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"POST /a body="}, seen); diff != "" {
			t.Errorf("requests at the backend (-want +got):\n%s", diff)
		}
	})
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func TestRetriesAndPassiveHealth(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "live")
		dead := deadAddr(t)
		tab := buildTable(t, route{host: "r.test", path: "/", endpoints: []string{dead, hostport(be)}})
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		opts.Metrics, opts.FailureThreshold, opts.EjectFor = m, 2, 300*time.Millisecond
		_, addr, _ := startProxy(t, opts, tab)
		for i := 0; i < 20; i++ {
			resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "r.test"})
			if resp.StatusCode != 200 || e.Backend != "live" {
				t.Fatalf("request %d: status %d from %q", i, resp.StatusCode, e.Backend)
			}
		}
		if n := testutil.ToFloat64(m.Ejections); n != 1 {
			t.Errorf("ejections = %v, want 1 (ejected once, then out of rotation)", n)
		}
		if retries := counterValues(m.Retries); len(retries) != 1 || retries["connect"] != 2 {
			t.Errorf("retries = %v, want connect: 2 (one per failure before ejection)", retries)
		}
		// A POST with a body is not retried: it fails with 502 when it hits the dead endpoint.
		// Bring the dead endpoint back: after the ejection time it gets traffic again.
		l, err := net.Listen("tcp", dead)
		if err != nil {
			t.Skipf("cannot rebind %s: %v", dead, err)
		}
		back := &http.Server{Handler: echoHandler("back")}
		go func() { _ = back.Serve(l) }()
		defer back.Close()
		// After the ejection time (350ms) it is back in rotation.
		seen := map[string]int{}
		testenv.Eventually(t, 10*time.Second, "the recovered endpoint gets traffic again", func() error {
			_, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "r.test"})
			if seen[e.Backend]++; seen["back"] == 0 {
				return fmt.Errorf("answered by %v", seen)
			}
			return nil
		})
	})
}

func TestPostNotRetried(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		tab := buildTable(t, route{host: "p.test", path: "/", endpoints: []string{deadAddr(t)}})
		_, addr, _ := startProxy(t, opts, tab)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("data"))
		req.Host = "p.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("status %d, want 502", resp.StatusCode)
		}
	})
}

func TestCookieAffinity(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		var eps []string
		for i := 0; i < 4; i++ {
			eps = append(eps, hostport(echoBackend(t, fmt.Sprintf("b%d", i))))
		}
		tab := buildTable(t, route{host: "a.test", path: "/", endpoints: eps, annotations: map[string]string{ingress.AnnotationAffinity: "cookie"}})
		_, addr, _ := startProxy(t, opts, tab)
		resp, first := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "a.test"})
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == table.DefaultAffinityCookie {
				cookie = c
			}
		}
		if cookie == nil {
			t.Fatalf("no affinity cookie in %v", resp.Header["Set-Cookie"])
		}
		for i := 0; i < 20; i++ {
			resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "a.test", "Cookie": cookie.String()})
			if e.Backend != first.Backend {
				t.Fatalf("request %d went to %s, pinned to %s", i, e.Backend, first.Backend)
			}
			if len(resp.Cookies()) != 0 {
				t.Errorf("cookie set again: %v", resp.Header["Set-Cookie"])
			}
		}
	})
}

func TestHashByHeader(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		var eps []string
		for i := 0; i < 4; i++ {
			eps = append(eps, hostport(echoBackend(t, fmt.Sprintf("b%d", i))))
		}
		tab := buildTable(t, route{host: "h.test", path: "/", endpoints: eps, annotations: map[string]string{ingress.AnnotationHashBy: "header:X-User"}})
		_, addr, _ := startProxy(t, opts, tab)
		for u := 0; u < 5; u++ {
			user := fmt.Sprintf("user-%d", u)
			_, first := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "h.test", "X-User": user})
			for i := 0; i < 5; i++ {
				if _, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "h.test", "X-User": user}); e.Backend != first.Backend {
					t.Fatalf("%s moved from %s to %s", user, first.Backend, e.Backend)
				}
			}
		}
	})
}

// TestSwapKeepsInFlight: a slow request and an open WebSocket-style upgraded connection
// survive table swaps that remove their endpoint; new requests go to the new endpoint.
func TestSwapKeepsInFlight(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") == "websocket" {
				upgradeEcho(w, r)
				return
			}
			started <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "slow done")
		}))
		defer old.Close()
		newer := echoBackend(t, "new")
		s, addr, _ := startProxy(t, opts, buildTable(t, route{host: "w.test", path: "/", endpoints: []string{hostport(old)}}))

		// An upgraded connection through the proxy.
		ws, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(ws, "GET /ws HTTP/1.1\r\nHost: w.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		br := bufio.NewReader(ws)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		echoLine := func(msg string) {
			t.Helper()
			if _, err := io.WriteString(ws, msg+"\n"); err != nil {
				t.Fatal(err)
			}
			got, err := br.ReadString('\n')
			if err != nil || got != msg+"\n" {
				t.Fatalf("echo %q: got %q, %v", msg, got, err)
			}
		}
		echoLine("before")

		// A slow request in flight.
		slow := make(chan string, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/slow", nil)
			req.Host = "w.test"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				slow <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			slow <- string(b)
		}()
		<-started

		for i := 0; i < 3; i++ { // several swaps, the last without the old endpoint
			s.Swap(buildTable(t, route{host: "w.test", path: "/", endpoints: []string{hostport(newer)}}))
		}
		if _, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "w.test"}); e.Backend != "new" {
			t.Errorf("new request went to %q, want new", e.Backend)
		}
		echoLine("after swap")
		close(release)
		if got := <-slow; got != "slow done" {
			t.Errorf("in-flight request: %q", got)
		}
		echoLine("still open")
	})
}

// upgradeEcho switches protocols and echoes lines until the client closes.
func upgradeEcho(w http.ResponseWriter, r *http.Request) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	_ = brw.Flush()
	for {
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = brw.WriteString(line)
		_ = brw.Flush()
	}
}

// TestStaleKeepAlive: the backend closes idle keep-alive connections quickly; a request on a
// pooled connection the backend already closed is sent again on a new one, not failed.
func TestStaleKeepAlive(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := httptest.NewUnstartedServer(echoHandler("a"))
		be.Config.IdleTimeout = 20 * time.Millisecond
		closed := make(chan struct{}, 16)
		be.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				select {
				case closed <- struct{}{}:
				default: // enough said: never block the backend
				}
			}
		}
		be.Start()
		defer be.Close()
		tab := buildTable(t, route{host: "k.test", path: "/", endpoints: []string{hostport(be)}})
		_, addr, _ := startProxy(t, opts, tab)
		for i := 0; i < 5; i++ {
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "k.test"})
			if resp.StatusCode != 200 {
				t.Fatalf("request %d after the backend closed the idle connection: %d", i, resp.StatusCode)
			}
			// The backend closes the pooled connection after its idle timeout: the next request
			// finds it stale.
			testenv.Receive(t, 10*time.Second, "the backend closes the idle connection", closed)
		}
	})
}

// TestClientLimits: oversized headers get 431; a client that sends its headers too slowly
// (slowloris) is disconnected after ReadHeaderTimeout; h2c works on the plain port when
// enabled.
func TestClientLimits(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "a")
		tab := buildTable(t, route{host: "l.test", path: "/", endpoints: []string{hostport(be)}})
		opts.MaxHeaderBytes, opts.ReadHeaderTimeout, opts.H2C = 4<<10, 200*time.Millisecond, true
		_, addr, _ := startProxy(t, opts, tab)

		resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "l.test", "X-Big": strings.Repeat("x", 16<<10)})
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("16 KiB header: status %d, want 431", resp.StatusCode)
		}

		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: l.test\r\n") // and never the blank line
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		_, err = io.ReadAll(c)
		if err != nil {
			t.Fatalf("slow client: %v (want the proxy to close the connection)", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("slow client held the connection for %v", took)
		}

		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &p}
		defer tr.CloseIdleConnections()
		resp, e := get(t, &http.Client{Transport: tr}, "http://"+addr+"/", map[string]string{"Host": "l.test"})
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 || e.Backend != "a" {
			t.Errorf("h2c: status %d over %s", resp.StatusCode, resp.Proto)
		}
	})
}
