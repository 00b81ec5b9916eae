package dataplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// gatewayTLSTable: Gateway infra/gw with two HTTPS listeners on port, a.example (Secret a)
// and b.example (Secret b), and one HTTPRoute for both hosts to backend api at apiAddr.
func gatewayTLSTable(t *testing.T, ca *testCA, port int32, apiAddr string) *table.Table {
	t.Helper()
	res := gatewayapi.Translate(gatewayTLSInput(t, ca, port, apiAddr))
	tab, problems := res.Table, res.Problems
	if len(problems) > 0 || len(tab.Gateway.CertificateProblems) > 0 {
		t.Fatalf("build: %v %v", problems, tab.Gateway.CertificateProblems)
	}
	return tab
}

// gatewayTLSInput is the input of gatewayTLSTable.
func gatewayTLSInput(t *testing.T, ca *testCA, port int32, apiAddr string) gatewayapi.Input {
	t.Helper()
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate"}}
	in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	for _, h := range []string{"a", "b"} {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(h), Port: port,
			Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr(gatewayv1.Hostname(h + ".example")),
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(h)}}}})
		crt, key, _ := ca.issue(t, h+".example")
		in.Secrets = append(in.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: h},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
	}
	in.HTTPRoutes = []*gatewayv1.HTTPRoute{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{"a.example", "b.example"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "api", Port: ptr(gatewayv1.PortNumber(80))}}}}}}}}}
	h, p, err := net.SplitHostPort(apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	pn, _ := strconv.Atoi(p)
	in.Namespaces = []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}}
	in.Services = []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}}
	in.Slices = []*discoveryv1.EndpointSlice{{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "infra", Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(pn))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}}
	return in
}

// gatewayTLSSetup starts a proxy with an empty table, an echo backend "api" and a test CA for
// the Gateway HTTPS tests; port is the proxy's HTTPS port (the listeners' port).
func gatewayTLSSetup(t *testing.T, opts Options) (s *Server, httpsAddr string, port int32, api *httptest.Server, ca *testCA) {
	t.Helper()
	api = echoBackend(t, "api")
	ca = newTestCA(t, "gateway test CA")
	s, _, httpsAddr = startProxy(t, opts, buildTable(t))
	ap, err := net.ResolveTCPAddr("tcp", httpsAddr)
	if err != nil {
		t.Fatal(err)
	}
	return s, httpsAddr, int32(ap.Port), api, ca
}

// TestGatewayHTTPS: a Gateway's HTTPS listener terminates TLS with its own certificate, chosen
// by the server name on the port the connection came to. Hostile cases first: a server name
// no listener covers, and no server name at all, get no handshake (never the proxy's default
// certificate); a request for b.example on a connection made for a.example is refused with
// 421, not routed with a.example's certificate.
func TestGatewayHTTPS(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		s, httpsAddr, port, api, ca := gatewayTLSSetup(t, opts)
		s.Swap(gatewayTLSTable(t, ca, port, hostport(api)))
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)

		for _, sni := range []string{"c.example", ""} {
			conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
			if err == nil {
				leaf := conn.ConnectionState().PeerCertificates[0]
				conn.Close()
				t.Errorf("server name %q: handshake succeeded with %v; want it refused", sni, leaf.DNSNames)
			}
		}

		client := func(sni string) *http.Client {
			return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: sni, RootCAs: roots},
				ForceAttemptHTTP2: true}}
		}
		for _, h := range []string{"a.example", "b.example"} {
			c := client(h)
			resp, e := get(t, c, "https://"+httpsAddr+"/x", map[string]string{"Host": h})
			if resp.StatusCode != http.StatusOK || e.Backend != "api" {
				t.Errorf("GET https://%s/x (SNI %s): %d from %q, want 200 from api", h, h, resp.StatusCode, e.Backend)
			}
			if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != h {
				t.Errorf("SNI %s: certificate for %v", h, got)
			}
			c.CloseIdleConnections()
		}
		c := client("a.example")
		resp, _ := get(t, c, "https://"+httpsAddr+"/x", map[string]string{"Host": "b.example"})
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host b.example on a connection made for a.example: %d, want 421", resp.StatusCode)
		}
		c.CloseIdleConnections()

	})
}

// issueRSA is ca.issue with an RSA-2048 key: the PEM certificate and key.
func (ca *testCA) issueRSA(t *testing.T, dnsName string) (crtPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// keyTypeConfigs are client TLS settings that can use only an RSA certificate (TLS 1.2,
// ECDHE-RSA suites), only an ECDSA one (ECDHE-ECDSA suites), and either (TLS 1.3).
func keyTypeConfigs() (rsaOnly, ecdsaOnly, modern *tls.Config) {
	return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}},
		&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		&tls.Config{}
}

