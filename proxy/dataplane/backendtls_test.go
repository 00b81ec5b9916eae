package dataplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testCA is a certificate authority for backend TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a leaf certificate for dnsNames (server and client use), as PEM and as a
// tls.Certificate.
func (ca *testCA) issue(t testing.TB, dnsNames ...string) (crtPEM, keyPEM []byte, c tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	crtPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
	c, err = tls.X509KeyPair(crtPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return crtPEM, keyPEM, c
}

// tlsBackend is an HTTPS backend that records what each handshake and request showed.
type tlsBackend struct {
	srv      *httptest.Server
	requests atomic.Int64
	sni      atomic.Pointer[string]
	proto    atomic.Pointer[string]
	client   atomic.Pointer[string] // CN of the client certificate
}

func newTLSBackend(t *testing.T, cert tls.Certificate, h2 bool, clientCAs *x509.CertPool) *tlsBackend {
	t.Helper()
	b := &tlsBackend{}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		b.proto.Store(&r.Proto)
		if len(r.TLS.PeerCertificates) > 0 {
			cn := r.TLS.PeerCertificates[0].Subject.CommonName
			b.client.Store(&cn)
		}
		_, _ = w.Write([]byte("tls ok"))
	}))
	b.srv.EnableHTTP2 = h2
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni := hi.ServerName
			b.sni.Store(&sni)
			return nil, nil
		}}
	if clientCAs != nil {
		b.srv.TLS.ClientAuth, b.srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs
	}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *tlsBackend) addr() string { return b.srv.Listener.Addr().String() }

func load[T any](p *atomic.Pointer[T]) T {
	var zero T
	if v := p.Load(); v != nil {
		return *v
	}
	return zero
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + types.UID(name), ResourceVersion: "1"}, Data: data}
}

