package table

import (
	"crypto/tls"
	"crypto/x509"
	"sort"
	"time"
)

// ServedCertificate is a certificate the table serves and where: a host of an Ingress (its
// owner namespace), or a Gateway listener (Listener set, Host its hostname or "").
type ServedCertificate struct {
	Namespace string // the host's owner; "" on a Gateway listener
	Host      string // "*.example.com" for a wildcard; "" for a listener without hostname
	Listener  string // the Gateway listener's name; "" for an Ingress host
	Secret    string // the certificate's Secret, "namespace/name"
	NotAfter  time.Time
}

// Certificates lists the certificates the table serves, with the end of validity of each
// (the leaf's NotAfter), sorted by listener, host, Secret; a certificate that does not parse is left
// out (it could not have been loaded). The default certificate is not listed.
func (t *Table) Certificates() []ServedCertificate {
	var out []ServedCertificate
	add := func(c *tls.Certificate, sc ServedCertificate) {
		if na, ok := notAfter(c); ok {
			sc.NotAfter = na
			out = append(out, sc)
		}
	}
	for host, hr := range t.exact {
		for _, c := range hr.certs {
			add(c.cert, ServedCertificate{Namespace: hr.namespace, Host: host, Secret: c.secret})
		}
	}
	for suffix, hr := range t.wildcard {
		for _, c := range hr.certs {
			add(c.cert, ServedCertificate{Namespace: hr.namespace, Host: "*." + suffix, Secret: c.secret})
		}
	}
	if t.gateway != nil {
		for _, ls := range t.gateway.ports {
			for _, l := range ls {
				if l.https {
					for _, c := range l.certs {
						add(c.cert, ServedCertificate{Host: l.hostname, Listener: l.name, Secret: c.secret})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Listener != out[j].Listener {
			return out[i].Listener < out[j].Listener
		}
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].Secret < out[j].Secret
	})
	return out
}

// notAfter is the end of validity of c's leaf.
func notAfter(c *tls.Certificate) (time.Time, bool) {
	if c == nil || len(c.Certificate) == 0 {
		return time.Time{}, false
	}
	if c.Leaf != nil {
		return c.Leaf.NotAfter, true
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return time.Time{}, false
	}
	return leaf.NotAfter, true
}
