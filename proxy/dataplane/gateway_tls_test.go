package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"testing"

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

// TestGatewayHTTPS: a Gateway's HTTPS listener terminates TLS with its own certificate, chosen
// by the server name on the port the connection came to. Hostile cases first: a server name
// no listener covers, and no server name at all, get no handshake (never the proxy's default
// certificate); a request for b.example on a connection made for a.example is refused with
// 421, not routed with a.example's certificate.
func TestGatewayHTTPS(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		api := echoBackend(t, "api")
		ca := newTestCA(t, "gateway test CA")
		s, _, httpsAddr := startProxy(t, opts, buildTable(t))
		ap, err := net.ResolveTCPAddr("tcp", httpsAddr)
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(gatewayTLSTable(t, ca, int32(ap.Port), hostport(api)))
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
