package table

import (
	"maps"

	"github.com/metalgate/metalgate/proxy/clientcert"
)

// GatewayClientAuth is the client-certificate validation of a Gateway port (the Gateway's
// spec.tls.frontend: its perPort entry for the port, else its default), for every HTTPS
// listener on the port: the TLS handshake asks each client for a certificate and verifies it
// against Authority (proxy/clientcert) within Depth.
type GatewayClientAuth struct {
	// Authority is the CA bundle of the usable caCertificateRefs; nil when Refuse is set.
	Authority *clientcert.Authority
	// Depth is the most certificates a chain may have above the client's (its anchor
	// included).
	Depth int
	// InsecureFallback (mode AllowInsecureFallback) lets a client through without a
	// certificate or with one that does not verify; the backend is told the result
	// (ssl-client-verify). Otherwise (AllowValidOnly) such a handshake fails.
	InsecureFallback bool
	// Refuse, when set, says why no caCertificateRef can be used: every handshake on the
	// port fails (the listeners are not accepted, NoValidCACertificate); never served
	// without the validation the Gateway asks for.
	Refuse string
}

// GatewayDepth is the chain depth of a Gateway's client-certificate validation (Gateway API
// leaves it to implementations): the client's certificate, up to three intermediates, and
// an anchor of the bundle.
const GatewayDepth = 4

// FrontendProblem is what is wrong with the client-certificate validation of an HTTPS
// listener's port (GatewayStatus.FrontendProblems): the listener's ResolvedRefs is False
// with Reason (InvalidCACertificateRef, InvalidCACertificateKind or RefNotPermitted) and
// Message; with NoValidCA (no caCertificateRef usable) its Accepted is False too
// (NoValidCACertificate) and it is not served.
type FrontendProblem struct {
	Reason    string
	Message   string
	NoValidCA bool
}

// SetGatewayClientAuth makes the HTTPS listeners on port validate client certificates by
// ca (nil: they do not ask for certificates).
func (b *Builder) SetGatewayClientAuth(port int32, ca *GatewayClientAuth) {
	g := b.gatewayIndex()
	if ca == nil {
		delete(g.clientAuth, port)
		return
	}
	if g.clientAuth == nil {
		g.clientAuth = map[int32]*GatewayClientAuth{}
	}
	g.clientAuth[port] = ca
}

// GatewayClientAuth returns the client-certificate validation of a Gateway table's local
// port, nil for none (and for an Ingress table): a port's validation never applies to
// another port.
func (t *Table) GatewayClientAuth(port int32) *GatewayClientAuth {
	if t.gateway == nil {
		return nil
	}
	return t.gateway.clientAuth[port]
}

// GatewayClientAuths lists every port's validation, for debugging and tests.
func (t *Table) GatewayClientAuths() map[int32]*GatewayClientAuth {
	if t.gateway == nil {
		return nil
	}
	return maps.Clone(t.gateway.clientAuth)
}
