package dataplane

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// tlsSecretOf is a kubernetes.io/tls Secret of namespace ns for host.
func tlsSecretOf(t testing.TB, host string) *corev1.Secret {
	t.Helper()
	crt, key := pemCert(t, host)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls-" + host}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
}

// stsBackend answers with the Strict-Transport-Security header the request names in its
// X-Echo-Sts header (a backend that reflects a client's header, or sets its own).
func stsBackend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Echo-Sts"); v != "" {
			w.Header().Set("Strict-Transport-Security", v)
		}
		_, _ = w.Write([]byte("{}"))
	})
}

// TestHSTS pins which responses carry Strict-Transport-Security: the proxy's on HTTPS for
// hosts with TLS (replacing a backend's), never on plain HTTP (RFC 6797 §7.2, whatever a
// client or backend sends), a route's own response-headers-set kept, none with HSTS off.
func TestHSTS(t *testing.T) {
	const forged = "max-age=0"
	for _, tc := range []struct {
		name   string
		hsts   string // Options.HSTS
		https  bool
		host   string
		hdr    map[string]string
		want   []string
		status int
	}{
		// Hostile first.
		{name: "plain HTTP with a forwarded https proto gets none", host: "tls.test",
			hdr: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "on"}, status: 200},
		{name: "plain HTTP: a backend's (echoed from the client) is removed", host: "tls.test",
			hdr: map[string]string{"X-Echo-Sts": forged}, status: 200},
		{name: "HTTPS: a backend's (echoed from the client) is replaced", https: true, host: "tls.test",
			hdr: map[string]string{"X-Echo-Sts": forged}, want: []string{DefaultHSTS}, status: 200},
		{name: "HTTPS to a host without TLS (default certificate) gets none", https: true, host: "plain.test",
			hdr: map[string]string{"X-Echo-Sts": forged}, status: 200},
		{name: "HTTPS: the proxy's own answer (503) carries it too", https: true, host: "tls.test",
			want: []string{DefaultHSTS}, status: 503},
		{name: "HTTPS: a route that removes it sends none", https: true, host: "rm.test", status: 200},
		{name: "HTTPS default", https: true, host: "tls.test", want: []string{DefaultHSTS}, status: 200},
		{name: "HTTPS with another value", hsts: "max-age=60; preload", https: true, host: "tls.test",
			want: []string{"max-age=60; preload"}, status: 200},
		{name: "HTTPS: the route's own header wins", https: true, host: "own.test",
			hdr: map[string]string{"X-Echo-Sts": forged}, want: []string{"max-age=10"}, status: 200},
		{name: "off: the backend's passes", hsts: "-", https: true, host: "tls.test",
			hdr: map[string]string{"X-Echo-Sts": "max-age=5"}, want: []string{"max-age=5"}, status: 200},
		{name: "off: none of the proxy's", hsts: "-", https: true, host: "tls.test", status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := httptest.NewServer(stsBackend())
				t.Cleanup(be.Close)
				tab := buildTable(t,
					route{host: "tls.test", path: "/ok", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, "tls.test")},
					route{host: "own.test", path: "/ok", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, "own.test"),
						annotations: map[string]string{ingress.PrefixMetalgate + "response-headers-set": "Strict-Transport-Security: max-age=10"}},
					route{host: "rm.test", path: "/ok", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, "rm.test"),
						annotations: map[string]string{ingress.PrefixMetalgate + "response-headers-remove": "Strict-Transport-Security"}},
					route{host: "tls.test", path: "/empty", tlsSecret: tlsSecretOf(t, "tls.test")},
					route{host: "plain.test", path: "/ok", endpoints: []string{hostport(be)}},
				)
				opts.HSTS = tc.hsts
				_, httpAddr, httpsAddr := startProxy(t, opts, tab)
				url, c := "http://"+httpAddr, http.DefaultClient
				if tc.https {
					tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.host, InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
					t.Cleanup(tr.CloseIdleConnections)
					url, c = "https://"+httpsAddr, &http.Client{Transport: tr}
				}
				path := "/ok"
				if tc.status == http.StatusServiceUnavailable {
					path = "/empty"
				}
				hdr := map[string]string{"Host": tc.host}
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				resp, _ := get(t, c, url+path, hdr)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if got := resp.Header.Values("Strict-Transport-Security"); !equalStrings(got, tc.want) {
					t.Errorf("Strict-Transport-Security %q, want %q", got, tc.want)
				}
			})
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
