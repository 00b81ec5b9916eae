package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// poison is a whole HTTP response. A backend that sends it after its real answer, where a
// proxy that trusts its framing would pool the connection, makes the next, unrelated
// client read it as its own response.
const poison = "HTTP/1.1 200 OK\r\nX-Poison: yes\r\nContent-Length: 8\r\n\r\nPOISONED"

// rawBackend is a TCP backend whose answers are raw bytes: for a request to /victim the
// well-formed "victim" response, for any other path what attack returns (written in one
// write, so that the bytes arrive together), after which the connection stays open unless
// attack says to close it or to reset it.
type rawBackend struct {
	ln     net.Listener
	attack func(method string) (resp string, end connEnd)
	conns  atomic.Int64  // connections accepted
	closed chan struct{} // one value per connection the proxy closed (EOF or reset seen)
}

type connEnd int

const (
	keepOpen connEnd = iota
	closeAfter
	resetAfter
)

// recordSplit in an attack response makes the backend write what comes before and after it in
// two writes: over TLS, two records, the second possibly still undecrypted in the proxy's TLS
// layer when the first has been read.
const recordSplit = "\x00split\x00"

const victimResponse = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nvictim"

func newRawBackend(t testing.TB, attack func(method string) (string, connEnd)) *rawBackend {
	t.Helper()
	return newRawBackendOn(t, attack, nil)
}

// newRawBackendOn is newRawBackend on the listener wrap makes of a loopback one (a TLS
// listener, say); nil: the loopback listener itself.
func newRawBackendOn(t testing.TB, attack func(method string) (string, connEnd), wrap func(net.Listener) net.Listener) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	b := &rawBackend{ln: ln, attack: attack, closed: make(chan struct{}, 1024)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return b
}

func (b *rawBackend) addr() string { return b.ln.Addr().String() }

func (b *rawBackend) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			b.closed <- struct{}{}
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/victim" {
			if _, err := io.WriteString(c, victimResponse); err != nil {
				return
			}
			continue
		}
		resp, end := b.attack(req.Method)
		// recordSplit marks where one write ends and the next begins (over TLS: two records).
		for _, part := range strings.Split(resp, recordSplit) {
			if _, err := io.WriteString(c, part); err != nil {
				return
			}
		}
		switch end {
		case closeAfter:
			return
		case resetAfter:
			nc := c
			if tc, ok := c.(*tls.Conn); ok {
				nc = tc.NetConn()
			}
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			return
		}
	}
}

// hostileCase is one broken backend answer to GET or HEAD /attack.
type hostileCase struct {
	name   string
	method string
	resp   string
	end    connEnd
	// wantStatus is what the attacking client gets (0: anything, the response may be cut);
	// wantBody its body when the status matches and it is not empty.
	wantStatus int
	wantBody   string
}

