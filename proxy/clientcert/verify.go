package clientcert

import (
	"crypto/x509"
	"errors"
	"time"
)

// Status is the outcome of verifying what a client presented.
type Status int

const (
	// None: no certificate was presented (or the connection is not TLS).
	None Status = iota
	// Success: the chain verifies to an anchor of the Authority within the depth.
	Success
	// Failed: a certificate was presented and does not verify (Result.Reason says why).
	Failed
)

// Failure reasons: the words OpenSSL uses (X509_verify_cert_error_string), so that a
// backend written for ingress-nginx's "FAILED:<reason>" reads the same text.
const (
	ReasonUnknownIssuer   = "unable to get local issuer certificate"
	ReasonExpired         = "certificate has expired"
	ReasonNotYetValid     = "certificate is not yet valid"
	ReasonPurpose         = "unsupported certificate purpose"
	ReasonChainTooLong    = "certificate chain too long"
	ReasonRevoked         = "certificate revoked"
	ReasonNoCRL           = "unable to get certificate CRL"
	ReasonCRLExpired      = "CRL has expired"
	ReasonInvalidCA       = "invalid CA certificate"
	ReasonVerifyFailed    = "certificate verify failed"
	ReasonNoAuthority     = "no CA to verify against"
	ReasonNameConstraints = "name constraints violation"
)

// Result is what verifying a client's certificates found. Leaf is the client's certificate
// (nil with None), verified or not.
type Result struct {
	Status Status
	Reason string // with Failed
	Leaf   *x509.Certificate
}

// DefaultDepth is the chain depth ingress-nginx allows without auth-tls-verify-depth: the
// client's certificate is signed by an anchor of the bundle itself.
const DefaultDepth = 1

// Verify checks peer, the certificates a client presented (its own first, then the
// intermediates it sent), against a at time now: a chain to an anchor of a through a's and
// the client's intermediates, every certificate valid at now, the client's certificate
// allowed for client authentication (an extended key usage without clientAuth fails), at
// most depth certificates above the client's (depth 1: signed by an anchor; < 1 is
// DefaultDepth), and, when a has CRLs, none of the chain but its anchor revoked (a
// certificate whose issuer has no CRL fails, as nginx's ssl_crl does). a nil means there is
// nothing to verify against: a presented certificate fails.
func Verify(a *Authority, depth int, peer []*x509.Certificate, now time.Time) Result {
	if len(peer) == 0 {
		return Result{Status: None}
	}
	leaf := peer[0]
	fail := func(reason string) Result { return Result{Status: Failed, Reason: reason, Leaf: leaf} }
	if a == nil {
		return fail(ReasonNoAuthority)
	}
	if depth < 1 {
		depth = DefaultDepth
	}
	inter := x509.NewCertPool()
	for _, c := range a.intermediates {
		inter.AddCert(c)
	}
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fail(reason(err, now))
	}
	// The depth counts the certificates above the client's, its anchor included (OpenSSL's
	// verify depth): the shortest chain decides.
	best := chains[0]
	for _, c := range chains[1:] {
		if len(c) < len(best) {
			best = c
		}
	}
	if len(best)-1 > depth {
		return fail(ReasonChainTooLong)
	}
	if a.crls != nil {
		if why := revoked(a, best, now); why != "" {
			return fail(why)
		}
	}
	return Result{Status: Success, Leaf: leaf}
}

// revoked checks every certificate of chain but its anchor against its issuer's CRLs; it
// returns the failure reason, "" when none is revoked.
func revoked(a *Authority, chain []*x509.Certificate, now time.Time) string {
	for i := 0; i+1 < len(chain); i++ {
		c, issuer := chain[i], chain[i+1]
		lists := a.crls[string(issuer.RawSubject)]
		if len(lists) == 0 {
			return ReasonNoCRL
		}
		for _, l := range lists {
			if !l.NextUpdate.IsZero() && now.After(l.NextUpdate) {
				return ReasonCRLExpired
			}
			for _, e := range l.RevokedCertificateEntries {
				if e.SerialNumber != nil && e.SerialNumber.Cmp(c.SerialNumber) == 0 {
					return ReasonRevoked
				}
			}
		}
	}
	return ""
}

// reason maps a verification error to OpenSSL's words.
func reason(err error, now time.Time) string {
	var inv x509.CertificateInvalidError
	if errors.As(err, &inv) {
		switch inv.Reason {
		case x509.Expired:
			if inv.Cert != nil && now.Before(inv.Cert.NotBefore) {
				return ReasonNotYetValid
			}
			return ReasonExpired
		case x509.IncompatibleUsage:
			return ReasonPurpose
		case x509.NotAuthorizedToSign:
			return ReasonInvalidCA
		case x509.TooManyIntermediates:
			return ReasonChainTooLong
		case x509.CANotAuthorizedForThisName, x509.CANotAuthorizedForExtKeyUsage:
			return ReasonNameConstraints
		}
		return ReasonVerifyFailed
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return ReasonUnknownIssuer
	}
	return ReasonVerifyFailed
}
