package clientcert

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
)

// The headers ingress-nginx sends a backend of a host with client-certificate authentication
// (its template: ssl-client-verify, -subject-dn and -issuer-dn always; ssl-client-cert only
// with auth-tls-pass-certificate-to-upstream).
const (
	HeaderCert      = "Ssl-Client-Cert"
	HeaderVerify    = "Ssl-Client-Verify"
	HeaderSubjectDN = "Ssl-Client-Subject-Dn"
	HeaderIssuerDN  = "Ssl-Client-Issuer-Dn"
)

// VerifyValue is the ssl-client-verify value of r: SUCCESS, NONE or FAILED:<reason>
// (nginx's $ssl_client_verify).
func (r Result) VerifyValue() string {
	switch r.Status {
	case Success:
		return "SUCCESS"
	case Failed:
		return "FAILED:" + r.Reason
	}
	return "NONE"
}

// SubjectDN is c's subject in RFC 2253 form ("CN=client,O=Example"; nginx's
// $ssl_client_s_dn), "" for nil. Bytes that cannot stand in a header (controls) and bytes
// over 0x7e are written \XX, as OpenSSL's RFC 2253 form writes them: a certificate's
// subject never splits or smuggles a header.
func SubjectDN(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return dn(c.Subject)
}

// IssuerDN is c's issuer as SubjectDN writes it.
func IssuerDN(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return dn(c.Issuer)
}

func dn(n pkix.Name) string {
	s := n.String()
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b > 0x7e {
			return escapeBytes(s)
		}
	}
	return s
}

func escapeBytes(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			b.WriteByte('\\')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// EscapedPEM is c as PEM, URL-escaped (nginx's $ssl_client_escaped_cert): every byte but
// letters, digits and -._~ as %XX, so that both a path and a query unescaper read it back.
func EscapedPEM(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(p) + len(p)/8)
	for _, ch := range p {
		if 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '.' || ch == '_' || ch == '~' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[ch>>4])
		b.WriteByte(hex[ch&0xf])
	}
	return b.String()
}
