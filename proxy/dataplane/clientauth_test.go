package dataplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// clientCertOpts changes a test client certificate before it is signed.
type clientCertOpts func(*x509.Certificate)

// issueClient signs a client certificate with subject CN cn (client authentication only).
func (ca *testCA) issueClient(t testing.TB, cn string, mods ...clientCertOpts) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, m := range mods {
		m(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// intermediate makes a CA signed by ca.
func (ca *testCA) intermediate(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// withChain is c followed by the intermediates the client sends.
func withChain(c tls.Certificate, inter ...*testCA) tls.Certificate {
	for _, i := range inter {
		c.Certificate = append(c.Certificate, i.cert.Raw)
	}
	return c
}

// mtlsClient is an HTTPS client whose every connection goes to addr with server name sni and
// presents cert when asked (nil: none); asked counts the handshakes that asked.
type mtlsClient struct {
	*http.Client
	asked atomic.Int64
}

func newMTLSClient(t *testing.T, addr, sni string, cert *tls.Certificate) *mtlsClient {
	t.Helper()
	c := &mtlsClient{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig: &tls.Config{ServerName: sni, InsecureSkipVerify: true, //nolint:gosec // the proxy's certificate is not what is tested
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				c.asked.Add(1)
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			}},
	}
	t.Cleanup(tr.CloseIdleConnections)
	c.Client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c
}

// caSecret is an Opaque Secret of namespace ns with ca.crt.
func caSecret(ns, name, version string, caPEM ...[]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: version},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"ca.crt": joinPEM(caPEM...)}}
}

func joinPEM(p ...[]byte) []byte {
	var out []byte
	for _, b := range p {
		out = append(out, b...)
	}
	return out
}

// mtlsAnn is the annotations of a host with client-certificate authentication from Secret
// client-ca, in mode, with more annotations.
func mtlsAnn(mode string, more ...string) map[string]string {
	a := map[string]string{"nginx.ingress.kubernetes.io/auth-tls-secret": "ns/client-ca", "nginx.ingress.kubernetes.io/auth-tls-verify-client": mode}
	for i := 0; i+1 < len(more); i += 2 {
		a["nginx.ingress.kubernetes.io/"+more[i]] = more[i+1]
	}
	return a
}

