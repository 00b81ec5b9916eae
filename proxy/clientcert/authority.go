package clientcert

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Authority is a CA bundle to verify client certificates against: its self-signed
// certificates are the trust anchors, the others intermediates a chain may pass through (as
// OpenSSL, and so nginx, read ssl_client_certificate: an intermediate alone is no anchor,
// and counts towards the depth). CRLs, when given, must cover every certificate of a chain
// but its anchor.
type Authority struct {
	roots         *x509.CertPool
	intermediates []*x509.Certificate
	names         *x509.CertPool // every certificate of the bundle: the CAs the handshake names
	// crls are the revocation lists by their issuer's raw subject; nil: no revocation check.
	crls map[string][]*x509.RevocationList
}

// Errors of ParseAuthority.
var (
	ErrNoCertificate = errors.New("holds no PEM certificate")
	ErrNoRoot        = errors.New("holds no self-signed CA certificate to anchor a chain (intermediates alone are not trusted)")
	ErrNoCRL         = errors.New("holds no PEM X509 CRL")
)

// ParseAuthority reads a PEM CA bundle (ca.crt) and, when crlPEM is not empty, PEM revocation
// lists (ca.crl), each signed by a certificate of the bundle. Errors name the part: "ca.crt"
// or "ca.crl".
func ParseAuthority(caPEM, crlPEM []byte) (*Authority, error) {
	a := &Authority{roots: x509.NewCertPool(), names: x509.NewCertPool()}
	var all []*x509.Certificate
	rest := caPEM
	for i := 0; ; i++ {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ca.crt: certificate %d: %w", i, err)
		}
		all = append(all, c)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("ca.crt %w", ErrNoCertificate)
	}
	for _, c := range all {
		a.names.AddCert(c)
		if bytes.Equal(c.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(c) == nil {
			a.roots.AddCert(c)
		} else {
			a.intermediates = append(a.intermediates, c)
		}
	}
	if len(a.intermediates) == len(all) {
		return nil, fmt.Errorf("ca.crt %w", ErrNoRoot)
	}
	if len(bytes.TrimSpace(crlPEM)) == 0 {
		return a, nil
	}
	a.crls = map[string][]*x509.RevocationList{}
	rest = crlPEM
	n := 0
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "X509 CRL" {
			continue
		}
		l, err := x509.ParseRevocationList(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ca.crl: list %d: %w", n, err)
		}
		signed := false
		for _, c := range all {
			if bytes.Equal(c.RawSubject, l.RawIssuer) && l.CheckSignatureFrom(c) == nil {
				signed = true
				break
			}
		}
		if !signed {
			return nil, fmt.Errorf("ca.crl: list %d (issuer %s) is not signed by a certificate of ca.crt", n, l.Issuer)
		}
		a.crls[string(l.RawIssuer)] = append(a.crls[string(l.RawIssuer)], l)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("ca.crl %w", ErrNoCRL)
	}
	return a, nil
}

// Names is every certificate of the bundle, for the certificate_authorities a TLS server
// lists in its CertificateRequest (clients choose a certificate by them).
func (a *Authority) Names() *x509.CertPool { return a.names }

// ChecksRevocation reports whether the bundle came with revocation lists.
func (a *Authority) ChecksRevocation() bool { return a.crls != nil }
