package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// certExpirySeries reads metalgate_proxy_certificate_expiry_timestamp_seconds from reg, by
// "namespace|host|listener|secret".
func certExpirySeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "metalgate_proxy_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[strings.Join([]string{l["namespace"], l["host"], l["listener"], l["secret"]}, "|")] = m.GetGauge().GetValue()
		}
	}
	return out
}

func notAfterOf(t *testing.T, certPEM []byte) time.Time {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.NotAfter
}

// TestCertificateExpiryMetric: each certificate the table serves is exported with its end of
// validity, labelled by the host and its owner namespace from the table; a client's server
// name for a host the table does not serve creates no series; a certificate the next table
// drops is no longer exported.
func TestCertificateExpiryMetric(t *testing.T) {
	be := echoBackend(t, "b")
	sec := tlsSecretOf(t, "shop.test")
	want := float64(notAfterOf(t, sec.Data[corev1.TLSCertKey]).Unix())
	withTLS := buildTable(t,
		route{host: "shop.test", path: "/", endpoints: []string{hostport(be)}, tlsSecret: sec},
		route{host: "plain.test", path: "/", endpoints: []string{hostport(be)}})
	plain := buildTable(t, route{host: "plain.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		s, _, tlsAddr := startProxy(t, opts, withTLS)
		// Hostile first: server names the table does not serve (the default certificate
		// answers them) add nothing.
		for _, sni := range []string{"evil.test", "plain.test", strings.Repeat("a", 60) + ".test"} {
			if c, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}); err == nil {
				c.Close()
			}
		}
		got := certExpirySeries(t, reg)
		if len(got) != 1 || got["ns|shop.test||ns/tls-shop.test"] != want {
			t.Errorf("certificate expiry series %v, want only ns|shop.test||ns/tls-shop.test = %v", got, want)
		}
		s.Swap(plain)
		if got := certExpirySeries(t, reg); len(got) != 0 {
			t.Errorf("after a table without certificates: %v, want none", got)
		}
	})
}
