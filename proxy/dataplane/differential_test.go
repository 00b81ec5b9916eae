package dataplane

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzDirectVsReference sends generated backend responses, well-formed and broken, through
// the proxy as it runs (the direct path and the h1 transport) and through the reference
// (ReverseProxy with http.Transport), and compares what the client sees: status, headers,
// body and whether the body came whole. They must agree, or both be a safe error (a 5xx, or
// a response cut short). Whatever the response, the next request through the proxy as it
// runs gets its own answer (invariant 8), and the proxy reuses a backend connection only
// where the reference would too.
//
// The seed corpus (below, and testdata/fuzz/FuzzDirectVsReference) runs in every go test;
// make fuzz runs the generator for longer.
func FuzzDirectVsReference(f *testing.F) {
	for _, seed := range differentialSeeds {
		f.Add(seed.method, seed.resp, seed.close)
	}
	var cases atomic.Pointer[diffCase]
	prod := newDiffBackend(f, &cases)
	ref := newDiffBackend(f, &cases)
	tabProd := buildTable(f, route{host: "f.test", path: "/", endpoints: []string{prod.addr()}})
	tabRef := buildTable(f, route{host: "f.test", path: "/", endpoints: []string{ref.addr()}})
	opts := Options{UpstreamReadTimeout: 300 * time.Millisecond, ResponseHeaderTimeout: 2 * time.Second}
	_, prodAddr, prodTLS := startProxy(f, opts, tabProd)
	opts.DisableDirectPath, opts.stdlibTransport = true, true
	_, refAddr, refTLS := startProxy(f, opts, tabRef)
	prod.h2, ref.h2 = prodTLS, refTLS

	f.Fuzz(func(t *testing.T, method byte, program []byte, closeAfter bool) {
		m := http.MethodGet
		if method%4 == 1 {
			m = http.MethodHead
		}
		resp := generateResponse(program)
		cases.Store(&diffCase{resp: resp, close: closeAfter})
		// The same response to an HTTP/1.1 client and to an HTTP/2 one (TLS, ALPN h2): both
		// take the direct path in the proxy as it runs.
		for _, h2 := range []bool{false, true} {
			got := fetchOnce(t, prod.clientAddr(prodAddr, h2), m, h2)
			want := fetchOnce(t, ref.clientAddr(refAddr, h2), m, h2)
			if !got.sameAs(want) {
				t.Errorf("%s (client HTTP/2 %v), backend sent %q (close %v):\nproxy:     %s\nreference: %s", m, h2, clip(resp), closeAfter, got, want)
			}
			reused := prod.victimOnAttackConn(t, prod.clientAddr(prodAddr, h2), true, h2)
			refReused := ref.victimOnAttackConn(t, ref.clientAddr(refAddr, h2), false, h2)
			if reused && !refReused {
				t.Errorf("%s (client HTTP/2 %v), backend sent %q: the proxy reused the backend connection, the reference did not", m, h2, clip(resp))
			}
		}
	})
}

// differentialSeeds cover each choice of generateResponse at least once, and keep what the
// fuzzer found: ReverseProxy let net/http sniff a Content-Type on a chunked response or not
// depending on timing ({0, "211"}; now neither path sniffs), and a head-only stream that
// went out with a length on one path and chunked on the other ({7, 3, 0}).
var differentialSeeds = []struct {
	method byte
	resp   []byte
	close  bool
}{
	{0, []byte{0, 0, 0, 0}, false}, {1, []byte{1, 1, 0, 0}, false}, {0, []byte{2, 2, 1, 0}, true},
	{1, []byte{3, 3, 2, 1}, false}, {0, []byte{4, 4, 3, 2}, false}, {1, []byte{5, 0, 4, 3}, true},
	{0, []byte{6, 5, 5, 4}, false}, {1, []byte{0, 6, 6, 5}, false}, {0, []byte{1, 7, 7, 6}, true},
	{1, []byte{2, 8, 8, 7}, false}, {0, []byte{3, 9, 9, 8}, false}, {0, []byte{9, 2, 3, 1, 1, 2}, true},
	{0, []byte{0, 2, 3, 2}, false}, {1, []byte{0, 5, 1, 0}, false},
	{0, []byte("211"), true},
	{0, []byte{7, 3, 0}, true},
}

// generateResponse turns fuzz bytes into an HTTP/1.x response: each byte picks one part
// (status line, 1xx responses before it, framing headers, hop-by-hop and other headers, the
// body and what follows it), so that most inputs are near-valid responses with one thing
// wrong, which is where proxies disagree.
func generateResponse(p []byte) string {
	at := func(i int) int {
		if i < len(p) {
			return int(p[i])
		}
		return 0
	}
	statuses := []string{"200 OK", "204 No Content", "304 Not Modified", "404 Not Found", "500 Oops", "101 Switching Protocols", "199 Odd", "299 Odd", "999 Big", "2OO Bad"}
	versions := []string{"HTTP/1.1", "HTTP/1.0", "HTTP/1.1", "HTTP/2.0", "HTTP/1.1", "HTTP/0.9"}
	bodies := []string{"", "hello", strings.Repeat("b", 5000), poison}
	var b strings.Builder
	for i := 0; i < at(4)%3; i++ {
		fmt.Fprintf(&b, "HTTP/1.1 103 Early Hints\r\nLink: </x%d>\r\n\r\n", i)
	}
	fmt.Fprintf(&b, "%s %s\r\n", versions[at(5)%len(versions)], statuses[at(0)%len(statuses)])
	body := bodies[at(2)%len(bodies)]
	switch at(1) % 8 {
	case 0: // exact length
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	case 1: // chunked, well-formed
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if body != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
		}
		b.WriteString("0\r\nX-Trailer: t\r\n\r\n")
	case 2: // shorter length than the body
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s%s", len(body)/2, body, poison)
	case 3: // no length: until EOF
		b.WriteString("\r\n" + body)
	case 4: // longer length than the body
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body)+10, body)
	case 5: // both framings, and bytes after the last chunk
		fmt.Fprintf(&b, "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n%s", len(body), body, poison)
	case 6: // a broken chunk size
		b.WriteString("Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n")
	case 7: // two different lengths
		fmt.Fprintf(&b, "Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(body), len(body)+1, body)
	}
	out := b.String()
	// Extra headers go in front of the blank line that ends the head.
	if i := strings.Index(out, "\r\n\r\n"); i >= 0 && at(3)%4 != 0 {
		extra := []string{"", "Connection: close\r\n", "Connection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n", "X-Plain: yes\r\nServer: be\r\n"}[at(3)%4]
		// after the status line of the final response
		j := strings.LastIndex(out[:i+2], "HTTP/")
		k := strings.Index(out[j:], "\r\n") + j + 2
		out = out[:k] + extra + out[k:]
	}
	return out
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// diffCase is what the backends answer to /attack now.
type diffCase struct {
	resp  string
	close bool
}

