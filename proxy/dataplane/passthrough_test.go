package dataplane

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestSSLPassthrough: with --enable-ssl-passthrough, a TLS connection for a passthrough host
// reaches its backend undecrypted (the client verifies the backend's own certificate and the
// backend sees the SNI), while other hosts on the same listener are terminated as before; a
// client that sends nothing holds up no one and is closed after ReadHeaderTimeout; a client
// that is not TLS gets the HTTPS server's answer, as without passthrough.
func TestSSLPassthrough(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		ca := newTestCA(t, "passthrough backend CA")
		_, _, cert := ca.issue(t, "pt.test")
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		be := newTLSBackend(t, cert, false, nil)
		term := echoBackend(t, "terminated")
		crt, key := pemCert(t, "term.test")
		termSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "term"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}
		in := tableInput(
			route{host: "pt.test", path: "/", annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}, endpoints: []string{be.addr()}},
			route{host: "term.test", path: "/", endpoints: []string{hostport(term)}, tlsSecret: termSecret},
		)
		in.SSLPassthrough = true
		tab, problems := ingress.Build(in)
		if len(problems) > 0 {
			t.Fatalf("problems: %v", problems)
		}
		opts.SSLPassthrough = true
		opts.ReadHeaderTimeout = time.Second
		_, _, httpsAddr := startProxy(t, opts, tab)

		// A silent client first: it must not hold up the others, and is closed in time.
		silent, err := net.Dial("tcp", httpsAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()

		client := func(sni string, rootCAs *x509.CertPool) *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{ServerName: sni, RootCAs: rootCAs, InsecureSkipVerify: rootCAs == nil}}}
		}
		c := client("pt.test", roots) // verifies the backend's certificate: the proxy's would fail
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://" + httpsAddr + "/")
		if err != nil {
			t.Fatalf("passthrough: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "tls ok" || load(&be.sni) != "pt.test" {
			t.Fatalf("passthrough: body %q, backend saw SNI %q; want the backend's answer to pt.test", body, load(&be.sni))
		}

		tc := client("term.test", nil)
		defer tc.CloseIdleConnections()
		r2, e := get(t, tc, "https://"+httpsAddr+"/", map[string]string{"Host": "term.test"})
		if r2.StatusCode != 200 || e.Backend != "terminated" || r2.TLS == nil || r2.TLS.PeerCertificates[0].Subject.CommonName != "term.test" {
			t.Fatalf("terminated host: status %d backend %q", r2.StatusCode, e.Backend)
		}

		// Not TLS at all: the HTTPS server's own answer, from the bytes read for the decision.
		plain, err := net.Dial("tcp", httpsAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		_, _ = io.WriteString(plain, "GET / HTTP/1.1\r\nHost: pt.test\r\n\r\n")
		_ = plain.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(plain).ReadString('\n')
		if !strings.HasPrefix(line, "HTTP/1.0 400") {
			t.Fatalf("plain HTTP on the HTTPS listener: %q, want the HTTPS server's 400", line)
		}

		_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("silent client still open after ReadHeaderTimeout: %v", err)
		}
	})
}

// TestSSLPassthroughNeedsFlag: without --enable-ssl-passthrough the annotation is reported and
// the host's TLS is terminated by the proxy (its certificate, not the backend's).
func TestSSLPassthroughNeedsFlag(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		be := newTLSBackend(t, func() tls.Certificate { _, _, c := newTestCA(t, "x").issue(t, "pt.test"); return c }(), false, nil)
		tab, problems := ingress.Build(tableInput(route{host: "pt.test", path: "/", annotations: map[string]string{"metalgate.io/ssl-passthrough": "true"}, endpoints: []string{be.addr()}}))
		if len(problems) != 1 || !strings.Contains(problems[0].Message, "--enable-ssl-passthrough") {
			t.Fatalf("problems %v, want one naming --enable-ssl-passthrough", problems)
		}
		if tab.Passthrough("pt.test") != nil {
			t.Fatal("passthrough host without the flag")
		}
		opts.SSLPassthrough = true // the listener sniffs, but the table has no passthrough host
		_, _, httpsAddr := startProxy(t, opts, tab)
		conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "pt.test", InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn == "pt.test" {
			t.Fatalf("the backend's certificate (%s): the connection was passed through", cn)
		}
		if n := be.requests.Load(); n != 0 {
			t.Fatalf("backend got %d requests", n)
		}
	})
}