func hostileCases() []hostileCase {
	return []hostileCase{
		{name: "HEAD answered with a body", method: http.MethodHead,
			resp: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(poison), poison), wantStatus: 200},
		{name: "Content-Length shorter than the body", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + poison, wantStatus: 200, wantBody: "ok"},
		{name: "204 with a body", method: http.MethodGet, resp: "HTTP/1.1 204 No Content\r\n\r\n" + poison, wantStatus: 204},
		{name: "304 with a body", method: http.MethodGet, resp: "HTTP/1.1 304 Not Modified\r\n\r\n" + poison, wantStatus: 304},
		{name: "101 nobody asked for", method: http.MethodGet,
			resp: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + poison, wantStatus: 502},
		{name: "bytes after the last chunk", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + poison, wantStatus: 200, wantBody: "ok"},
		{name: "chunked and Content-Length", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + poison, wantStatus: 200, wantBody: "ok"},
		{name: "body delimited by EOF", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\n\r\nuntil the end", end: closeAfter, wantStatus: 200, wantBody: "until the end"},
		{name: "Content-Length longer than the body", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", end: closeAfter},
		{name: "reset mid-body", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", end: resetAfter},
		{name: "HTTP/1.0 without keep-alive", method: http.MethodGet,
			resp: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok" + poison, wantStatus: 200, wantBody: "ok"},
		{name: "1xx flood", method: http.MethodGet,
			resp:       strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", 1000) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			wantStatus: 502},
		{name: "header over the limit", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 2<<20) + "\r\nContent-Length: 2\r\n\r\nok", wantStatus: 502},
		{name: "1xx heads over the limit together", method: http.MethodGet,
			resp:       strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: "+strings.Repeat("l", 300<<10)+"\r\n\r\n", 4) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			wantStatus: 502},
		{name: "garbage status line", method: http.MethodGet, resp: "HTTP/1.1 2OO OK\r\n\r\n" + poison, wantStatus: 502},
	}
}

// clientKind is how the test reaches the proxy.
type clientKind struct {
	name  string
	new   func(httpAddr, httpsAddr string) (*http.Client, string) // client and base URL
	close func(*http.Client)
}

func clientKinds() []clientKind {
	closeIdle := func(c *http.Client) { c.Transport.(*http.Transport).CloseIdleConnections() }
	return []clientKind{
		{name: "http1", close: closeIdle, new: func(h, _ string) (*http.Client, string) {
			return &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}, "http://" + h
		}},
		{name: "http2", close: closeIdle, new: func(_, s string) (*http.Client, string) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
			return &http.Client{Transport: tr, Timeout: 10 * time.Second}, "https://" + s
		}},
	}
}

// TestHostileBackend: whatever a backend answers, the next request on any connection gets
// its own backend's answer (invariant 8). Every case of the corpus, on both forwarding
// paths, from HTTP/1.1 and HTTP/2 clients: one client's GET or HEAD /attack, then other
// clients' GET /victim through the same pool must read "victim", never the poison.
func TestHostileBackend(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newRawBackend(t, func(string) (string, connEnd) { return tc.resp, tc.end })
				tab := buildTable(t, route{host: "h.test", path: "/", endpoints: []string{be.addr()}})
				opts.UpstreamReadTimeout = 2 * time.Second
				_, httpAddr, httpsAddr := startProxy(t, opts, tab)
				checkHostile(t, tc, httpAddr, httpsAddr)
			})
		})
	}
}