// diffBackend serves the current case to /attack and "victim" to /victim, numbering its
// connections so that the test can tell whether a victim came on the attack's connection.
type diffBackend struct {
	ln         net.Listener
	cases      *atomic.Pointer[diffCase]
	mu         sync.Mutex
	h2         string // the proxy's TLS listener in front of this backend (HTTP/2 clients)
	attackConn int    // connection number of the last /attack
	victimConn int    // and of the last /victim
	nconn      int
}

func newDiffBackend(f *testing.F, cases *atomic.Pointer[diffCase]) *diffBackend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	b := &diffBackend{ln: ln, cases: cases}
	var wg sync.WaitGroup
	var open sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.nconn++
			n := b.nconn
			b.mu.Unlock()
			open.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer open.Delete(c)
				b.serve(c, n)
			}()
		}
	}()
	f.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return b
}

func (b *diffBackend) addr() string { return b.ln.Addr().String() }

// clientAddr is where a client reaches the proxy in front of b: plain (HTTP/1.1) or TLS.
func (b *diffBackend) clientAddr(plain string, h2 bool) string {
	if h2 {
		return b.h2
	}
	return plain
}

func (b *diffBackend) serve(c net.Conn, n int) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b.mu.Lock()
		if req.URL.Path == "/victim" {
			b.victimConn = n
		} else {
			b.attackConn = n
		}
		b.mu.Unlock()
		if req.URL.Path == "/victim" {
			if _, err := io.WriteString(c, victimResponse); err != nil {
				return
			}
			continue
		}
		cs := b.cases.Load()
		if _, err := io.WriteString(c, cs.resp); err != nil || cs.close {
			return
		}
	}
}

// victimOnAttackConn sends GET /victim through the proxy at addr and reports whether the
// backend saw it on the attack's connection. With strict it fails t unless the victim got
// its own answer; only the proxy as it runs is held to that (TestHostileBackend shows that
// http.Transport, the reference, does not always keep it).
func (b *diffBackend) victimOnAttackConn(t *testing.T, addr string, strict, h2 bool) bool {
	t.Helper()
	got := fetchPath(t, addr, http.MethodGet, "/victim", h2)
	if strict && (got.status != 200 || got.body != "victim") {
		t.Errorf("the next client got another's response: %s", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.victimConn == b.attackConn
}

// outcome is what a client saw.
type outcome struct {
	status int
	header string // sorted "K: v" lines, without Date, X-Request-Id and the framing to the client
	body   string
	whole  bool // the body was read to its end without error
	err    string
}

func (o outcome) String() string {
	return fmt.Sprintf("status %d whole %v err %q body %q headers %q", o.status, o.whole, o.err, clip(o.body), o.header)
}

// safeError: the client got no response, a 5xx, or a body cut short.
func (o outcome) safeError() bool {
	return o.err != "" || o.status >= 500 || !o.whole
}

func (o outcome) sameAs(p outcome) bool {
	if o.safeError() && p.safeError() {
		return true
	}
	return o.status == p.status && o.header == p.header && o.body == p.body && o.whole == p.whole
}

func fetchOnce(t *testing.T, addr, method string, h2 bool) outcome {
	return fetchPath(t, addr, method, "/attack", h2)
}

// fetchPath requests path from the proxy at addr with a new connection: HTTP/1.1 in the clear
// (with Connection: close, which DisableKeepAlives sends, and which the direct path carries),
// or HTTP/2 over TLS (which must be negotiated).
func fetchPath(t *testing.T, addr, method, path string, h2 bool) outcome {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	url := "http://" + addr + path
	if h2 {
		tr = &http.Transport{TLSClientConfig: &tls.Config{ServerName: "f.test", InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		url = "https://" + addr + path
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(method, url, nil)
	req.Host = "f.test"
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	if h2 && resp.ProtoMajor != 2 {
		t.Fatalf("%s %s: the client spoke %s, want HTTP/2", method, path, resp.Proto)
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(resp.Body)
	var lines []string
	for k, vv := range resp.Header {
		switch k {
		case "Date", "X-Request-Id", "Content-Length":
			// Date and the request ID differ by nature. The length to the client is this
			// hop's framing: ReverseProxy flushes a stream's head on a timer, so whether a
			// short stream goes out chunked or with a length depends on timing.
			continue
		}
		lines = append(lines, k+": "+strings.Join(vv, ", "))
	}
	sort.Strings(lines)
	o := outcome{status: resp.StatusCode, header: strings.Join(lines, "\n"), body: string(body), whole: rerr == nil}
	return o
}
