package dataplane

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// proxiedGET connects to addr, sends header (a PROXY header, or nothing), optionally starts
// TLS, and sends GET / for host. It returns the echo's reply, or the error that ended it.
func proxiedGET(t *testing.T, addr string, header []byte, useTLS bool, host string) (echoReply, int, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(header); err != nil {
		return echoReply{}, 0, err
	}
	var rw net.Conn = c
	if useTLS {
		tc := tls.Client(c, &tls.Config{ServerName: host, InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return echoReply{}, 0, err
		}
		rw = tc
	}
	if _, err := io.WriteString(rw, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		return echoReply{}, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(rw), nil)
	if err != nil {
		return echoReply{}, 0, err
	}
	defer resp.Body.Close()
	var e echoReply
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			return e, resp.StatusCode, err
		}
	}
	return e, resp.StatusCode, nil
}

func proxyHeader(t *testing.T, version byte, client string) []byte {
	t.Helper()
	src, _ := net.ResolveTCPAddr("tcp", client)
	dst, _ := net.ResolveTCPAddr("tcp", "192.0.2.80:443")
	h := proxyproto.HeaderProxyFromAddrs(version, src, dst)
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProxyProtocol: on both listeners, a trusted source's PROXY header (v1 and v2) gives the
// client address the backend sees and the source ranges judge; a PROXY header from anyone
// else is refused (it would forge the client address); required means a trusted source
// must send one; optional lets it send none.
func TestProxyProtocol(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t,
		route{host: "pp.test", path: "/", endpoints: []string{hostport(be)}},
		route{host: "only.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{"metalgate.io/allowlist-source-range": "203.0.113.0/24"}},
	)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	elsewhere := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	forEachPath(t, func(t *testing.T, opts Options) {
		for _, tc := range []struct {
			name    string
			mode    ProxyProtocol
			from    []netip.Prefix
			header  []byte
			host    string
			wantXFF string // "" when the request must fail
			status  int
		}{
			{"v1 from a trusted source", ProxyProtocolRequired, loopback, proxyHeader(t, 1, "203.0.113.7:5555"), "pp.test", "203.0.113.7", 200},
			{"v2 from a trusted source", ProxyProtocolRequired, loopback, proxyHeader(t, 2, "[2001:db8::7]:5555"), "pp.test", "2001:db8::7", 200},
			{"source range judges the PROXY address", ProxyProtocolOptional, loopback, proxyHeader(t, 1, "203.0.113.7:5555"), "only.test", "203.0.113.7", 200},
			{"source range refuses the PROXY address", ProxyProtocolOptional, loopback, proxyHeader(t, 1, "192.0.2.7:5555"), "only.test", "", 403},
			{"optional: no header", ProxyProtocolOptional, loopback, nil, "pp.test", "127.0.0.1", 200},
			{"required: no header", ProxyProtocolRequired, loopback, nil, "pp.test", "", 0},
			{"untrusted source sends a header", ProxyProtocolOptional, elsewhere, proxyHeader(t, 1, "203.0.113.7:5555"), "pp.test", "", 0},
			{"untrusted source, required", ProxyProtocolRequired, elsewhere, nil, "pp.test", "", 0},
		} {
			for _, useTLS := range []bool{false, true} {
				o := opts
				o.ProxyProtocolHTTP, o.ProxyProtocolHTTPS, o.ProxyProtocolFrom = tc.mode, tc.mode, tc.from
				_, addr, tlsAddr := startProxy(t, o, tab)
				if useTLS {
					addr = tlsAddr
				}
				e, status, err := proxiedGET(t, addr, tc.header, useTLS, tc.host)
				switch {
				case tc.status == 0 && err == nil && status < 400:
					t.Errorf("%s (TLS %v): served %d, want the connection refused", tc.name, useTLS, status)
				case tc.status != 0 && (err != nil || status != tc.status):
					t.Errorf("%s (TLS %v): %d, %v; want %d", tc.name, useTLS, status, err, tc.status)
				case tc.status == 200 && (len(e.Header["X-Forwarded-For"]) != 1 || e.Header["X-Forwarded-For"][0] != tc.wantXFF || e.Header["X-Real-Ip"][0] != tc.wantXFF):
					t.Errorf("%s (TLS %v): backend saw X-Forwarded-For %q X-Real-Ip %q, want %s", tc.name, useTLS, e.Header["X-Forwarded-For"], e.Header["X-Real-Ip"], tc.wantXFF)
				}
			}
		}
	})
}

// TestProxyProtocolNeedsSources: the PROXY protocol without trusted sources is a
// configuration error, not an open door.
func TestProxyProtocolNeedsSources(t *testing.T) {
	if _, err := New(Options{ProxyProtocolHTTP: ProxyProtocolOptional}); err == nil {
		t.Error("New accepted the PROXY protocol from anyone")
	}
	if _, err := New(Options{ProxyProtocolHTTPS: "sometimes", ProxyProtocolFrom: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}); err == nil {
		t.Error("New accepted a mode that does not exist")
	}
}
