package clientcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial int64

func mk(t *testing.T, cn string, parent *ca, isCA bool, mod func(*x509.Certificate)) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageCRLSign
	} else {
		tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if mod != nil {
		mod(tmpl)
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &ca{cert: c, key: key}
}

func pemOf(cs ...*ca) []byte {
	var out []byte
	for _, c := range cs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})...)
	}
	return out
}

func crl(t *testing.T, issuer *ca, next time.Time, revoked ...*ca) []byte {
	t.Helper()
	var entries []x509.RevocationListEntry
	for _, r := range revoked {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: r.cert.SerialNumber, RevocationTime: now.Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: now.Add(-time.Hour), NextUpdate: next,
		RevokedCertificateEntries: entries}, issuer.cert, issuer.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

func chain(cs ...*ca) []*x509.Certificate {
	out := make([]*x509.Certificate, len(cs))
	for i, c := range cs {
		out[i] = c.cert
	}
	return out
}

// TestVerify: each way a presented chain fails, with OpenSSL's reason, hostile cases first,
// then what verifies; the depth counts the certificates above the client's, anchor included.
func TestVerify(t *testing.T) {
	root := mk(t, "root", nil, true, nil)
	other := mk(t, "other", nil, true, nil)
	inter := mk(t, "inter", root, true, nil)
	leaf := mk(t, "client", root, false, nil)
	deepLeaf := mk(t, "deep", inter, false, nil)
	foreign := mk(t, "client", other, false, nil)
	expired := mk(t, "client", root, false, func(c *x509.Certificate) { c.NotAfter = now.Add(-time.Minute) })
	future := mk(t, "client", root, false, func(c *x509.Certificate) { c.NotBefore = now.Add(time.Minute) })
	server := mk(t, "client", root, false, func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} })
	selfSigned := mk(t, "root", nil, false, nil) // claims the root's name, signed by itself

	rootOnly := mustAuthority(t, pemOf(root), nil)
	withInter := mustAuthority(t, pemOf(root, inter), nil)
	for _, tc := range []struct {
		name  string
		a     *Authority
		depth int
		peer  []*x509.Certificate
		want  Result
	}{
		{"another CA", rootOnly, 1, chain(foreign), Result{Failed, ReasonUnknownIssuer, foreign.cert}},
		{"self-signed with the root's name", rootOnly, 1, chain(selfSigned), Result{Failed, ReasonUnknownIssuer, selfSigned.cert}},
		{"expired", rootOnly, 1, chain(expired), Result{Failed, ReasonExpired, expired.cert}},
		{"not yet valid", rootOnly, 1, chain(future), Result{Failed, ReasonNotYetValid, future.cert}},
		{"server authentication only", rootOnly, 1, chain(server), Result{Failed, ReasonPurpose, server.cert}},
		{"deeper than the depth, intermediate sent", rootOnly, 1, chain(deepLeaf, inter), Result{Failed, ReasonChainTooLong, deepLeaf.cert}},
		{"deeper than the depth, intermediate in the bundle", withInter, 1, chain(deepLeaf), Result{Failed, ReasonChainTooLong, deepLeaf.cert}},
		{"depth below 1 is 1", rootOnly, 0, chain(deepLeaf, inter), Result{Failed, ReasonChainTooLong, deepLeaf.cert}},
		{"intermediate missing", rootOnly, 2, chain(deepLeaf), Result{Failed, ReasonUnknownIssuer, deepLeaf.cert}},
		{"no authority", nil, 1, chain(leaf), Result{Failed, ReasonNoAuthority, leaf.cert}},
		{"none", rootOnly, 1, nil, Result{Status: None}},
		{"signed by the root", rootOnly, 1, chain(leaf), Result{Success, "", leaf.cert}},
		{"within depth 2, intermediate sent", rootOnly, 2, chain(deepLeaf, inter), Result{Success, "", deepLeaf.cert}},
		{"within depth 2, intermediate in the bundle", withInter, 2, chain(deepLeaf), Result{Success, "", deepLeaf.cert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Verify(tc.a, tc.depth, tc.peer, now); got != tc.want {
				t.Errorf("Verify = %v %q, want %v %q", got.Status, got.Reason, tc.want.Status, tc.want.Reason)
			}
		})
	}

	t.Run("revocation", func(t *testing.T) {
		revokedLeaf := mk(t, "revoked", root, false, nil)
		revokedInter := mk(t, "inter2", root, true, nil)
		underRevoked := mk(t, "client", revokedInter, false, nil)
		rootCRL := crl(t, root, now.Add(time.Hour), revokedLeaf, revokedInter)
		for _, tc := range []struct {
			name  string
			crl   []byte
			depth int
			peer  []*x509.Certificate
			want  string // "" success
		}{
			{"a revoked certificate", rootCRL, 1, chain(revokedLeaf), ReasonRevoked},
			{"under a revoked intermediate", append(append([]byte{}, rootCRL...), crl(t, revokedInter, now.Add(time.Hour))...), 2, chain(underRevoked, revokedInter), ReasonRevoked},
			{"an issuer without a CRL", rootCRL, 2, chain(deepLeaf, inter), ReasonNoCRL},
			{"an expired CRL", crl(t, root, now.Add(-time.Minute)), 1, chain(leaf), ReasonCRLExpired},
			{"not revoked", rootCRL, 1, chain(leaf), ""},
			{"not revoked, every level covered", append(append([]byte{}, rootCRL...), crl(t, inter, now.Add(time.Hour))...), 2, chain(deepLeaf, inter), ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := mustAuthority(t, pemOf(root, revokedInter, inter), tc.crl)
				got := Verify(a, tc.depth, tc.peer, now)
				if tc.want == "" && got.Status != Success || tc.want != "" && (got.Status != Failed || got.Reason != tc.want) {
					t.Errorf("Verify = %v %q, want %q", got.Status, got.Reason, tc.want)
				}
			})
		}
	})
}