// checkHostile sends tc's attack through the proxy, then other clients' requests for
// /victim, from each kind of client: each must read its own answer, never the poison.
func checkHostile(t *testing.T, tc hostileCase, httpAddr, httpsAddr string) {
	for _, ck := range clientKinds() {
		t.Run(ck.name, func(t *testing.T) {
			attacker, base := ck.new(httpAddr, httpsAddr)
			defer ck.close(attacker)
			req, _ := http.NewRequest(tc.method, base+"/attack", nil)
			req.Host = "h.test"
			resp, err := attacker.Do(req)
			if err == nil {
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if tc.wantStatus != 0 && resp.StatusCode != tc.wantStatus {
					t.Errorf("attacker: status %d, want %d", resp.StatusCode, tc.wantStatus)
				}
				if tc.wantBody != "" && resp.StatusCode == tc.wantStatus && (rerr != nil || string(body) != tc.wantBody) {
					t.Errorf("attacker: body %q (%v), want %q", body, rerr, tc.wantBody)
				}
				if resp.Header.Get("X-Poison") != "" {
					t.Errorf("attacker got the poison as its response")
				}
			} else if tc.wantStatus != 0 {
				t.Errorf("attacker: %v, want status %d", err, tc.wantStatus)
			}
			for i := 0; i < 3; i++ {
				victim, base := ck.new(httpAddr, httpsAddr)
				req, _ := http.NewRequest(http.MethodGet, base+"/victim", nil)
				req.Host = "h.test"
				resp, err := victim.Do(req)
				if err != nil {
					t.Fatalf("victim %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ck.close(victim)
				if resp.StatusCode != 200 || string(body) != "victim" || resp.Header.Get("X-Poison") != "" {
					t.Fatalf("victim %d got another client's response: status %d, X-Poison %q, body %q",
						i, resp.StatusCode, resp.Header.Get("X-Poison"), body)
				}
			}
		})
	}
}

// TestEarlyHints: a 103 from the backend reaches the client before the final response, on
// both paths (ReverseProxy forwards 1xx responses; the direct path does the same).
func TestEarlyHints(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := newRawBackend(t, func(string) (string, connEnd) {
			return "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: no\r\n\r\n" +
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", keepOpen
		})
		tab := buildTable(t, route{host: "e.test", path: "/", endpoints: []string{be.addr()}})
		_, addr, _ := startProxy(t, opts, tab)
		var mu sync.Mutex
		var hints []textproto.MIMEHeader
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			if code == http.StatusEarlyHints {
				hints = append(hints, h)
			}
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "http://"+addr+"/x", nil)
		req.Host = "e.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("final response %d %q", resp.StatusCode, body)
		}
		if len(hints) != 1 || hints[0].Get("Link") != "</style.css>; rel=preload" || hints[0].Get("X-Hop") != "" {
			t.Errorf("103 responses seen by the client: %v, want one with the Link header and no hop-by-hop header", hints)
		}
		if resp.Header.Get("Link") != "" {
			t.Errorf("the 103's Link header leaked into the final response")
		}
	})
}

// TestHostileBackendHeapBounded: a backend that sends a 64 MiB header line, or many large
// 1xx heads, gets 502 and the proxy's heap does not grow with what it sent.
func TestHostileBackendHeapBounded(t *testing.T) {
	const sent = 64 << 20
	for _, tc := range []struct {
		name  string
		write func(w io.Writer) error
	}{
		{"one huge header line", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: "); err != nil {
				return err
			}
			return writeRepeated(w, 'b', sent)
		}},
		{"huge 1xx heads", func(w io.Writer) error {
			for n := 0; n < sent; n += 512 << 10 {
				if _, err := io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: "); err != nil {
					return err
				}
				if err := writeRepeated(w, 'l', 512<<10); err != nil {
					return err
				}
				if _, err := io.WriteString(w, "\r\n\r\n"); err != nil {
					return err
				}
			}
			_, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					c, err := ln.Accept()
					if err != nil {
						return
					}
					defer c.Close()
					if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
						return
					}
					_ = tc.write(c)
				}()
				t.Cleanup(func() { ln.Close(); <-done })
				tab := buildTable(t, route{host: "m.test", path: "/", endpoints: []string{ln.Addr().String()}})
				_, addr, _ := startProxy(t, opts, tab)

				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				peak := watchHeap(t)
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
				req.Host = "m.test"
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				grown := int64(peak()) - int64(before.HeapAlloc)
				if err != nil || resp.StatusCode != http.StatusBadGateway {
					t.Errorf("response %v, %v: want 502", resp, err)
				}
				if grown > 24<<20 {
					t.Errorf("heap grew by %d MiB while the backend sent %d MiB of headers", grown>>20, sent>>20)
				}
			})
		})
	}
}

func writeRepeated(w io.Writer, c byte, n int) error {
	buf := bytes.Repeat([]byte{c}, 64<<10)
	for ; n > 0; n -= len(buf) {
		if _, err := w.Write(buf[:min(n, len(buf))]); err != nil {
			return err
		}
	}
	return nil
}

// watchHeap samples the heap until the returned function is called, which returns the peak.
func watchHeap(t *testing.T) func() uint64 {
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	var peak uint64
	get := func() uint64 {
		once.Do(func() { close(stop); peak = <-done })
		return peak
	}
	t.Cleanup(func() { get() })
	return get
}
