package table

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The route kinds a Gateway table serves (RouteStatus.Kind, Route.Source.Kind).
const (
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
	KindTLSRoute  = "TLSRoute"
)

// RequestMatch is what a request must carry besides its host and path to take a route: the
// Gateway API method, header and query parameter matches. Ingress routes have none.
type RequestMatch struct {
	Method  string       // "" for any
	Headers []ValueMatch // names canonical; matched against the request's first value
	Query   []ValueMatch // names as written (case-sensitive); matched against the first value
}

// ValueMatch is one header or query parameter match: the value equals Value, or, with Regex,
// Regex matches all of it.
type ValueMatch struct {
	Name, Value string
	Regex       *regexp.Regexp // RegularExpression matches, Anchored at both ends
}

func (v *ValueMatch) matches(vs []string) bool {
	switch {
	case len(vs) == 0:
		return false
	case v.Regex != nil:
		return v.Regex.MatchString(vs[0])
	}
	return vs[0] == v.Value
}

func (m *RequestMatch) matches(r *http.Request, q url.Values) bool {
	if m == nil {
		return true
	}
	if m.Method != "" && r.Method != m.Method {
		return false
	}
	for i := range m.Headers {
		if !m.Headers[i].matches(r.Header.Values(m.Headers[i].Name)) {
			return false
		}
	}
	for i := range m.Query {
		if !m.Query[i].matches(q[m.Query[i].Name]) {
			return false
		}
	}
	return true
}

// GatewayStatus is what a Gateway table computed for the Gateway's status writers (the
// controller, or the proxy): a pure result of gatewayapi.Translate, written by nobody here.
type GatewayStatus struct {
	// AttachedRoutes counts, per listener name (every listener present), the HTTPRoutes
	// attached to it: a parentRef selects it, its allowedRoutes admit the route, and their
	// hostnames intersect.
	AttachedRoutes map[string]int32
	// Routes holds the parent statuses metalgate owns on each HTTPRoute with a parentRef
	// naming the Gateway, sorted by namespace/name.
	Routes []RouteStatus
	// CertificateProblems says, per HTTPS listener name, why it has no certificate (its
	// certificateRefs name no usable Secret); a listener served with one is not listed.
	CertificateProblems map[string]string
	// FrontendProblems says, per HTTPS listener name, what is wrong with its port's
	// client-certificate validation (spec.tls.frontend); a listener whose port has none,
	// or one whose every caCertificateRef resolved, is not listed.
	FrontendProblems map[string]FrontendProblem
	// BackendTLSPolicies are the conditions of the BackendTLSPolicies that target the
	// Gateway's backends, for the Gateway as their ancestor, sorted by namespace/name.
	BackendTLSPolicies []PolicyStatus
	// BackendClientCertificate says why the Gateway's spec.tls.backend.clientCertificateRef
	// cannot be used (the reason of the Gateway's ResolvedRefs condition); nil when it can,
	// or none is set.
	BackendClientCertificate *RefProblem
}

// RouteStatus is one HTTPRoute's parent statuses for the table's Gateway: one per parentRef
// naming it, with the Accepted and ResolvedRefs conditions (observedGeneration the route's,
// lastTransitionTime left for the writer).
type RouteStatus struct {
	Kind    string // KindHTTPRoute or KindGRPCRoute
	Route   types.NamespacedName
	Parents []gatewayv1.RouteParentStatus
}

// gatewayTable routes a Gateway's requests: by the port they came in on, then the listener
// with the most specific hostname matching the host, then the route hostname (exact, longest
// wildcard, none), then the first route in Gateway API precedence whose matches hold.
type gatewayTable struct {
	ports map[int32][]*gwListener
	// clientAuth is the client-certificate validation by port (gatewayclientauth.go).
	clientAuth map[int32]*GatewayClientAuth
}

