package dataplane

import (
	"crypto/tls"
	"net/http"
	"strconv"
	"time"

	"github.com/metalgate/metalgate/proxy/clientcert"
	"github.com/metalgate/metalgate/proxy/table"
)

// Client-certificate authentication (an Ingress host's table.ClientAuth; the decisions are
// proxy/clientcert's):
//
//   - the handshake asks for a certificate only when the SNI name's host has a ClientAuth
//     whose mode asks for one (clientAuthConfig); the certificate is not judged there: the
//     handshake completes, as nginx's does, and each request is judged;
//   - a request is judged by the ClientAuth of its route's host (table.ClientAuthFor). A
//     request whose host has one must come over a connection whose SNI name has the same
//     (the same ID), else 421: a connection made for another name asked for no certificate,
//     or for one of another CA (nginx answers 421 too);
//   - on: no certificate, or one that does not verify → 400; optional: one that does not
//     verify → 400; optional_no_ca: anything goes, the backend is told; with
//     auth-tls-error-page the 400 is a 302 there instead; a CN pattern that does not match
//     a verified certificate → 403; a ClientAuth that cannot be used (Refuse) → 403;
//   - plain HTTP carries no certificate: it is judged as a connection without one, but a
//     route that redirects plain HTTP to HTTPS still redirects (nothing is forwarded);
//   - the backend of an allowed request gets ssl-client-verify, ssl-client-subject-dn and
//     ssl-client-issuer-dn (ingress-nginx sends those whenever a host has a CA), and
//     ssl-client-cert with PassCertificate. A client's own headers of those names are
//     always dropped (headers.go).

// clientAuthConfig returns the GetConfigForClient of base: for an SNI name whose host asks
// for client certificates, base asking for one (any, verified per request) and naming the
// host's CAs; otherwise base itself (nil). On a Gateway, always a copy of base for the port
// the connection came to: its client-certificate validation, and session tickets of that
// port alone.
func (s *Server) clientAuthConfig(base *tls.Config) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		r := s.current.Load()
		if r != nil && r.table.Gateway != nil {
			c, err := s.gatewayClientAuthConfig(base, r.table, hello) // gatewayclientcert.go
			if err != nil {
				return nil, err
			}
			if c == nil {
				c = base.Clone()
				c.GetConfigForClient = nil
			}
			// A Gateway's session resumes only on the port it was made on (sessions.go).
			s.sessionTickets(c, strconv.Itoa(int(localPort(hello.Conn))))
			return c, nil
		}
		if r == nil || hello.ServerName == "" {
			return nil, nil
		}
		ca := r.table.ClientAuth(hello.ServerName)
		if ca == nil || ca.Refuse != "" || !ca.Policy.Mode.RequestsCertificate() {
			return nil, nil
		}
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientAuth = tls.RequestClientCert
		c.ClientCAs = ca.Authority.Names()
		return c, nil
	}
}

// clientCertInfo is what the backend of a request is told about the client's certificate.
type clientCertInfo struct {
	verify, subject, issuer, cert string
}

// emit adds the headers (those with a value: nginx sends none for an empty variable).
func (c *clientCertInfo) emit(add func(k, v string)) {
	if c.cert != "" {
		add(clientcert.HeaderCert, c.cert)
	}
	add(clientcert.HeaderVerify, c.verify)
	if c.subject != "" {
		add(clientcert.HeaderSubjectDN, c.subject)
	}
	if c.issuer != "" {
		add(clientcert.HeaderIssuerDN, c.issuer)
	}
}

// clientAuth judges r (routed to route) by its host's client-certificate authentication. It
// returns false when it answered the request.
func (s *Server) clientAuth(w *responseWriter, r *http.Request, t *table.Table, route *table.Route, a *attempt) bool {
	if t.Gateway != nil {
		return s.gatewayClientAuth(w, r, t, a) // gatewayclientcert.go
	}
	ca := t.ClientAuthFor(r.Host, route)
	if ca == nil {
		return true
	}
	if ca.Refuse != "" {
		s.limitHit(limitRefusedRoute) // a protection that cannot be enforced, as Policy.Refuse
		http.Error(w, "forbidden", http.StatusForbidden)
		return false
	}
	var res clientcert.Result
	if r.TLS != nil {
		if sni := t.ClientAuth(r.TLS.ServerName); sni == nil || sni.ID != ca.ID {
			s.limitHit(limitMisdirected)
			http.Error(w, "misdirected request: this host needs a client certificate the TLS server name's handshake did not ask for", http.StatusMisdirectedRequest)
			return false
		}
		res = clientcert.Verify(ca.Authority, ca.Policy.Depth, r.TLS.PeerCertificates, time.Now())
	}
	switch out := ca.Policy.Decide(res); out {
	case clientcert.Allow:
		info := &clientCertInfo{verify: res.VerifyValue(), subject: clientcert.SubjectDN(res.Leaf), issuer: clientcert.IssuerDN(res.Leaf)}
		if ca.PassCertificate {
			info.cert = clientcert.EscapedPEM(res.Leaf)
		}
		a.clientCert = info
		return true
	case clientcert.RefuseSubject:
		s.limitHit(limitClientCertificate)
		http.Error(w, "client certificate unauthorized", http.StatusForbidden)
		return false
	default:
		if r.TLS == nil && s.redirectsToHTTPS(r, route, a) {
			return true // answer redirects; nothing is forwarded
		}
		s.limitHit(limitClientCertificate)
		if ca.ErrorPage != "" {
			http.Redirect(w, r, ca.ErrorPage, http.StatusFound)
			return false
		}
		msg := "The SSL certificate error"
		if out == clientcert.RefuseNoCertificate {
			msg = "No required SSL certificate was sent"
		}
		http.Error(w, msg, http.StatusBadRequest)
		return false
	}
}