// TestBackendTLS: backend-protocol HTTPS and GRPCS with the proxy-ssl-* annotations, on both
// paths. Hostile cases first: a certificate from another CA, for another name, a Secret of
// another namespace or without what it must hold — each answered 502 without the request
// reaching the backend, never sent over a connection that was not verified as asked.
func TestBackendTLS(t *testing.T) {
	ca, otherCA := newTestCA(t, "backend CA"), newTestCA(t, "someone else's CA")
	_, _, svcCert := ca.issue(t, "r0.ns.svc")
	_, _, apiCert := ca.issue(t, "api.internal")
	_, _, foreignCert := otherCA.issue(t, "r0.ns.svc")
	clientCA := newTestCA(t, "client CA")
	clientCrt, clientKey, _ := clientCA.issue(t, "metalgate-proxy")
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.cert)
	https := map[string]string{"metalgate.io/backend-protocol": "HTTPS"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"metalgate.io/backend-protocol": "HTTPS"}
		for i := 0; i < len(kv); i += 2 {
			m["metalgate.io/"+kv[i]] = kv[i+1]
		}
		return m
	}
	caSecret := secret("ca", map[string][]byte{"ca.crt": ca.pem})

	for _, tc := range []struct {
		name    string
		cert    tls.Certificate
		h2      bool
		clients *x509.CertPool
		ann     map[string]string
		secrets []*corev1.Secret
		want    int
		problem string // substring of the table's one problem, if any
		sni     string // the SNI the backend must see
		proto   string
		client  string // the client certificate's CN the backend must see
	}{
		{name: "another CA's certificate", cert: foreignCert, ann: with("proxy-ssl-secret", "ca"), secrets: []*corev1.Secret{caSecret}, want: 502},
		{name: "a certificate for another name", cert: apiCert, ann: with("proxy-ssl-secret", "ca"), secrets: []*corev1.Secret{caSecret}, want: 502},
		{name: "verify on with the system's roots", cert: svcCert, ann: with("proxy-ssl-verify", "on"), want: 502},
		{name: "a Secret of another namespace", cert: svcCert, ann: with("proxy-ssl-secret", "other/ca"), want: 502, problem: "is in another namespace"},
		{name: "a missing Secret", cert: svcCert, ann: with("proxy-ssl-secret", "nope"), want: 502, problem: "Secret ns/nope not found"},
		{name: "a Secret with no CA and no certificate", cert: svcCert, ann: with("proxy-ssl-secret", "empty"),
			secrets: []*corev1.Secret{secret("empty", map[string][]byte{"x": []byte("y")})}, want: 502, problem: "neither ca.crt nor tls.crt"},
		{name: "a CA that is not PEM", cert: svcCert, ann: with("proxy-ssl-secret", "bad"),
			secrets: []*corev1.Secret{secret("bad", map[string][]byte{"ca.crt": []byte("garbage")})}, want: 502, problem: "holds no PEM certificate"},
		{name: "a backend that wants a client certificate, none given", cert: svcCert, clients: clientPool, ann: https, want: 502},

		{name: "encrypted, not verified (ingress-nginx's default)", cert: foreignCert, ann: https, want: 200, proto: "HTTP/1.1"},
		{name: "verified with the Secret's CA, the Service's name", cert: svcCert, ann: with("proxy-ssl-secret", "ca"), secrets: []*corev1.Secret{caSecret}, want: 200, proto: "HTTP/1.1"},
		{name: "verify off despite the CA", cert: foreignCert, ann: with("proxy-ssl-secret", "ca", "proxy-ssl-verify", "off"), secrets: []*corev1.Secret{caSecret}, want: 200},
		{name: "proxy-ssl-name, no SNI by default", cert: apiCert, ann: with("proxy-ssl-secret", "ca", "proxy-ssl-name", "api.internal"), secrets: []*corev1.Secret{caSecret}, want: 200, sni: ""},
		{name: "proxy-ssl-name sent as SNI", cert: apiCert, ann: with("proxy-ssl-secret", "ns/ca", "proxy-ssl-name", "api.internal", "proxy-ssl-server-name", "on"),
			secrets: []*corev1.Secret{caSecret}, want: 200, sni: "api.internal"},
		{name: "client certificate from the Secret", cert: svcCert, clients: clientPool, ann: with("proxy-ssl-secret", "mtls"),
			secrets: []*corev1.Secret{secret("mtls", map[string][]byte{"ca.crt": ca.pem, "tls.crt": clientCrt, "tls.key": clientKey})}, want: 200, client: "metalgate-proxy"},
		{name: "grpcs: HTTP/2 over TLS", cert: svcCert, h2: true, ann: map[string]string{"metalgate.io/backend-protocol": "GRPCS", "metalgate.io/proxy-ssl-secret": "ca"},
			secrets: []*corev1.Secret{caSecret}, want: 200, proto: "HTTP/2.0"},
		{name: "grpcs: another CA's certificate", cert: foreignCert, h2: true, ann: map[string]string{"metalgate.io/backend-protocol": "GRPCS", "metalgate.io/proxy-ssl-secret": "ca"},
			secrets: []*corev1.Secret{caSecret}, want: 502},
		{name: "grpcs: a missing Secret", cert: svcCert, h2: true, ann: map[string]string{"metalgate.io/backend-protocol": "GRPCS", "metalgate.io/proxy-ssl-secret": "nope"},
			want: 502, problem: "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newTLSBackend(t, tc.cert, tc.h2, tc.clients)
				tab, problems := buildTableProblems(t, route{host: "tls.test", path: "/", annotations: tc.ann, endpoints: []string{be.addr()}, secrets: tc.secrets})
				switch {
				case tc.problem == "" && len(problems) > 0:
					t.Fatalf("problems: %v", problems)
				case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0].Message, tc.problem)):
					t.Fatalf("problems %v, want one containing %q", problems, tc.problem)
				}
				_, addr, _ := startProxy(t, opts, tab)
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer client.CloseIdleConnections()
				for i := 0; i < 3; i++ { // the second and third on a pooled (or resumed) connection
					req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/x", nil)
					req.Host = "tls.test"
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != tc.want {
						t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, tc.want)
					}
				}
				if tc.want != 200 {
					if n := be.requests.Load(); n != 0 {
						t.Fatalf("the backend got %d requests over a connection that was not what was asked for", n)
					}
					return
				}
				if got := load(&be.sni); got != tc.sni {
					t.Errorf("SNI %q, want %q", got, tc.sni)
				}
				if got := load(&be.proto); tc.proto != "" && got != tc.proto {
					t.Errorf("protocol %q, want %q", got, tc.proto)
				}
				if got := load(&be.client); got != tc.client {
					t.Errorf("client certificate %q, want %q", got, tc.client)
				}
			})
		})
	}
}