type gwListener struct {
	name     string
	hostname string               // "" for any host
	hosts    map[string][]gwEntry // by effective hostname: exact, "*.suffix", or "" for any
	// https: an HTTPS listener (TLS terminated here). certs are its certificates in
	// certificateRefs order, each with its Secret (the expiry metric's label); none when its
	// certificateRefs resolve to none (then its hosts get no TLS handshake at all). A client
	// gets the first it can use (an RSA certificate after an ECDSA one, for clients without
	// ECDSA); the first identifies the listener.
	https bool
	certs []listenerCert
	// passthrough: a TLS listener in mode Passthrough. Its routes (TLSRoutes) are taken by
	// GatewayPassthrough, by server name, never by Match.
	passthrough bool
}

// listenerCert is one certificate of a Gateway listener or an Ingress host, and its Secret
// ("namespace/name").
type listenerCert struct {
	cert   *tls.Certificate
	secret string
}

type gwEntry struct {
	r   *Route
	seq int // route order (oldest first, then namespace/name), rule, match
}

// Match returns the route of a Gateway table for request r that arrived on local port port
// (the listener's), or nil (404). Ingress tables have no Gateway routes: nil. Lookup never
// returns a Gateway route: it knows neither the port nor the request's method, headers and
// query.
func (t *Table) Match(port int32, r *http.Request) *Route {
	if t.gateway == nil {
		return nil
	}
	host := normalizeHost(r.Host)
	for _, l := range t.gateway.ports[port] {
		if l.passthrough || !HostnameMatches(l.hostname, host) {
			continue
		}
		entries := l.entries(host)
		path := r.URL.Path
		if path == "" {
			path = "/"
		}
		q := r.URL.Query()
		for _, e := range entries {
			if !gwPathMatches(e.r, path) {
				continue
			}
			if e.r.Match.matches(r, q) {
				return e.r
			}
		}
		return nil // the most specific listener answers alone
	}
	return nil
}

// entries are the routes of listener l for host: those of the exact host, else of the most
// specific wildcard covering it, else those for any host.
func (l *gwListener) entries(host string) []gwEntry {
	entries, ok := l.hosts[host]
	for i := 0; !ok && i < len(host); i++ {
		if host[i] == '.' {
			entries, ok = l.hosts["*"+host[i:]]
		}
	}
	if !ok {
		entries = l.hosts[""]
	}
	return entries
}

// gwPathMatches says whether path takes route r of a Gateway table: an Exact path, an
// HTTPRoute's RegularExpression or a GRPCRoute's method expression (each Anchored, over the
// whole path), or a path prefix by elements.
func gwPathMatches(r *Route, path string) bool {
	switch r.PathType {
	case "Exact":
		return r.Path == path
	case PathRegex, GRPCMethodRegex:
		return r.Regex.MatchString(path)
	}
	return prefixMatch(r.Path, path)
}

// ListenerRoute is a route of a Gateway table with where it is served: the listener's port
// and name.
type ListenerRoute struct {
	Port     int32
	Listener string
	Route    *Route
}

