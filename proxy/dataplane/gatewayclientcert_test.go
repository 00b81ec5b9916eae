package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// gatewayMTLS is a proxy serving a Gateway on three HTTPS ports: valid (AllowValidOnly, CA
// "valid" by default), open (perPort without validation) and fallback (perPort
// AllowInsecureFallback, CA "fallback"), each with one listener for any host.
type gatewayMTLS struct {
	s                       *Server
	valid, open, fallback   string // addresses
	validCA, fallbackCA     *testCA
	serverCA                *testCA
	input                   func(validCA []byte) gatewayapi.Input
	validPort, fallbackPort int32
}

func startGatewayMTLS(t *testing.T, opts Options) *gatewayMTLS {
	t.Helper()
	g := &gatewayMTLS{validCA: newTestCA(t, "valid-ca"), fallbackCA: newTestCA(t, "fallback-ca"), serverCA: newTestCA(t, "server-ca")}
	api := echoBackend(t, "api")
	s, _, openAddr := startProxy(t, opts, buildTable(t))
	lns := make([]net.Listener, 2)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	g.s, g.open, g.valid, g.fallback = s, openAddr, lns[0].Addr().String(), lns[1].Addr().String()
	port := func(addr string) int32 {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return int32(n)
	}
	g.validPort, g.fallbackPort = port(g.valid), port(g.fallback)
	crt, key, _ := g.serverCA.issue(t, "x.example")
	g.input = func(validCA []byte) gatewayapi.Input {
		in := gatewayTLSInput(t, g.serverCA, g.validPort, hostport(api))
		gw := in.Gateway
		gw.Spec.Listeners = nil
		for i, addr := range []string{g.valid, g.open, g.fallback} {
			gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName("l" + strconv.Itoa(i)),
				Port: gatewayv1.PortNumber(port(addr)), Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "server"}}}})
		}
		in.HTTPRoutes[0].Spec.Hostnames = nil
		in.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "server"},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}}
		in.ConfigMaps = []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "valid-ca"}, Data: map[string]string{"ca.crt": string(validCA)}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "fallback-ca"}, Data: map[string]string{"ca.crt": string(g.fallbackCA.pem)}},
		}
		ref := func(name string) []gatewayv1.ObjectReference {
			return []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: gatewayv1.ObjectName(name)}}
		}
		gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{
			Default: gatewayv1.TLSConfig{Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: ref("valid-ca")}},
			PerPort: []gatewayv1.TLSPortConfig{
				{Port: gatewayv1.PortNumber(port(g.open))},
				{Port: gatewayv1.PortNumber(g.fallbackPort), TLS: gatewayv1.TLSConfig{Validation: &gatewayv1.FrontendTLSValidation{
					Mode: gatewayv1.AllowInsecureFallback, CACertificateRefs: ref("fallback-ca")}}},
			}}}
		return in
	}
	g.swap(t, g.validCA.pem)

	// The valid and fallback ports, served by one http.Server, as the Gateway proxy's one
	// listener over every port is: one Server's session ticket keys, so a session made on
	// one port can be offered to the other.
	srv := s.HTTPServer(true)
	done := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { done <- srv.ServeTLS(ln, "", "") }()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		for range lns {
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return g
}

// swap serves the Gateway with validCA as the default validation's bundle.
func (g *gatewayMTLS) swap(t *testing.T, validCA []byte) {
	t.Helper()
	res := gatewayapi.Translate(g.input(validCA))
	if len(res.Problems) > 0 || len(res.Status.CertificateProblems) > 0 || len(res.Status.FrontendProblems) > 0 {
		t.Fatalf("translate: %v %v %v", res.Problems, res.Status.CertificateProblems, res.Status.FrontendProblems)
	}
	g.s.Swap(res.Table)
}

