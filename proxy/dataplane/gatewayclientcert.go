package dataplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/metalgate/metalgate/proxy/clientcert"
	"github.com/metalgate/metalgate/proxy/table"
)

// Client-certificate validation of a Gateway's HTTPS listeners (the table's
// GatewayClientAuth, by the local port a connection came to; proxy/gatewayapi frontend.go
// translates spec.tls.frontend):
//
//   - a port without validation never asks for a certificate, and one port's validation
//     never applies to another;
//   - AllowValidOnly: the handshake requires a certificate and verifies it
//     (proxy/clientcert: the port's CA bundle, the depth, validity, clientAuth usage); none,
//     or one that does not verify, fails the handshake (the client sees a TLS alert, never
//     an HTTP answer);
//   - AllowInsecureFallback: a certificate is asked for and the handshake goes on without
//     one or with one that does not verify;
//   - a port whose validation has no usable CA (Refuse) fails every handshake;
//   - each request is judged again by the port's validation of the moment: a connection
//     opened before a CA rotation (or before the port asked for certificates) whose
//     certificate does not verify now gets 421, so the client retries on a new connection
//     and handshake. The backend of an allowed request is told the result
//     (ssl-client-verify, ssl-client-subject-dn, ssl-client-issuer-dn; a client's own
//     headers of those names are dropped, headers.go).

// errClientCertificate starts the error of a handshake refused for its client certificate.
var errClientCertificate = errors.New("client certificate refused")

// gatewayClientAuthConfig is clientAuthConfig for a Gateway table t: base asking for (and,
// with AllowValidOnly, requiring and verifying) a client certificate on a port with
// validation; base itself (nil) on a port without.
func (s *Server) gatewayClientAuthConfig(base *tls.Config, t *table.Table, hello *tls.ClientHelloInfo) (*tls.Config, error) {
	port := localPort(hello.Conn)
	ca := t.GatewayClientAuth(port)
	if ca == nil {
		return nil, nil
	}
	if ca.Refuse != "" {
		s.limitHit(limitClientCertificate)
		return nil, fmt.Errorf("%w: port %d has no usable client-certificate validation: %s", errClientCertificate, port, ca.Refuse)
	}
	c := base.Clone()
	c.GetConfigForClient = nil
	c.ClientCAs = ca.Authority.Names()
	if ca.InsecureFallback {
		c.ClientAuth = tls.RequestClientCert
		return c, nil
	}
	c.ClientAuth = tls.RequireAnyClientCert
	// VerifyConnection, not VerifyPeerCertificate: it runs on resumed sessions too, so a
	// session ticket from a handshake on another port (or before a CA rotation) is judged
	// by this port's validation of the moment.
	counted := base.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if res := clientcert.Verify(ca.Authority, ca.Depth, cs.PeerCertificates, time.Now()); res.Status != clientcert.Success {
			s.limitHit(limitClientCertificate)
			return fmt.Errorf("%w: port %d: %s", errClientCertificate, port, res.VerifyValue())
		}
		if counted != nil {
			return counted(cs)
		}
		return nil
	}
	return c, nil
}

// gatewayClientAuth judges r, on a Gateway table t, by the client-certificate validation of
// the port it came to. It returns false when it answered the request.
func (s *Server) gatewayClientAuth(w *responseWriter, r *http.Request, t *table.Table, a *attempt) bool {
	if r.TLS == nil {
		return true
	}
	ca := t.GatewayClientAuth(requestPort(r))
	if ca == nil {
		return true
	}
	var res clientcert.Result
	ok := ca.Refuse == ""
	if ok {
		res = clientcert.Verify(ca.Authority, ca.Depth, r.TLS.PeerCertificates, time.Now())
		ok = ca.InsecureFallback || res.Status == clientcert.Success
	}
	if !ok {
		s.limitHit(limitMisdirected)
		http.Error(w, "misdirected request: this connection's client certificate does not pass the port's client-certificate validation; retry on a new connection", http.StatusMisdirectedRequest)
		return false
	}
	a.clientCert = &clientCertInfo{verify: res.VerifyValue(), subject: clientcert.SubjectDN(res.Leaf), issuer: clientcert.IssuerDN(res.Leaf)}
	return true
}

// requestPort is the local port r came to (the listener's), 0 when unknown.
func requestPort(r *http.Request) int32 {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	ap, err := netip.ParseAddrPort(addrString(la))
	if err != nil {
		return 0
	}
	return int32(ap.Port())
}
