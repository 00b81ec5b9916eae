package dataplane

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// nagleFirstRequest opens a TLS connection to addr with Nagle's algorithm on (as ab and
// OpenSSL's s_client do), writes a request right after the handshake, and returns how long
// the response took to start after that write, and whether the session was resumed.
func nagleFirstRequest(t *testing.T, addr string, cfg *tls.Config) (time.Duration, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetNoDelay(false); err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	start := time.Now()
	if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: " + cfg.ServerName + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("response: %v", err)
	}
	took := time.Since(start)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	return took, tc.ConnectionState().DidResume
}

// TestTLSNagleClientNotDelayed: a client that leaves Nagle's algorithm on holds its first
// request until the server has acknowledged the client's last handshake message. The server
// must acknowledge it at once (TCP_QUICKACK after its flight), not after Linux's delayed-ACK
// time (40 ms or more): full and resumed handshakes, TLS 1.3 and 1.2, and a passthrough host
// (the backend's handshake through the proxy's socket). A control, a plain Go
// TLS server without it, shows that this kernel does delay the acknowledgement, so that the
// test can tell the two apart.
//
// Counted, not timed one by one: a request counts as delayed when its response starts 35 ms
// or more after it was written (the delay is never shorter than 40 ms); with the fix at
// most half of a case's requests may be that slow (a loaded machine), without it all are.
func TestTLSNagleClientNotDelayed(t *testing.T) {
	const host, n, slow = "nagle.test", 8, 35 * time.Millisecond
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer be.Close()
	tab := buildTable(t, route{host: host, path: "/", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, host)})
	_, _, proxyAddr := startProxy(t, Options{}, tab)

	// The control: Go's own TLS server, nothing changed.
	cert, err := SelfSignedCertificate(host)
	if err != nil {
		t.Fatal(err)
	}
	control := newTLSBackend(t, *cert, false, nil)

	// TLS passthrough: the handshake is the backend's, the client's socket the proxy's.
	const ptHost = "pt.nagle.test"
	ptCert, err := SelfSignedCertificate(ptHost)
	if err != nil {
		t.Fatal(err)
	}
	ptBackend := newTLSBackend(t, *ptCert, false, nil)
	in := tableInput(route{host: ptHost, path: "/", endpoints: []string{ptBackend.addr()},
		annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}})
	in.SSLPassthrough = true
	ptTab, problems := ingress.Build(in)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	_, _, ptAddr := startProxy(t, Options{SSLPassthrough: true}, ptTab)

	delayed := func(t *testing.T, addr, sni string, version uint16, resume bool) int {
		t.Helper()
		cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: true, MinVersion: version, MaxVersion: version}
		if resume {
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			nagleFirstRequest(t, addr, cfg) // the session to resume
		}
		count := 0
		for range n {
			took, resumed := nagleFirstRequest(t, addr, cfg)
			if resumed != resume {
				t.Fatalf("resumed %v, want %v", resumed, resume)
			}
			if took >= slow {
				count++
			}
		}
		return count
	}
	if got := delayed(t, control.addr(), host, tls.VersionTLS13, false); got < n {
		t.Skipf("this kernel acknowledged the handshake without delay for a plain Go TLS server (%d of %d delayed): nothing to tell apart here", got, n)
	}
	for _, tc := range []struct {
		name      string
		addr, sni string
		version   uint16
		resume    bool
	}{
		{"TLS 1.3 full handshake", proxyAddr, host, tls.VersionTLS13, false},
		{"TLS 1.3 resumed", proxyAddr, host, tls.VersionTLS13, true},
		{"TLS 1.2 resumed (the client's Finished is last)", proxyAddr, host, tls.VersionTLS12, true},
		{"TLS 1.2 full handshake", proxyAddr, host, tls.VersionTLS12, false},
		{"TLS passthrough, TLS 1.3 with the backend", ptAddr, ptHost, tls.VersionTLS13, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := delayed(t, tc.addr, tc.sni, tc.version, tc.resume); got > n/2 {
				t.Errorf("%d of %d first requests answered %v or more after they were written: the handshake's last message was acknowledged late", got, n, slow)
			}
		})
	}
}
