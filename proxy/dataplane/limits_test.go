package dataplane

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/metalgate/metalgate/internal/testenv"
)

// hijackBackend answers every request with head, then reads its connection until the proxy
// closes it, and reports that on closed.
func hijackBackend(t *testing.T, head string) (*httptest.Server, <-chan struct{}) {
	closed := make(chan struct{}, 8)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString(head)
		_ = brw.Flush()
		_, _ = io.Copy(io.Discard, c) // until the proxy closes its end
		closed <- struct{}{}
	}))
	t.Cleanup(be.Close)
	return be, closed
}

// TestClientAbortReleasesBackend: a client that goes away while its response streams
// makes the proxy close the backend connection at once, on both paths (the body copy must
// not hold it until the backend sends again).
func TestClientAbortReleasesBackend(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		// More than the server's write buffer, so that the client sees it before the rest.
		be, closed := hijackBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"+strings.Repeat("x", 100<<10)+";")
		tab := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(be)}})
		_, addr, _ := startProxy(t, opts, tab)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
			t.Fatalf("first part: %v", err)
		}
		c.Close()
		testenv.Receive(t, 2*time.Second, "backend connection closed after the client left", closed)
	})
}

// TestStalledClientBody: a client that stops sending its body gets 408 after
// ClientBodyTimeout, and the backend connection that carried the half body is closed (the
// backend reads an error, not a shorter body).
func TestStalledClientBody(t *testing.T) {
	got := make(chan string, 4)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			got <- "error after " + string(b)
			return
		}
		got <- "complete " + string(b)
	}))
	t.Cleanup(be.Close)
	tab := buildTable(t, route{host: "b.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.ClientBodyTimeout, opts.Metrics = 200*time.Millisecond, NewMetrics(reg)
		_, addr, _ := startProxy(t, opts, tab)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: b.test\r\nContent-Length: 100\r\n\r\npartial")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no response to a stalled body: %v", err)
		}
		if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 3*time.Second {
			t.Errorf("status %d after %v, want 408 after about 200ms", resp.StatusCode, time.Since(start))
		}
		if s := testenv.Receive(t, 3*time.Second, "backend's read of the body", got); strings.HasPrefix(s, "complete") {
			t.Errorf("backend saw %q", s)
		}
		if n := testutil.ToFloat64(opts.Metrics.LimitHits.WithLabelValues(limitClientBody)); n != 1 {
			t.Errorf("client_body_timeout counted %v times", n)
		}
	})
}

// streamingBackend writes a large body in small writes until a write fails, which it
// reports on failed.
func streamingBackend(t *testing.T) (*httptest.Server, <-chan struct{}) {
	failed := make(chan struct{}, 8)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for i := 0; i < 16<<10; i++ { // 512 MiB at most
			if _, err := w.Write(chunk); err != nil {
				failed <- struct{}{}
				return
			}
		}
	}))
	t.Cleanup(be.Close)
	return be, failed
}

// TestSlowReader: a client that stops reading its response is cut after SendTimeout, and
// the backend that streams to it sees its connection closed instead of being held.
func TestSlowReader(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be, failed := streamingBackend(t)
		tab := buildTable(t, route{host: "s.test", path: "/", endpoints: []string{hostport(be)}})
		reg := prometheus.NewRegistry()
		opts.SendTimeout, opts.Metrics = 300*time.Millisecond, NewMetrics(reg)
		_, addr, _ := startProxy(t, opts, tab)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: s.test\r\n\r\n")
		// and never read
		testenv.Receive(t, 10*time.Second, "backend write failing after the client stopped reading", failed)
		sends := opts.Metrics.LimitHits.WithLabelValues(limitSendTimeout)
		testenv.Eventually(t, 2*time.Second, "send_timeout counted", testenv.True(func() bool { return testutil.ToFloat64(sends) >= 1 }))
	})
}

// TestHTTP2WriteTimeout: an HTTP/2 client that opens a window as large as the protocol
// allows and then stops reading is dropped after HTTP2WriteTimeout (per-write SendTimeout
// off, so only the connection's own timeout can end it).
func TestHTTP2WriteTimeout(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be, failed := streamingBackend(t)
		tab := buildTable(t, route{host: "w.test", path: "/", endpoints: []string{hostport(be)}})
		opts.SendTimeout, opts.HTTP2WriteTimeout = -1, 300*time.Millisecond
		_, _, tlsAddr := startProxy(t, opts, tab)
		tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		_ = tc.NetConn().(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(tc, tc)
		const window = 1<<31 - 1
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
		_ = fr.WriteWindowUpdate(0, window-65535)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "w.test"}, {":path", "/"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		// and never read
		testenv.Receive(t, 10*time.Second, "backend write failing after the HTTP/2 client stopped reading", failed)
	})
}

// TestMaxConnections: connections over MaxConnections, or over MaxConnectionsPerClient from
// one address, are closed as soon as they are accepted and counted; a place that frees up
// is taken again.
func TestMaxConnections(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "m.test", path: "/", endpoints: []string{hostport(be)}})
	for _, tc := range []struct {
		name      string
		max, per  int
		wantLimit string
	}{
		{"per listener", 2, 0, limitMaxConnections},
		{"per client", 0, 2, limitMaxConnectionsPerClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				reg := prometheus.NewRegistry()
				opts.MaxConnections, opts.MaxConnectionsPerClient, opts.Metrics = tc.max, tc.per, NewMetrics(reg)
				_, addr, _ := startProxy(t, opts, tab)
				var held []net.Conn
				for i := 0; i < 2; i++ {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					held = append(held, c)
				}
				// The server counts a connection when it accepts it: wait for both.
				open := opts.Metrics.ClientConnections.WithLabelValues("http")
				testenv.Eventually(t, 2*time.Second, "2 connections open", testenv.True(func() bool { return testutil.ToFloat64(open) == 2 }))
				extra, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer extra.Close()
				_ = extra.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
					t.Errorf("third connection: read %v, want it closed by the proxy", err)
				}
				if n := testutil.ToFloat64(opts.Metrics.LimitHits.WithLabelValues(tc.wantLimit)); n != 1 {
					t.Errorf("%s counted %v times", tc.wantLimit, n)
				}
				held[0].Close()
				testenv.Eventually(t, 2*time.Second, "a place freed", testenv.True(func() bool { return testutil.ToFloat64(open) == 1 }))
				resp, _ := get(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+addr+"/", map[string]string{"Host": "m.test"})
				if resp.StatusCode != 200 {
					t.Errorf("after a place freed: status %d", resp.StatusCode)
				}
			})
		})
	}
}