// TestBackendTLSSecretRotation: a new CA in the Secret takes effect with the next table,
// whether the Secret has a new resourceVersion or only new content (a static
// configuration's Secret may carry no version): the settings get a new identity, so the
// connection verified under the old CA is closed at the swap and never carries a request
// again.
func TestBackendTLSSecretRotation(t *testing.T) {
	for _, tc := range []struct {
		name            string
		resourceVersion string
	}{
		{name: "same resourceVersion, new content", resourceVersion: "1"},
		{name: "new resourceVersion", resourceVersion: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				ca, next := newTestCA(t, "old CA"), newTestCA(t, "new CA")
				_, _, cert := ca.issue(t, "r0.ns.svc")
				closed := make(chan struct{}, 16)
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
				srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
				srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
					if st == http.StateClosed {
						closed <- struct{}{}
					}
				}
				srv.StartTLS()
				t.Cleanup(srv.Close)
				ep := []string{srv.Listener.Addr().String()}
				ann := map[string]string{"metalgate.io/backend-protocol": "HTTPS", "metalgate.io/proxy-ssl-secret": "ca"}
				old := secret("ca", map[string][]byte{"ca.crt": ca.pem})
				s, addr, _ := startProxy(t, opts, buildTable(t, route{host: "tls.test", path: "/", annotations: ann, endpoints: ep, secrets: []*corev1.Secret{old}}))
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer client.CloseIdleConnections()
				status := func() int {
					req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
					req.Host = "tls.test"
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}
				if got := status(); got != 200 {
					t.Fatalf("with the backend's CA: %d", got)
				}
				rotated := secret("ca", map[string][]byte{"ca.crt": next.pem})
				rotated.ResourceVersion = tc.resourceVersion
				s.Swap(buildTable(t, route{host: "tls.test", path: "/", annotations: ann, endpoints: ep, secrets: []*corev1.Secret{rotated}}))
				// The idle connection was made under settings no backend has any more.
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
					t.Fatal("the connection verified under the old CA is still open after the swap")
				}
				// Nor may a connection or session of the old settings carry this request.
				if got := status(); got != 502 {
					t.Fatalf("after the CA changed to one that did not sign the backend: %d, want 502", got)
				}
			})
		})
	}
}

// TestHostileTLSBackend is TestHostileBackend's corpus from a backend that speaks TLS: bytes
// the TLS layer has already decrypted past a response must close the connection as bytes
// buffered past a plain one do.
func TestHostileTLSBackend(t *testing.T) {
	cases := append(hostileCases(),
		hostileCase{name: "HEAD answered with a body in a second record", method: http.MethodHead,
			resp: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(poison)) + recordSplit + poison, wantStatus: 200},
		hostileCase{name: "Content-Length shorter, the rest in a second record", method: http.MethodGet,
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + recordSplit + poison, wantStatus: 200, wantBody: "ok"},
		hostileCase{name: "204, then a record", method: http.MethodGet, resp: "HTTP/1.1 204 No Content\r\n\r\n" + recordSplit + poison, wantStatus: 204},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				crt, key := pemCert(t, "r0.ns.svc")
				cert, err := tls.X509KeyPair(crt, key)
				if err != nil {
					t.Fatal(err)
				}
				conf := &tls.Config{Certificates: []tls.Certificate{cert}}
				be := newRawBackendOn(t, func(string) (string, connEnd) { return tc.resp, tc.end }, func(ln net.Listener) net.Listener {
					if strings.Contains(tc.resp, recordSplit) {
						return &coalescingTLSListener{Listener: ln, conf: conf}
					}
					return tls.NewListener(ln, conf)
				})
				tab := buildTable(t, route{host: "h.test", path: "/", endpoints: []string{be.addr()},
					annotations: map[string]string{"metalgate.io/backend-protocol": "HTTPS"}})
				opts.UpstreamReadTimeout = 2 * time.Second
				_, httpAddr, httpsAddr := startProxy(t, opts, tab)
				checkHostile(t, tc, httpAddr, httpsAddr)
			})
		})
	}
}

// coalescingTLSListener serves TLS over connections that hold what is written until the
// backend reads or closes: the records of one answer (recordSplit makes two) leave in one
// TCP write and arrive together, so that the second is already in the proxy's TLS layer —
// not on the socket — when the first has been read. Without it the second record's arrival
// would race the proxy's checks.
type coalescingTLSListener struct {
	net.Listener
	conf *tls.Config
}

func (l *coalescingTLSListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&coalescingConn{Conn: c}, l.conf), nil
}

type coalescingConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *coalescingConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *coalescingConn) Close() error {
	_ = c.flush()
	return c.Conn.Close()
}
