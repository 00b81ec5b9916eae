package dataplane

import (
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
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// issueURI issues a serving certificate holding dnsNames and the URI SANs uris.
func (ca *testCA) issueURI(t testing.TB, dnsNames []string, uris ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "backend"}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	c, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pathTLSBackend is an HTTPS endpoint that records, per request, its path and the SNI of
// the connection it came on (connections are kept open: pooled ones are reused).
type pathTLSBackend struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []pathSNI
}

type pathSNI struct{ path, sni string }

func newPathTLSBackend(t *testing.T, cert tls.Certificate) *pathTLSBackend {
	t.Helper()
	b := &pathTLSBackend{}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.got = append(b.got, pathSNI{r.URL.Path, r.TLS.ServerName})
		b.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *pathTLSBackend) seen() []pathSNI {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]pathSNI(nil), b.got...)
}

// btlsPolicy is BackendTLSPolicy app/<name>, created at minute age, targeting port "btls" of
// Service app/<svc>, with validation v.
func btlsPolicy(name, svc string, age int, v gatewayv1.BackendTLSPolicyValidation) *gatewayv1.BackendTLSPolicy {
	return &gatewayv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, age, 0, 0, time.UTC))},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gatewayv1.ObjectName(svc)},
				SectionName:                ptr(gatewayv1.SectionName("btls"))}},
			Validation: v,
		}}
}

// caRefs is a validation naming ConfigMap cm for CAs, with hostname and SANs.
func caRefs(cm, hostname string, sans ...gatewayv1.SubjectAltName) gatewayv1.BackendTLSPolicyValidation {
	return gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(hostname), SubjectAltNames: sans,
		CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: gatewayv1.ObjectName(cm)}}}
}

func dnsSAN(h string) gatewayv1.SubjectAltName {
	return gatewayv1.SubjectAltName{Type: gatewayv1.HostnameSubjectAltNameType, Hostname: gatewayv1.Hostname(h)}
}

func uriSAN(u string) gatewayv1.SubjectAltName {
	return gatewayv1.SubjectAltName{Type: gatewayv1.URISubjectAltNameType, URI: gatewayv1.AbsoluteURI(u)}
}

func caConfigMap(ns, name string, ca []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "1"},
		Data: map[string]string{"ca.crt": string(ca)}}
}

// btlsGatewayInput is a Gateway on the proxy's port addr with, per Service name of backends
// (namespace app, port 443 named "btls", its one endpoint the address given), an HTTPRoute
// sending PathPrefix /<name> to it.
func btlsGatewayInput(t *testing.T, addr string, backends map[string]string) gatewayapi.Input {
	t.Helper()
	in := gatewayapi.Input{Gateway: listenerGateway(t, addr), AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true,
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, {ObjectMeta: metav1.ObjectMeta{Name: "infra"}}}}
	for name, ep := range backends {
		h, p, err := net.SplitHostPort(ep)
		if err != nil {
			t.Fatal(err)
		}
		pn, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "btls", Port: 443}}}})
		in.Slices = append(in.Slices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "app", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("btls"), Port: ptr(int32(pn))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		})
		in.HTTPRoutes = append(in.HTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr("/" + name)}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: gatewayv1.ObjectName(name), Port: ptr(gatewayv1.PortNumber(443))}}}},
				}}}})
	}
	return in
}

