package clientcert

import (
	"errors"
	"regexp"
	"strings"
)

// Mode is how a host asks for client certificates: ingress-nginx's auth-tls-verify-client
// values (nginx's ssl_verify_client).
type Mode string

const (
	// ModeOn: a certificate that verifies is required.
	ModeOn Mode = "on"
	// ModeOptional: a certificate is asked for; none is accepted, one that does not verify
	// is not.
	ModeOptional Mode = "optional"
	// ModeOptionalNoCA: a certificate is asked for and accepted whether it verifies or not;
	// the backend is told the result (ssl-client-verify) and decides.
	ModeOptionalNoCA Mode = "optional_no_ca"
	// ModeOff: no certificate is asked for.
	ModeOff Mode = "off"
)

// ParseMode reads a mode, case-insensitive.
func ParseMode(s string) (Mode, bool) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeOn, ModeOptional, ModeOptionalNoCA, ModeOff:
		return m, true
	}
	return "", false
}

// RequestsCertificate reports whether a TLS handshake asks the client for a certificate.
func (m Mode) RequestsCertificate() bool {
	return m == ModeOn || m == ModeOptional || m == ModeOptionalNoCA
}

// Policy is what a host demands of a client certificate.
type Policy struct {
	Mode Mode
	// Depth is the most certificates a chain may have above the client's (its anchor
	// included); < 1 is DefaultDepth.
	Depth int
	// MatchCN, when set, must match the subject DN (SubjectDN: "CN=client,O=Example") of a
	// certificate that verified; a request without one is refused.
	MatchCN *regexp.Regexp
}

// Outcome is what a request gets for a Result under a Policy.
type Outcome int

const (
	// Allow: the request goes on.
	Allow Outcome = iota
	// RefuseNoCertificate: ModeOn and none was presented (nginx's 496, answered 400).
	RefuseNoCertificate
	// RefuseBadCertificate: one was presented and does not verify under ModeOn or
	// ModeOptional (nginx's 495, answered 400).
	RefuseBadCertificate
	// RefuseSubject: MatchCN does not match (403, as ingress-nginx's auth-tls-match-cn).
	RefuseSubject
)

// Decide says what a request whose connection verified as r gets.
func (p Policy) Decide(r Result) Outcome {
	switch p.Mode {
	case ModeOn:
		switch r.Status {
		case None:
			return RefuseNoCertificate
		case Failed:
			return RefuseBadCertificate
		}
	case ModeOptional:
		if r.Status == Failed {
			return RefuseBadCertificate
		}
	}
	// The subject is matched only on a verified certificate: an unverified one
	// (optional_no_ca) says whatever its maker wrote.
	if p.MatchCN != nil && (r.Status != Success || !p.MatchCN.MatchString(SubjectDN(r.Leaf))) {
		return RefuseSubject
	}
	return Allow
}

// ParseMatchCN compiles an auth-tls-match-cn value: "CN=" then an RE2 regular expression,
// matched (unanchored, as nginx's ~ operator) against the subject DN.
func ParseMatchCN(s string) (*regexp.Regexp, error) {
	if !strings.HasPrefix(s, "CN=") {
		return nil, errNoCN
	}
	return regexp.Compile(s)
}

var errNoCN = errors.New("must start with CN=")
