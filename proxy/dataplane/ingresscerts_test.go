package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestIngressHostKeyTypes: an Ingress host with several TLS Secrets (spec.tls entries of its
// namespace's Ingresses) gives each client the first certificate it can use, ECDSA before
// RSA whatever the order they are listed in: a client offering only RSA key exchange (TLS 1.2,
// ECDHE-RSA suites) gets the RSA one, every other client the ECDSA one. Hostile cases: a
// Secret of another namespace naming the host is not served (the host is not that
// namespace's); a host with an RSA certificate alone still refuses a client that cannot use
// it; one Secret named twice is one certificate. Every certificate served is listed for the
// expiry metric.
func TestIngressHostKeyTypes(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		ca := newTestCA(t, "ingress test CA")
		ep := []string{hostport(echoBackend(t, "a"))}
		secret := func(ns, name string, crt, key []byte) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
		}
		rsaCrt, rsaKey := ca.issueRSA(t, "a.example")
		ecCrt, ecKey, _ := ca.issue(t, "a.example")
		bCrt, bKey := ca.issueRSA(t, "b.example")
		// The intruder's certificate is of another CA: a client trusting the test CA alone
		// refuses it, were it served.
		otherCrt, otherKey, _ := newTestCA(t, "intruder CA").issue(t, "a.example")
		in := tableInput(
			route{host: "a.example", path: "/", endpoints: ep},
			route{host: "a.example", path: "/again", endpoints: ep},
			route{host: "b.example", path: "/", endpoints: ep},
			route{host: "a.example", path: "/other", endpoints: ep, namespace: "intruder"},
		)
		in.Secrets = append(in.Secrets, secret("ns", "a-rsa", rsaCrt, rsaKey), secret("ns", "a-ecdsa", ecCrt, ecKey),
			secret("ns", "b-rsa", bCrt, bKey), secret("intruder", "a", otherCrt, otherKey))
		tlsFor := func(host string, secrets ...string) (out []networkingv1.IngressTLS) {
			for _, s := range secrets {
				out = append(out, networkingv1.IngressTLS{Hosts: []string{host}, SecretName: s})
			}
			return out
		}
		in.Ingresses[0].Spec.TLS = tlsFor("a.example", "a-rsa", "a-ecdsa") // RSA listed first
		in.Ingresses[1].Spec.TLS = tlsFor("a.example", "a-ecdsa")          // the same Secret again
		in.Ingresses[2].Spec.TLS = tlsFor("b.example", "b-rsa")
		in.Ingresses[3].Spec.TLS = tlsFor("a.example", "a")
		tab, _ := ingress.Build(in) // the intruder's Ingress is a problem (HostConflict)
		_, _, httpsAddr := startProxy(t, opts, tab)

		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		rsaOnly, ecdsaOnly, modern := keyTypeConfigs()
		served := func(sni string, base *tls.Config) (*x509.Certificate, error) {
			c := sniClient(sni, base, roots)
			defer c.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, "https://"+httpsAddr+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = sni
			resp, err := c.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("status %d, want 200", resp.StatusCode)
			}
			return resp.TLS.PeerCertificates[0], nil
		}
		for _, tc := range []struct {
			name string
			conf *tls.Config
			want string
		}{
			{"a client of ECDHE-RSA suites only", rsaOnly, "RSA"},
			{"a client of ECDHE-ECDSA suites only", ecdsaOnly, "ECDSA"},
			{"a TLS 1.3 client", modern, "ECDSA"},
		} {
			if cert, err := served("a.example", tc.conf); err != nil || cert.PublicKeyAlgorithm.String() != tc.want {
				t.Errorf("a.example, %s: %v (%v), want its %s certificate", tc.name, cert, err, tc.want)
			}
		}
		if cert, err := served("b.example", ecdsaOnly); err == nil {
			t.Errorf("b.example (RSA only) to an ECDSA-only client: %s certificate, want the handshake refused", cert.PublicKeyAlgorithm)
		}
		if cert, err := served("b.example", modern); err != nil || cert.PublicKeyAlgorithm.String() != "RSA" {
			t.Errorf("b.example to a TLS 1.3 client: %v (%v), want its RSA certificate", cert, err)
		}
		var secrets []string
		for _, sc := range tab.Certificates() {
			if sc.Host == "a.example" {
				secrets = append(secrets, sc.Secret)
			}
		}
		if want := []string{"ns/a-ecdsa", "ns/a-rsa"}; !slices.Equal(secrets, want) {
			t.Errorf("certificates listed for a.example: %v, want %v", secrets, want)
		}
	})
}