// TestGatewayClientCertificateValidation pins a Gateway's spec.tls.frontend through the proxy,
// on both forwarding paths, with real TLS clients. Hostile cases first: on an AllowValidOnly
// port a certificate of another CA (the fallback port's), an expired one, one without client
// authentication, and none fail the handshake (no HTTP answer at all); the fallback port's
// CA does not count there, nor the valid port's on the fallback port; a port without
// validation never asks; a client's own ssl-client-verify never reaches the backend. Then
// what passes, and what the backend is told.
func TestGatewayClientCertificateValidation(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		g := startGatewayMTLS(t, opts)
		good := g.validCA.issueClient(t, "client")
		partner := g.fallbackCA.issueClient(t, "partner")
		expired := g.validCA.issueClient(t, "client", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
		})
		expiredPartner := g.fallbackCA.issueClient(t, "partner", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
		})
		serverOnly := g.validCA.issueClient(t, "client", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} })
		forged := map[string]string{"ssl-client-verify": "SUCCESS", "Ssl-Client-Subject-Dn": "CN=admin"}
		for _, tc := range []struct {
			name        string
			addr        string
			cert        *tls.Certificate
			wantRefused bool // no HTTP answer: the handshake failed
			wantAsked   bool
			wantVerify  string // the one ssl-client-verify the backend gets; "" none
			wantSubject string
		}{
			{name: "valid-only: another CA's certificate (the fallback port's)", addr: g.valid, cert: &partner, wantRefused: true, wantAsked: true},
			{name: "valid-only: an expired certificate", addr: g.valid, cert: &expired, wantRefused: true, wantAsked: true},
			{name: "valid-only: a certificate without client authentication", addr: g.valid, cert: &serverOnly, wantRefused: true, wantAsked: true},
			{name: "valid-only: no certificate", addr: g.valid, wantRefused: true, wantAsked: true},
			{name: "no validation: never asks, forged headers dropped", addr: g.open, cert: &good},
			{name: "fallback: the valid port's CA does not count", addr: g.fallback, cert: &good, wantAsked: true,
				wantVerify: "FAILED:unable to get local issuer certificate", wantSubject: "CN=client"},
			{name: "fallback: an expired certificate", addr: g.fallback, cert: &expiredPartner, wantAsked: true, wantVerify: "FAILED:certificate has expired", wantSubject: "CN=partner"},
			{name: "fallback: no certificate", addr: g.fallback, wantAsked: true, wantVerify: "NONE"},
			{name: "fallback: its own CA's certificate", addr: g.fallback, cert: &partner, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=partner"},
			{name: "valid-only: a good certificate", addr: g.valid, cert: &good, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=client"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := newMTLSClient(t, tc.addr, "x.example", tc.cert)
				if tc.wantRefused {
					resp, err := c.Get("https://x.example/x")
					if err == nil {
						resp.Body.Close()
						t.Errorf("got %d; want the handshake refused (no HTTP answer)", resp.StatusCode)
					}
					if c.asked.Load() == 0 {
						t.Error("the handshake asked for no certificate")
					}
					return
				}
				resp, e := get(t, c.Client, "https://x.example/x", forged)
				if got := c.asked.Load() > 0; got != tc.wantAsked {
					t.Errorf("asked for a certificate: %t, want %t", got, tc.wantAsked)
				}
				if resp.StatusCode != http.StatusOK || e.Backend != "api" {
					t.Fatalf("%d from %q, want 200 from api", resp.StatusCode, e.Backend)
				}
				if got := e.Header["Ssl-Client-Verify"]; tc.wantVerify == "" && len(got) > 0 || tc.wantVerify != "" && (len(got) != 1 || got[0] != tc.wantVerify) {
					t.Errorf("backend got ssl-client-verify %q, want %q", got, tc.wantVerify)
				}
				if got := e.Header["Ssl-Client-Subject-Dn"]; tc.wantSubject == "" && len(got) > 0 || tc.wantSubject != "" && (len(got) != 1 || got[0] != tc.wantSubject) {
					t.Errorf("backend got ssl-client-subject-dn %q, want %q", got, tc.wantSubject)
				}
			})
		}

		// A session of the fallback port offered on the valid port (same server name, same
		// ticket keys) is not resumed there (sessions.go), and the full handshake is judged
		// by the valid port's validation: it fails, rather than being resumed with another
		// CA's certificate.
		t.Run("a session of the fallback port resumed on the valid port", func(t *testing.T) {
			cache := tls.NewLRUClientSessionCache(4)
			dial := func(addr string) (*tls.Conn, error) {
				conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "x.example", InsecureSkipVerify: true, //nolint:gosec // the proxy's certificate is not what is tested
					ClientSessionCache: cache, NextProtos: []string{"http/1.1"},
					GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &partner, nil }})
				if err != nil {
					return nil, err
				}
				// A request and its answer: the session ticket arrives after the handshake.
				if _, err := conn.Write([]byte("GET /x HTTP/1.1\r\nHost: x.example\r\n\r\n")); err != nil {
					conn.Close()
					return nil, err
				}
				buf := make([]byte, 4096)
				n, err := conn.Read(buf)
				if err != nil {
					conn.Close()
					return nil, err
				}
				if n < 12 || string(buf[:12]) != "HTTP/1.1 200" {
					conn.Close()
					return nil, fmt.Errorf("%w: %q", errHTTPAnswer, buf[:n])
				}
				return conn, nil
			}
			first, err := dial(g.fallback)
			if err != nil {
				t.Fatalf("fallback port: %v", err)
			}
			first.Close()
			again, err := dial(g.fallback)
			if err != nil {
				t.Fatalf("fallback port again: %v", err)
			}
			if !again.ConnectionState().DidResume {
				t.Fatal("the session was not resumed on its own port: the test proves nothing")
			}
			again.Close()
			switch conn, err := dial(g.valid); {
			case err == nil:
				resumed := conn.ConnectionState().DidResume
				conn.Close()
				t.Errorf("valid port answered 200 (resumed: %t); want the handshake refused", resumed)
			case errors.Is(err, errHTTPAnswer):
				t.Errorf("valid port: %v; want the handshake refused, not an HTTP answer", err)
			}
		})
	})
}

