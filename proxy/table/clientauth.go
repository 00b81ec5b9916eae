package table

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/clientcert"
)

// ClientAuth is a host's client-certificate authentication (an Ingress's auth-tls-*
// annotations): the TLS handshake for the host's SNI name asks for a certificate when
// Policy.Mode says so, and every request for the host is judged by Policy against
// Authority (proxy/clientcert). It is per host, as nginx's ssl_verify_client is per server:
// the first Ingress of the host's namespace that asks for it sets it, and it covers every
// route of the host.
type ClientAuth struct {
	Authority *clientcert.Authority // nil when Refuse is set
	Policy    clientcert.Policy
	// ErrorPage, when set, is where a request refused for its certificate (400) is
	// redirected instead (302), as ingress-nginx's auth-tls-error-page.
	ErrorPage string
	// PassCertificate sends the client's certificate to the backend (ssl-client-cert).
	PassCertificate bool
	// Refuse, when set, says why the settings cannot be used (a Secret missing, of another
	// namespace, without a usable ca.crt): every request for the host is refused (403), as
	// ingress-nginx refuses a server whose CA Secret is invalid; never served unverified.
	Refuse string
	// ID identifies the settings by everything that makes them differ (namespace, Secret
	// version, policy, error page, pass): a request may use a connection whose SNI name's
	// ClientAuth has the same ID only.
	ID string
}

// ClientAuthRef is client-certificate authentication as an Ingress writes it;
// Builder.ClientAuth resolves it.
type ClientAuthRef struct {
	Key       string // the annotation that names the Secret (or the first read), for problems
	Secret    string // "namespace/name" or "name"; "" when none is named
	Policy    clientcert.Policy
	ErrorPage string
	Pass      bool
}

// ClientAuth resolves ref for src: the CA bundle (ca.crt, and ca.crl when present) of a
// Secret of src's own namespace. A Secret that cannot be used gives a ClientAuth that
// refuses (Refuse) and a Problem naming ref.Key.
func (b *Builder) ClientAuth(src SourceRef, ref ClientAuthRef) *ClientAuth {
	ca := &ClientAuth{Policy: ref.Policy, ErrorPage: ref.ErrorPage, PassCertificate: ref.Pass}
	secret := ""
	done := func() *ClientAuth {
		cn := ""
		if ca.Policy.MatchCN != nil {
			cn = ca.Policy.MatchCN.String()
		}
		ca.ID = fmt.Sprintf("clientauth(ns=%s,secret=%s,mode=%s,depth=%d,cn=%q,error-page=%q,pass=%t,refuse=%q)",
			src.Namespace, secret, ca.Policy.Mode, ca.Policy.Depth, cn, ca.ErrorPage, ca.PassCertificate, ca.Refuse)
		return ca
	}
	fail := func(format string, args ...any) *ClientAuth {
		ca.Refuse = fmt.Sprintf(format, args...)
		b.Problem(src, ReasonInvalidAnnotation, "%s: %s; every request is refused (403) until it is fixed (on every route of the Ingress's hosts)", ref.Key, ca.Refuse)
		return done()
	}
	if ref.Secret == "" {
		return fail("no Secret with the CA certificates is named (auth-tls-secret)")
	}
	ns, name, ok := strings.Cut(ref.Secret, "/")
	if !ok {
		ns, name = src.Namespace, ref.Secret
	}
	secret = ns + "/" + name
	if ns != src.Namespace {
		return fail("auth-tls-secret %s/%s is in another namespace; only Secrets of namespace %s are read", ns, name, src.Namespace)
	}
	sec := b.secrets[types.NamespacedName{Namespace: ns, Name: name}]
	if sec == nil {
		return fail("Secret %s/%s not found", ns, name)
	}
	secret = secretVersion(sec, "ca.crt", "ca.crl")
	auth, err := clientcert.ParseAuthority(sec.Data["ca.crt"], sec.Data["ca.crl"])
	if err != nil {
		return fail("Secret %s/%s: %v", ns, name, err)
	}
	ca.Authority = auth
	return done()
}

// SetClientAuth gives host (owned by ns when new) its client-certificate authentication
// unless it has one; it returns the one the host has.
func (b *Builder) SetClientAuth(host, ns string, ca *ClientAuth) *ClientAuth {
	hr := b.hostRules(host, ns)
	if hr.clientAuth == nil {
		hr.clientAuth = ca
	}
	return hr.clientAuth
}

// ClientAuth returns the client-certificate authentication of an SNI server name or a Host
// (port and case ignored), nil for none: the exact host's, else, when the exact host has
// none, the wildcard's one label up of the same owner (as Certificate).
func (t *Table) ClientAuth(name string) *ClientAuth {
	host := normalizeHost(name)
	if host == "" {
		return nil
	}
	hr := t.exact[host]
	if hr != nil && hr.clientAuth != nil {
		return hr.clientAuth
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if wr := t.wildcard[host[i+1:]]; wr != nil && (hr == nil || wr.namespace == hr.namespace) {
			return wr.clientAuth
		}
	}
	return nil
}

// ClientAuthFor returns the client-certificate authentication a request for host that took
// route must pass: that of the host the route is of (a wildcard route taken by an exact host
// of the same namespace is the wildcard's), else, for a route without a host, the request
// host's own. nil: none.
func (t *Table) ClientAuthFor(host string, route *Route) *ClientAuth {
	if route != nil && route.Host != "" && !route.Source.IsGateway() {
		var hr *hostRules
		if strings.HasPrefix(route.Host, "*.") {
			hr = t.wildcard[route.Host[2:]]
		} else {
			hr = t.exact[route.Host]
		}
		if hr != nil && hr.clientAuth != nil {
			return hr.clientAuth
		}
	}
	return t.ClientAuth(host)
}