// TestGatewayBackendTLSPolicy: a Service targeted by a BackendTLSPolicy is reached over TLS,
// verified against the policy's CAs (ConfigMaps of the policy's namespace only) and its
// hostname, or its subjectAltNames when given (the hostname is then only the SNI), on both
// paths. Hostile cases first: a certificate for another name, another CA, a CA ConfigMap of
// another namespace, SANs the certificate does not hold, a newer conflicting policy.
func TestGatewayBackendTLSPolicy(t *testing.T) {
	ca, otherCA := newTestCA(t, "backend CA"), newTestCA(t, "other CA")
	_, _, abc := ca.issue(t, "abc.example.com")
	_, _, sanOnly := ca.issue(t, "san.example.com")
	_, _, fromOther := otherCA.issue(t, "abc.example.com")
	spiffe := ca.issueURI(t, []string{"abc.example.com"}, "spiffe://abc.example.com/test-identity")
	appCA := caConfigMap("app", "ca", ca.pem)
	for _, tc := range []struct {
		name     string
		cert     tls.Certificate
		policies []*gatewayv1.BackendTLSPolicy
		cms      []*corev1.ConfigMap
		want     int
		wantSNI  string // when 200
	}{
		{name: "a certificate for another hostname is refused", cert: abc, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "mismatch.example.com"))}, want: http.StatusBadGateway},
		{name: "a certificate of another CA is refused", cert: fromOther, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com"))}, want: http.StatusBadGateway},
		{name: "a CA ConfigMap of another namespace is not read", cert: abc, cms: []*corev1.ConfigMap{caConfigMap("other", "ca", ca.pem)},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com"))}, want: http.StatusBadGateway},
		{name: "a Hostname SAN the certificate lacks is refused, though the hostname matches", cert: abc, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com", dnsSAN("dce.example.com")))}, want: http.StatusBadGateway},
		{name: "a URI SAN the certificate lacks is refused", cert: spiffe, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com", uriSAN("spiffe://def.example.com/test-identity")))}, want: http.StatusBadGateway},
		{name: "a newer conflicting policy does not replace the older", cert: abc, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("newer", "s", 5, caRefs("ca", "abc.example.com")), btlsPolicy("older", "s", 1, caRefs("ca", "mismatch.example.com"))},
			want:     http.StatusBadGateway},
		{name: "the hostname is sent as SNI and verified", cert: abc, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com"))}, want: http.StatusOK, wantSNI: "abc.example.com"},
		{name: "with SANs the hostname is only the SNI", cert: sanOnly, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "sni.example.com", dnsSAN("dce.example.com"), dnsSAN("san.example.com")))},
			want:     http.StatusOK, wantSNI: "sni.example.com"},
		{name: "a URI SAN the certificate holds", cert: spiffe, cms: []*corev1.ConfigMap{appCA},
			policies: []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com", uriSAN("spiffe://abc.example.com/test-identity")))},
			want:     http.StatusOK, wantSNI: "abc.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newTLSBackend(t, tc.cert, false, nil)
				s, addr, _ := startProxy(t, opts, buildTable(t))
				in := btlsGatewayInput(t, addr, map[string]string{"s": be.addr()})
				in.BackendTLSPolicies, in.ConfigMaps = tc.policies, tc.cms
				res := gatewayapi.Translate(in)
				if len(res.Problems) > 0 {
					t.Fatalf("translate: %v", res.Problems)
				}
				s.Swap(res.Table)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				for range 2 { // the second over a pooled connection or a resumed session
					resp, err := c.Get("http://" + addr + "/s")
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != tc.want {
						t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
					}
				}
				switch {
				case tc.want != http.StatusOK && be.requests.Load() != 0:
					t.Errorf("the backend got %d requests over a connection that failed verification", be.requests.Load())
				case tc.want == http.StatusOK && load(&be.sni) != tc.wantSNI:
					t.Errorf("the backend saw SNI %q, want %q", load(&be.sni), tc.wantSNI)
				}
			})
		})
	}
}