// TestClientCertificateAuthentication pins ingress-nginx's auth-tls-* through the proxy, on
// both forwarding paths, with real TLS clients: hostile cases first (a client's own
// ssl-client-verify, a certificate of another CA, an expired one, a chain deeper than the
// depth, none on "on", a certificate without client authentication, an SNI that asked for no
// certificate with the Host of a host that needs one, a CN that does not match), then what
// passes and what the backend is told.
func TestClientCertificateAuthentication(t *testing.T) {
	root := newTestCA(t, "client-ca")
	other := newTestCA(t, "other-ca")
	inter := root.intermediate(t, "client-intermediate")
	good := root.issueClient(t, "client")
	foreign := other.issueClient(t, "client")
	expired := root.issueClient(t, "client", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	})
	deep := withChain(inter.issueClient(t, "client"), inter)
	serverOnly := root.issueClient(t, "client", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} })
	partner := root.issueClient(t, "partner")
	nasty := root.issueClient(t, "evil\r\nX-Injected: 1")
	forged := map[string]string{"ssl-client-verify": "SUCCESS", "Ssl_Client_Subject_Dn": "CN=admin", "SSL-CLIENT-CERT": "forged"}

	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "b")
		ep := []string{hostport(be)}
		tlsFor := func(h string) *corev1.Secret { return tlsSecretOf(t, h) }
		tab := buildTable(t,
			route{host: "open.example", path: "/", endpoints: ep, tlsSecret: tlsFor("open.example"), secrets: []*corev1.Secret{caSecret("ns", "client-ca", "1", root.pem)}},
			route{host: "on.example", path: "/", endpoints: ep, tlsSecret: tlsFor("on.example"), annotations: mtlsAnn("on", "auth-tls-pass-certificate-to-upstream", "true")},
			route{host: "optional.example", path: "/", endpoints: ep, tlsSecret: tlsFor("optional.example"), annotations: mtlsAnn("optional")},
			route{host: "noca.example", path: "/", endpoints: ep, tlsSecret: tlsFor("noca.example"), annotations: mtlsAnn("optional_no_ca")},
			route{host: "deep.example", path: "/", endpoints: ep, tlsSecret: tlsFor("deep.example"), annotations: mtlsAnn("on", "auth-tls-verify-depth", "2")},
			route{host: "cn.example", path: "/", endpoints: ep, tlsSecret: tlsFor("cn.example"), annotations: mtlsAnn("on", "auth-tls-match-cn", "CN=partner$")},
			route{host: "errpage.example", path: "/", endpoints: ep, tlsSecret: tlsFor("errpage.example"), annotations: mtlsAnn("on", "auth-tls-error-page", "https://errors.example/cert.html")},
			// Two hosts served the default certificate: one asks for no client certificate.
			route{host: "plain.example", path: "/", endpoints: ep},
			route{host: "plain-mtls.example", path: "/", endpoints: ep, annotations: mtlsAnn("on")},
		)
		_, httpAddr, httpsAddr := startProxy(t, opts, tab)

		for _, tc := range []struct {
			name, sni, host string
			cert            *tls.Certificate
			hdr             map[string]string
			wantCode        int
			wantAsked       bool
			wantVerify      string // the one ssl-client-verify the backend gets; "" none
			wantSubject     string
			wantCert        bool // ssl-client-cert holds the client's certificate
			wantBody        string
			wantLocation    string
		}{
			{name: "forged headers without a certificate on a host without client auth", sni: "open.example", hdr: forged, wantCode: 200},
			{name: "forged headers without a certificate on optional", sni: "optional.example", hdr: forged, wantCode: 200, wantAsked: true, wantVerify: "NONE"},
			{name: "forged headers with a good certificate", sni: "on.example", cert: &good, hdr: forged, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=client", wantCert: true},
			{name: "no certificate on on", sni: "on.example", wantCode: 400, wantAsked: true, wantBody: "No required SSL certificate was sent"},
			{name: "another CA's certificate", sni: "on.example", cert: &foreign, wantCode: 400, wantAsked: true, wantBody: "The SSL certificate error"},
			{name: "an expired certificate", sni: "on.example", cert: &expired, wantCode: 400, wantAsked: true},
			{name: "a chain deeper than the depth", sni: "on.example", cert: &deep, wantCode: 400, wantAsked: true},
			{name: "a certificate without client authentication", sni: "on.example", cert: &serverOnly, wantCode: 400, wantAsked: true},
			{name: "another CA's certificate on optional", sni: "optional.example", cert: &foreign, wantCode: 400, wantAsked: true},
			{name: "SNI of a host without client auth, Host of one with it", sni: "plain.example", host: "plain-mtls.example", cert: &good, wantCode: 421},
			{name: "SNI of a host with client auth, Host of another", sni: "on.example", host: "optional.example", cert: &good, wantCode: 421, wantAsked: true},
			{name: "a CN that does not match", sni: "cn.example", cert: &good, wantCode: 403, wantAsked: true, wantBody: "client certificate unauthorized"},
			{name: "no certificate with an error page", sni: "errpage.example", wantCode: 302, wantAsked: true, wantLocation: "https://errors.example/cert.html"},
			{name: "a subject with CR LF", sni: "on.example", cert: &nasty, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: `CN=evil\0D\0AX-Injected: 1`, wantCert: true},
			{name: "another CA's certificate on optional_no_ca", sni: "noca.example", cert: &foreign, wantCode: 200, wantAsked: true, wantVerify: "FAILED:unable to get local issuer certificate", wantSubject: "CN=client"},
			{name: "no certificate on optional_no_ca", sni: "noca.example", wantCode: 200, wantAsked: true, wantVerify: "NONE"},
			{name: "a chain within the depth", sni: "deep.example", cert: &deep, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=client"},
			{name: "a CN that matches", sni: "cn.example", cert: &partner, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=partner"},
			{name: "a good certificate on optional", sni: "optional.example", cert: &good, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=client"},
			{name: "the default certificate's host with client auth", sni: "plain-mtls.example", cert: &good, wantCode: 200, wantAsked: true, wantVerify: "SUCCESS", wantSubject: "CN=client"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := newMTLSClient(t, httpsAddr, tc.sni, tc.cert)
				host := tc.host
				if host == "" {
					host = tc.sni
				}
				hdr := map[string]string{"Host": host}
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				resp, e := get(t, c.Client, "https://"+host+"/", hdr)
				if resp.StatusCode != tc.wantCode {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantCode)
				}
				if asked := c.asked.Load() > 0; asked != tc.wantAsked {
					t.Errorf("handshake asked for a client certificate: %t, want %t", asked, tc.wantAsked)
				}
				if tc.wantLocation != "" && resp.Header.Get("Location") != tc.wantLocation {
					t.Errorf("Location %q, want %q", resp.Header.Get("Location"), tc.wantLocation)
				}
				if tc.wantCode != 200 {
					return
				}
				checkClientCertHeaders(t, e.Header, tc.wantVerify, tc.wantSubject, tc.cert, tc.wantCert)
			})
		}

		t.Run("plain HTTP to a host with client auth on", func(t *testing.T) {
			resp, _ := get(t, http.DefaultClient, "http://"+httpAddr+"/", map[string]string{"Host": "on.example", "ssl-client-verify": "SUCCESS"})
			if resp.StatusCode != 400 {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
		})
		t.Run("plain HTTP to a host with client auth optional", func(t *testing.T) {
			resp, e := get(t, http.DefaultClient, "http://"+httpAddr+"/", map[string]string{"Host": "optional.example", "ssl-client-verify": "SUCCESS"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			checkClientCertHeaders(t, e.Header, "NONE", "", nil, false)
		})
	})
}

// checkClientCertHeaders checks the client-certificate headers a backend got: exactly one
// ssl-client-verify (verify; none when ""), the subject DN of a presented certificate and
// its issuer's (cert's leaf's issuer CN), and ssl-client-cert, the escaped PEM of cert's leaf, only with wantCert. No
// other spelling of those names arrives.
func checkClientCertHeaders(t *testing.T, h map[string][]string, verify, subject string, cert *tls.Certificate, wantCert bool) {
	t.Helper()
	for k := range h {
		if strings.Contains(k, "_") {
			t.Errorf("backend got header %q", k)
		}
	}
	if got := h["Ssl-Client-Verify"]; verify == "" && got != nil || verify != "" && (len(got) != 1 || got[0] != verify) {
		t.Errorf("ssl-client-verify %q, want %q", got, verify)
	}
	if got := h["Ssl-Client-Subject-Dn"]; subject == "" && got != nil || subject != "" && (len(got) != 1 || got[0] != subject) {
		t.Errorf("ssl-client-subject-dn %q, want %q", got, subject)
	}
	if subject != "" {
		if got, want := h["Ssl-Client-Issuer-Dn"], "CN="+cert.Leaf.Issuer.CommonName; len(got) != 1 || got[0] != want {
			t.Errorf("ssl-client-issuer-dn %q, want %s", got, want)
		}
	} else if got := h["Ssl-Client-Issuer-Dn"]; got != nil {
		t.Errorf("ssl-client-issuer-dn %q without a certificate", got)
	}
	got := h["Ssl-Client-Cert"]
	if !wantCert {
		if got != nil {
			t.Errorf("ssl-client-cert %q, want none", got)
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("ssl-client-cert %q, want one", got)
	}
	p, err := url.QueryUnescape(got[0])
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode([]byte(p))
	if blk == nil || string(blk.Bytes) != string(cert.Certificate[0]) {
		t.Errorf("ssl-client-cert %q is not the client's certificate", got[0])
	}
}

// TestClientCertificateCARotation pins that a rotated CA Secret takes effect with the next
// table, on connections already open too (each request is judged by the table in use).
func TestClientCertificateCARotation(t *testing.T) {
	ca1, ca2 := newTestCA(t, "ca-1"), newTestCA(t, "ca-2")
	c1, c2 := ca1.issueClient(t, "one"), ca2.issueClient(t, "two")
	forEachPath(t, func(t *testing.T, opts Options) {
		be := echoBackend(t, "b")
		build := func(sec *corev1.Secret) route {
			return route{host: "on.example", path: "/", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, "on.example"),
				annotations: mtlsAnn("on"), secrets: []*corev1.Secret{sec}}
		}
		s, _, httpsAddr := startProxy(t, opts, buildTable(t, build(caSecret("ns", "client-ca", "1", ca1.pem))))
		one := newMTLSClient(t, httpsAddr, "on.example", &c1)
		two := newMTLSClient(t, httpsAddr, "on.example", &c2)
		status := func(c *mtlsClient) int {
			resp, _ := get(t, c.Client, "https://on.example/", nil)
			return resp.StatusCode
		}
		if a, b := status(one), status(two); a != 200 || b != 400 {
			t.Fatalf("before rotation: ca-1's client %d, ca-2's %d; want 200, 400", a, b)
		}
		s.Swap(buildTable(t, build(caSecret("ns", "client-ca", "2", ca2.pem))))
		if a, b := status(one), status(two); a != 400 || b != 200 {
			t.Fatalf("after rotation: ca-1's client %d, ca-2's %d; want 400, 200", a, b)
		}
	})
}