// TestGatewaySessionTicketsBoundToPort: on a Gateway, a session resumes only on the listener
// port it was made on. A session of the port without client-certificate validation offered
// on the fallback port (which asks for a certificate) gets a full handshake there; each port
// resumes its own sessions.
func TestGatewaySessionTicketsBoundToPort(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		g := startGatewayMTLS(t, opts)
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(tls.VersionName(version), func(t *testing.T) {
				refused := testutil.ToFloat64(opts.Metrics.SessionTickets.WithLabelValues(ticketOtherServerName))
				cache := &anySessionCache{}
				for _, step := range []struct {
					what, addr  string
					wantResumed bool
				}{
					{"first connection, open port", g.open, false},
					{"open port again", g.open, true},
					{"the open port's session on the fallback port", g.fallback, false},
					{"fallback port again", g.fallback, true},
					{"the fallback port's session on the open port", g.open, false},
				} {
					if resumed, backend := sessionGet(t, step.addr, "x.example", version, cache); resumed != step.wantResumed || backend != "api" {
						t.Fatalf("%s: resumed %t from %q; want resumed %t from api", step.what, resumed, backend, step.wantResumed)
					}
				}
				if got := testutil.ToFloat64(opts.Metrics.SessionTickets.WithLabelValues(ticketOtherServerName)) - refused; got != 2 {
					t.Errorf("tickets refused for another port: %v, want 2", got)
				}
			})
		}
	})
}

// errHTTPAnswer: a connection's request got an HTTP answer other than 200.
var errHTTPAnswer = errors.New("HTTP answer")

// TestGatewayClientCertificateRotation: a connection verified before the port's CA changed
// is judged by the new CA on its next request (421: retry on a new connection, whose
// handshake then fails), on both forwarding paths.
func TestGatewayClientCertificateRotation(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		g := startGatewayMTLS(t, opts)
		good := g.validCA.issueClient(t, "client")
		c := newMTLSClient(t, g.valid, "x.example", &good)
		resp, e := get(t, c.Client, "https://x.example/x", nil)
		if resp.StatusCode != http.StatusOK || e.Backend != "api" {
			t.Fatalf("before the rotation: %d from %q, want 200 from api", resp.StatusCode, e.Backend)
		}
		g.swap(t, newTestCA(t, "rotated-ca").pem)
		resp, _ = get(t, c.Client, "https://x.example/x", nil)
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("after the rotation, same connection: %d, want 421", resp.StatusCode)
		}
		if c.asked.Load() != 1 {
			t.Errorf("%d handshakes, want 1 (the request after the rotation reused the connection)", c.asked.Load())
		}
		c.CloseIdleConnections()
		if resp, err := c.Get("https://x.example/x"); err == nil {
			resp.Body.Close()
			t.Errorf("after the rotation, new connection: %d; want the handshake refused", resp.StatusCode)
		}
	})
}