// ListenerRoutes lists a Gateway table's routes where Match finds them, for debugging and
// tests: by port, then listener in the order Match tries them (most specific hostname first),
// then effective host, then precedence. An Ingress table has none.
func (t *Table) ListenerRoutes() []ListenerRoute {
	if t.gateway == nil {
		return nil
	}
	ports := make([]int32, 0, len(t.gateway.ports))
	for p := range t.gateway.ports {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	var out []ListenerRoute
	for _, p := range ports {
		for _, l := range t.gateway.ports[p] {
			hosts := make([]string, 0, len(l.hosts))
			for h := range l.hosts {
				hosts = append(hosts, h)
			}
			slices.Sort(hosts)
			for _, h := range hosts {
				for _, e := range l.hosts[h] {
					out = append(out, ListenerRoute{Port: p, Listener: l.name, Route: e.r})
				}
			}
		}
	}
	return out
}

// GatewayCertificate returns the certificate of a Gateway table's HTTPS listener on local port
// port for TLS server name serverName: the listener whose hostname covers it most
// specifically, as Match picks listeners; with no server name, the listener without a
// hostname. nil when that listener is not HTTPS or has no certificate, or none covers the
// name: the handshake then fails — a Gateway never answers with a certificate of another
// listener, nor with a default one.
//
// It is the listener's first certificate, which identifies the listener (a request may use a
// connection only if its host gets the same one); the handshake picks among all of them with
// GatewayHandshakeCertificate.
func (t *Table) GatewayCertificate(port int32, serverName string) *tls.Certificate {
	if l := t.httpsListener(port, serverName); l != nil && len(l.certs) > 0 {
		return l.certs[0].cert
	}
	return nil
}

// GatewayHandshakeCertificate is the certificate a TLS handshake on local port port gets: of
// the listener GatewayCertificate finds for the hello's server name, the first of its
// certificates (in certificateRefs order) that the client can use, or the first one when it
// can use none (the handshake then fails as it would with that one alone). nil as for
// GatewayCertificate.
func (t *Table) GatewayHandshakeCertificate(port int32, hello *tls.ClientHelloInfo) *tls.Certificate {
	l := t.httpsListener(port, hello.ServerName)
	if l == nil || len(l.certs) == 0 {
		return nil
	}
	if len(l.certs) > 1 {
		for _, c := range l.certs {
			if hello.SupportsCertificate(c.cert) == nil {
				return c.cert
			}
		}
	}
	return l.certs[0].cert
}

// httpsListener is the HTTPS listener on port that covers serverName (GatewayCertificate),
// nil when there is none or the covering listener is not one.
func (t *Table) httpsListener(port int32, serverName string) *gwListener {
	if t.gateway == nil {
		return nil
	}
	host := normalizeHost(serverName)
	for _, l := range t.gateway.ports[port] {
		if host == "" && l.hostname != "" || !HostnameMatches(l.hostname, host) {
			continue
		}
		if !l.https || l.passthrough {
			return nil
		}
		return l
	}
	return nil
}

// HostnameMatches reports whether a listener or route hostname ("" any, "*.s" any host under
// s by one label or more, or exact) covers host.
func HostnameMatches(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1
	}
	return pattern == host
}

// gwBefore is Gateway API's match precedence: an Exact path, the longest prefix, a method,
// the most header matches, the most query matches, then the older route, namespace/name,
// the first rule and match.
func gwBefore(a, c gwEntry) bool {
	ra, rc := a.r, c.r
	if ae, ce := ra.PathType == "Exact", rc.PathType == "Exact"; ae != ce {
		return ae
	}
	// RegularExpression paths (their ranking is left to implementations) come after Exact
	// and before every prefix, the longer expression first.
	if ax, cx := ra.PathType == PathRegex, rc.PathType == PathRegex; ax != cx {
		return ax
	}
	if len(ra.Path) != len(rc.Path) {
		return len(ra.Path) > len(rc.Path)
	}
	// A GRPCRoute's method expression (its Path "/") is more specific than no method match.
	if ax, cx := ra.PathType == GRPCMethodRegex, rc.PathType == GRPCMethodRegex; ax != cx {
		return ax
	}
	ma, mc := ra.Match, rc.Match
	if (ma.Method != "") != (mc.Method != "") {
		return ma.Method != ""
	}
	if len(ma.Headers) != len(mc.Headers) {
		return len(ma.Headers) > len(mc.Headers)
	}
	if len(ma.Query) != len(mc.Query) {
		return len(ma.Query) > len(mc.Query)
	}
	return a.seq < c.seq
}

// PathRegex is the PathType of an HTTPRoute's RegularExpression path match: Route.Regex,
// Anchored, matches the whole path.
const PathRegex = "RegularExpression"

// Anchored compiles a Gateway API RegularExpression (RE2, Go's regexp syntax) so that it
// matches a whole value, never a part of one: "/api" does not take "/api/v1", nor "a" "bad".
func Anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// GRPCMethodRegex marks the routes whose Path is matched by Route.Regex (a method match other
// than an exact service, with or without an exact method). They rank with path prefixes (a
// service prefix before any of them), unlike an HTTPRoute's RegularExpression paths.
const GRPCMethodRegex = "GRPCMethod"

// specificity orders listener hostnames: exact first, then wildcards longest first, then any.
func specificity(h string) int {
	switch {
	case h == "":
		return -1
	case strings.HasPrefix(h, "*."):
		return len(h)
	}
	return 1 << 20
}