func mustAuthority(t *testing.T, caPEM, crlPEM []byte) *Authority {
	t.Helper()
	a, err := ParseAuthority(caPEM, crlPEM)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestParseAuthority: a bundle without an anchor, junk, and a CRL signed by no certificate of
// the bundle are refused with the part named.
func TestParseAuthority(t *testing.T) {
	root := mk(t, "root", nil, true, nil)
	other := mk(t, "other", nil, true, nil)
	inter := mk(t, "inter", root, true, nil)
	for _, tc := range []struct {
		name    string
		ca, crl []byte
		want    string // error substring; "" none
	}{
		{"a CRL of another CA", pemOf(root), crl(t, other, now.Add(time.Hour)), "ca.crl: list 0 (issuer CN=other) is not signed by a certificate of ca.crt"},
		{"an intermediate alone", pemOf(inter), nil, "ca.crt holds no self-signed CA certificate"},
		{"no PEM", []byte("junk"), nil, "ca.crt holds no PEM certificate"},
		{"a CRL that is not PEM", pemOf(root), []byte("junk"), "ca.crl holds no PEM X509 CRL"},
		{"a bad certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), nil, "ca.crt: certificate 0"},
		{"a root", pemOf(root), nil, ""},
		{"a root, an intermediate and a CRL", pemOf(root, inter), crl(t, root, now.Add(time.Hour)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAuthority(tc.ca, tc.crl)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDecide: what a request gets under each mode for each result; the CN pattern is matched
// on a verified certificate only.
func TestDecide(t *testing.T) {
	root := mk(t, "root", nil, true, nil)
	partner := mk(t, "partner", root, false, nil).cert
	none, ok, bad := Result{Status: None}, Result{Status: Success, Leaf: partner}, Result{Status: Failed, Reason: ReasonUnknownIssuer, Leaf: partner}
	cn := regexp.MustCompile("CN=partner$")
	for _, tc := range []struct {
		mode Mode
		cn   *regexp.Regexp
		r    Result
		want Outcome
	}{
		{ModeOn, nil, none, RefuseNoCertificate},
		{ModeOn, nil, bad, RefuseBadCertificate},
		{ModeOn, nil, ok, Allow},
		{ModeOptional, nil, bad, RefuseBadCertificate},
		{ModeOptional, nil, none, Allow},
		{ModeOptionalNoCA, nil, bad, Allow},
		{ModeOptionalNoCA, cn, bad, RefuseSubject}, // the CN of an unverified certificate is anyone's
		{ModeOptional, cn, none, RefuseSubject},
		{ModeOff, cn, none, RefuseSubject},
		{ModeOn, regexp.MustCompile("CN=other"), ok, RefuseSubject},
		{ModeOn, cn, ok, Allow},
	} {
		if got := (Policy{Mode: tc.mode, MatchCN: tc.cn}).Decide(tc.r); got != tc.want {
			t.Errorf("%s cn=%v %v: %v, want %v", tc.mode, tc.cn, tc.r.Status, got, tc.want)
		}
	}
}

// TestHeaderValues: a subject with CR, LF or bytes over 0x7e never splits a header; the
// escaped PEM reads back with both a path and a query unescaper.
func TestHeaderValues(t *testing.T) {
	root := mk(t, "root", nil, true, nil)
	evil := mk(t, "evil\r\nX-Injected: 1\x00é", root, false, func(c *x509.Certificate) { c.Subject.Organization = []string{"A+B, Inc"} }).cert
	if got, want := SubjectDN(evil), `CN=evil\0D\0AX-Injected: 1\00\C3\A9,O=A\+B\, Inc`; got != want {
		t.Errorf("SubjectDN = %q, want %q", got, want)
	}
	if got := IssuerDN(evil); got != "CN=root" {
		t.Errorf("IssuerDN = %q", got)
	}
	e := EscapedPEM(evil)
	if strings.ContainsAny(e, "\r\n +/=") {
		t.Errorf("EscapedPEM left a byte unescaped: %q", e)
	}
	for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		p, err := unescape(e)
		if err != nil {
			t.Fatal(err)
		}
		if blk, _ := pem.Decode([]byte(p)); blk == nil || string(blk.Bytes) != string(evil.Raw) {
			t.Errorf("unescaped %q is not the certificate", p)
		}
	}
	for r, want := range map[Result]string{{Status: None}: "NONE", {Status: Success}: "SUCCESS", {Status: Failed, Reason: ReasonExpired}: "FAILED:certificate has expired"} {
		if got := r.VerifyValue(); got != want {
			t.Errorf("VerifyValue = %q, want %q", got, want)
		}
	}
}