// sniClient is an HTTP client with base's TLS settings for server name sni, trusting roots.
func sniClient(sni string, base *tls.Config, roots *x509.CertPool) *http.Client {
	c := base.Clone()
	c.ServerName, c.RootCAs = sni, roots
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
}

// TestGatewayHTTPSKeyTypes: a listener with several certificateRefs gives each client the first
// certificate, in their order, that the client can use: with an ECDSA certificate first and an
// RSA one after it, a client offering only RSA key exchange (TLS 1.2, ECDHE-RSA suites) gets
// the RSA one, every other client the ECDSA one; with the order reversed every client gets
// the RSA one. A listener with one certificate is unchanged: a client that cannot use it gets
// no handshake. Both certificates are listed for the expiry metric.
func TestGatewayHTTPSKeyTypes(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		s, httpsAddr, port, api, ca := gatewayTLSSetup(t, opts)
		crt, key := ca.issueRSA(t, "a.example")
		build := func(refs ...string) *table.Table {
			in := gatewayTLSInput(t, ca, port, hostport(api))
			in.Secrets = append(in.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "a-rsa"},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
			in.Gateway.Spec.Listeners[0].TLS.CertificateRefs = nil
			for _, r := range refs {
				in.Gateway.Spec.Listeners[0].TLS.CertificateRefs = append(in.Gateway.Spec.Listeners[0].TLS.CertificateRefs,
					gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(r)})
			}
			res := gatewayapi.Translate(in)
			if len(res.Problems) > 0 || len(res.Table.Gateway.CertificateProblems) > 0 {
				t.Fatalf("build: %v %v", res.Problems, res.Table.Gateway.CertificateProblems)
			}
			return res.Table
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		rsaOnly, ecdsaOnly, modern := keyTypeConfigs()
		keyType := func(sni string, base *tls.Config) (string, error) {
			c := sniClient(sni, base, roots)
			defer c.CloseIdleConnections()
			resp, e := get(t, c, "https://"+httpsAddr+"/x", map[string]string{"Host": sni})
			if resp == nil {
				return "", fmt.Errorf("no response")
			}
			if resp.StatusCode != http.StatusOK || e.Backend != "api" {
				t.Errorf("GET https://%s/x: %d from %q, want 200 from api", sni, resp.StatusCode, e.Backend)
			}
			return resp.TLS.PeerCertificates[0].PublicKeyAlgorithm.String(), nil
		}

		s.Swap(build("a", "a-rsa"))
		for _, tc := range []struct {
			name string
			conf *tls.Config
			want string
		}{
			{"a client of ECDHE-RSA suites only", rsaOnly, "RSA"},
			{"a client of ECDHE-ECDSA suites only", ecdsaOnly, "ECDSA"},
			{"a TLS 1.3 client", modern, "ECDSA"},
		} {
			if got, err := keyType("a.example", tc.conf); err != nil || got != tc.want {
				t.Errorf("ECDSA then RSA, %s: %s certificate (%v), want %s", tc.name, got, err, tc.want)
			}
		}
		// b.example has its ECDSA certificate alone: no RSA one to fall back to.
		c := rsaOnly.Clone()
		c.ServerName, c.RootCAs = "b.example", roots
		if conn, err := tls.Dial("tcp", httpsAddr, c); err == nil {
			conn.Close()
			t.Errorf("b.example (ECDSA only) to an RSA-only client: handshake succeeded, want it refused")
		}
		var secrets []string
		for _, sc := range s.current.Load().table.Certificates() {
			if sc.Listener == "a" {
				secrets = append(secrets, sc.Secret)
			}
		}
		if want := []string{"infra/a", "infra/a-rsa"}; !slices.Equal(secrets, want) {
			t.Errorf("certificates listed for listener a: %v, want %v", secrets, want)
		}

		s.Swap(build("a-rsa", "a"))
		for _, conf := range []*tls.Config{modern, rsaOnly} {
			if got, err := keyType("a.example", conf); err != nil || got != "RSA" {
				t.Errorf("RSA then ECDSA: %s certificate (%v), want RSA (the first the client can use)", got, err)
			}
		}
		if got, err := keyType("a.example", ecdsaOnly); err != nil || got != "ECDSA" {
			t.Errorf("RSA then ECDSA, an ECDSA-only client: %s certificate (%v), want ECDSA", got, err)
		}
	})
}