// TestGatewayBackendTLSPolicyIdentity: two Services whose policies name the same CA
// ConfigMap but different hostnames, with one endpoint, never share a TLS configuration or a
// pooled connection: a connection verified (and sent SNI) for one hostname never carries a
// request for the other. Hostile case first: the endpoint's certificate holds only the first
// Service's hostname, so every request for the second must fail, whatever came first.
func TestGatewayBackendTLSPolicyIdentity(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	_, _, onlyA := ca.issue(t, "a.example.com")
	_, _, both := ca.issue(t, "a.example.com", "b.example.com")
	policies := []*gatewayv1.BackendTLSPolicy{btlsPolicy("pa", "a", 0, caRefs("ca", "a.example.com")), btlsPolicy("pb", "b", 0, caRefs("ca", "b.example.com"))}
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		want map[string]int // per path
	}{
		{name: "the certificate holds a's hostname only: b's requests fail", cert: onlyA, want: map[string]int{"/a": 200, "/b": 502}},
		{name: "the certificate holds both: each request carries its own hostname", cert: both, want: map[string]int{"/a": 200, "/b": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newPathTLSBackend(t, tc.cert)
				ep := be.srv.Listener.Addr().String()
				s, addr, _ := startProxy(t, opts, buildTable(t))
				in := btlsGatewayInput(t, addr, map[string]string{"a": ep, "b": ep})
				in.BackendTLSPolicies, in.ConfigMaps = policies, []*corev1.ConfigMap{caConfigMap("app", "ca", ca.pem)}
				res := gatewayapi.Translate(in)
				if len(res.Problems) > 0 {
					t.Fatalf("translate: %v", res.Problems)
				}
				s.Swap(res.Table)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				for _, p := range []string{"/a", "/b", "/a", "/b", "/b", "/a"} {
					resp, err := c.Get("http://" + addr + p)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != tc.want[p] {
						t.Fatalf("%s: status %d, want %d", p, resp.StatusCode, tc.want[p])
					}
				}
				wantSNI := map[string]string{"/a": "a.example.com", "/b": "b.example.com"}
				seen := be.seen()
				for _, r := range seen {
					if r.sni != wantSNI[r.path] {
						t.Errorf("a request for %s reached the endpoint over a connection with SNI %q, want %q", r.path, r.sni, wantSNI[r.path])
					}
				}
				want := 0
				for _, p := range []string{"/a", "/b", "/a", "/b", "/b", "/a"} {
					if tc.want[p] == 200 {
						want++
					}
				}
				if len(seen) != want {
					t.Errorf("the endpoint saw %d requests, want %d: %+v", len(seen), want, seen)
				}
			})
		})
	}
}

// TestGatewayBackendClientCertificate: the Gateway's spec.tls.backend.clientCertificateRef
// is presented to backends its BackendTLSPolicies apply to, on both paths. Hostile case
// first: a Secret of another namespace that no ReferenceGrant opens is not read, so no
// certificate is presented and a backend that requires one refuses the handshake (502).
func TestGatewayBackendClientCertificate(t *testing.T) {
	ca, clientCA := newTestCA(t, "backend CA"), newTestCA(t, "client CA")
	_, _, serving := ca.issue(t, "abc.example.com")
	crt, key, _ := clientCA.issue(t, "gateway-client")
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	for _, tc := range []struct {
		name     string
		secretNS string
		want     int
	}{
		{name: "a Secret of another namespace without a ReferenceGrant is not presented", secretNS: "other", want: http.StatusBadGateway},
		{name: "the Gateway's own Secret is presented", secretNS: "infra", want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newTLSBackend(t, serving, false, pool)
				s, addr, _ := startProxy(t, opts, buildTable(t))
				in := btlsGatewayInput(t, addr, map[string]string{"s": be.addr()})
				in.BackendTLSPolicies = []*gatewayv1.BackendTLSPolicy{btlsPolicy("p", "s", 0, caRefs("ca", "abc.example.com"))}
				in.ConfigMaps = []*corev1.ConfigMap{caConfigMap("app", "ca", ca.pem)}
				in.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: tc.secretNS, Name: "client", UID: "uid-client", ResourceVersion: "1"},
					Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}}
				ns := gatewayv1.Namespace(tc.secretNS)
				in.Gateway.Spec.TLS = &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{
					ClientCertificateRef: &gatewayv1.SecretObjectReference{Name: "client", Namespace: &ns}}}
				res := gatewayapi.Translate(in)
				if len(res.Problems) > 0 {
					t.Fatalf("translate: %v", res.Problems)
				}
				s.Swap(res.Table)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				resp, err := c.Get("http://" + addr + "/s")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
				}
				if tc.want == http.StatusOK && load(&be.client) != "gateway-client" {
					t.Errorf("the backend saw client certificate %q, want gateway-client", load(&be.client))
				}
			})
		})
	}
}
