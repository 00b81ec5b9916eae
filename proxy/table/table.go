package table

import (
	"crypto/tls"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Table is an immutable routing table. A Builder makes one; nothing changes it afterwards, so
// the data plane reads it without locks and swaps a whole new one on every change.
type Table struct {
	// exact and wildcard hold every host an Ingress names (in a rule or under spec.tls), with
	// its owner namespace, its rules and its certificate: a host with no rule is still known.
	exact    map[string]*hostRules // by lower-case host
	wildcard map[string]*hostRules // "*.foo.com" is stored under "foo.com"
	anyHost  *hostRules            // rules without a host, of every namespace: for unknown hosts
	// namespaces holds, per namespace, where its own hosts' unmatched requests go: its
	// host-less rules and its default backend.
	namespaces map[string]*namespaceRules
	// Default serves requests for hosts no Ingress names when no host-less rule matches; nil
	// means 404.
	Default *Route
	// ErrorBackend is the proxy's own default backend (--default-backend-service): it serves
	// the error page of requests that match no route (404), and of the routes whose
	// ErrorPages name no backend of their own. nil: none (the proxy's plain answers).
	ErrorBackend *Backend
	// passthrough holds the TLS passthrough hosts (ssl-passthrough) and their backends.
	passthrough map[string]*Backend
	// gateway holds the routes of a Gateway table (proxy/gatewayapi); Match reads it.
	gateway *gatewayTable
	// Gateway is the status a Gateway table computed (attachedRoutes, route parent
	// statuses); nil for an Ingress table.
	Gateway *GatewayStatus

	// Backends lists every backend the table routes to, sorted by Key.
	Backends []*Backend
	// Ingresses counts the Ingresses the table was built from (owned ones only).
	Ingresses int
	// Owned lists those Ingresses in build order (first wins conflicts), for debugging: an
	// owned Ingress may have no route at all (every rule invalid or refused).
	Owned []types.NamespacedName

	// patch is what PatchEndpoints needs to patch this table (patch.go).
	patch *patchState
}

// Route is where a matched request goes, with the settings of the Ingress that defined it.
type Route struct {
	Host     string // "" for any host; "*.foo.com" for a wildcard
	Path     string
	PathType string // Exact, Prefix or ImplementationSpecific
	// Source is the object that defined the route: an Ingress, an HTTPRoute or a GRPCRoute.
	Source  SourceRef
	Backend *Backend
	Options Options
	// TLS says whether the Ingress lists this route's host under spec.tls.
	TLS bool
	// Regex is the compiled Path of a use-regex route; nil otherwise.
	Regex *regexp.Regexp
	// Canary, when set, takes the requests its rule selects to another backend.
	Canary *Canary
	// Split, when set, shares the requests among a Gateway rule's backends by weight: three
	// or more, or any number with backendRef filters (two without use Canary); each takes
	// Weight of the sum. Backend is the first of them.
	Split []Weighted
	// Match is what else than host and path a request must carry to take a Gateway
	// table's route.
	Match *RequestMatch
}

// KindIngress is the Kind of a SourceRef naming an Ingress (KindHTTPRoute and KindGRPCRoute
// name Gateway API routes).
const KindIngress = "Ingress"

// SourceRef names the object a Route or a Problem comes from: its Kind (KindIngress,
// KindHTTPRoute, KindGRPCRoute, or "Gateway" for a listener's problem), namespace and name.
// Everything kept per defining object (rate-limit buckets, debug listings) is keyed by it.
type SourceRef struct {
	Kind string
	types.NamespacedName
}

// String is "Kind namespace/name".
func (s SourceRef) String() string { return s.Kind + " " + s.NamespacedName.String() }

// IsGateway reports whether the source is a Gateway API route (HTTPRoute, GRPCRoute or
// TLSRoute).
func (s SourceRef) IsGateway() bool {
	return s.Kind == KindHTTPRoute || s.Kind == KindGRPCRoute || s.Kind == KindTLSRoute
}

// Weighted is one backend of a Route.Split and its weight (at least 1). With Edits, the
// requests sent to it get RequestHeaders and their responses ResponseHeaders instead of the
// route's (the rule's edits followed by its backendRef's filters).
type Weighted struct {
	Backend                         *Backend
	Weight                          int
	Edits                           bool
	RequestHeaders, ResponseHeaders HeaderEdits
}

// Backend is one Service port with its endpoints and balancing policy. Backends are shared
// between routes when Service, port, protocol and policy are the same.
type Backend struct {
	// Key identifies the backend across tables: "ns/service:port|protocol|policy".
	Key      string
	Service  types.NamespacedName
	Port     string // the Ingress's port: a number or a name
	Protocol Protocol
	// TLS is set for the https and grpcs protocols: how to speak TLS to the endpoints.
	TLS     *BackendTLS
	Balance Balance
	// Endpoints are pod "ip:port" addresses, sorted: the ready ones, or when none is ready the
	// serving-and-terminating ones. Empty means 503.
	Endpoints []string
	// States lists every endpoint of the port in the EndpointSlices, routed or not, with its
	// conditions, sorted by address. Only debugging reads it (why is a pod not in Endpoints?).
	States []EndpointState
	// Unresolved is set for what an HTTPRoute backendRef names when it names nothing usable
	// (no such Service or port, not a Service, another namespace without a grant; a rule
	// without backendRefs): its requests get 500, as Gateway API says, not 503.
	Unresolved bool
}

// EndpointState is one endpoint address of a backend with its EndpointSlice conditions.
type EndpointState struct {
	Addr        string // "ip:port"
	Ready       bool
	Serving     bool
	Terminating bool
	// Refused says why the address is never routed ("" when it may be): not a pod IP
	// ("loopback address", …) or from an EndpointSlice that is not trusted.
	Refused string
}

type hostRules struct {
	namespace string // the owner; "" for the host-less rules of every namespace
	// certs are the host's certificates, from Secrets of the owner namespace, each with its
	// Secret (the expiry metric's label): a client gets the first it can use, the first
	// identifies the host (AddCertificate). None: the default certificate.
	certs []listenerCert
	// clientAuth is the host's client-certificate authentication (clientauth.go); nil: none.
	clientAuth *ClientAuth
	exact      map[string]*Route
	prefixes   []*Route // longest (by path element) first
	regexes    []*Route // use-regex routes, longest pattern first
}

// namespaceRules is where a namespace's own hosts' unmatched requests go.
type namespaceRules struct {
	anyHost *hostRules // the namespace's rules without a host
	dflt    *Route     // the namespace's best default backend
}

// Lookup returns the route for a request's host (port and case ignored) and path, or nil
// (404). Host precedence: the exact host, then the wildcard one label up ("*.foo.com" matches
// "a.foo.com", not "a.b.foo.com" nor "foo.com"); within a host, an Exact path before the
// longest Prefix. A known host (one an Ingress names) whose paths do not match falls only
// within its owner namespace: to the wildcard over it when that namespace owns it too, then
// the namespace's host-less rules, then its default backend, else 404. Only a host no Ingress
// names falls to the host-less rules of every namespace, then Default.
func (t *Table) Lookup(host, path string) *Route {
	host = normalizeHost(host)
	hr := t.exact[host]
	if hr != nil {
		if r := hr.match(path); r != nil {
			return r
		}
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if wr := t.wildcard[host[i+1:]]; wr != nil && (hr == nil || wr.namespace == hr.namespace) {
			if r := wr.match(path); r != nil {
				return r
			}
			hr = wr
		}
	}
	if hr != nil {
		nr := t.namespaces[hr.namespace]
		if nr == nil {
			return nil
		}
		if nr.anyHost != nil {
			if r := nr.anyHost.match(path); r != nil {
				return r
			}
		}
		return nr.dflt
	}
	if t.anyHost != nil {
		if r := t.anyHost.match(path); r != nil {
			return r
		}
	}
	return t.Default
}

// Certificate returns the certificate that identifies the host of an SNI server name (exact
// host first, then the wildcard one label up: its first), or nil for the default certificate.
// Certificates follow host ownership: a known exact host never gets the wildcard certificate
// of another namespace.
func (t *Table) Certificate(serverName string) *tls.Certificate {
	if certs := t.certificates(serverName); len(certs) > 0 {
		return certs[0].cert
	}
	return nil
}

// HandshakeCertificate is the certificate a TLS handshake for hello's server name gets: of the
// host's certificates (Certificate), the first the client can use, or the first when it can
// use none (the handshake then fails as it would with that one alone); nil for the default.
func (t *Table) HandshakeCertificate(hello *tls.ClientHelloInfo) *tls.Certificate {
	certs := t.certificates(hello.ServerName)
	if len(certs) == 0 {
		return nil
	}
	if len(certs) > 1 {
		for _, c := range certs {
			if hello.SupportsCertificate(c.cert) == nil {
				return c.cert
			}
		}
	}
	return certs[0].cert
}

// certificates are the certificates of serverName's host (Certificate).
func (t *Table) certificates(serverName string) []listenerCert {
	host := normalizeHost(serverName)
	hr := t.exact[host]
	if hr != nil && len(hr.certs) > 0 {
		return hr.certs
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if wr := t.wildcard[host[i+1:]]; wr != nil && (hr == nil || wr.namespace == hr.namespace) {
			return wr.certs
		}
	}
	return nil
}

// Defaults lists every default backend route in use, for debugging: Default and each
// namespace's own (which serves that namespace's hosts), once each, sorted by Ingress.
func (t *Table) Defaults() []*Route {
	var out []*Route
	seen := map[*Route]bool{}
	add := func(r *Route) {
		if r != nil && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	add(t.Default)
	for _, nr := range t.namespaces {
		add(nr.dflt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source.String() < out[j].Source.String() })
	return out
}

// Routes returns every route, for debugging and tests, in a stable order (host, path, path
// type, source).
func (t *Table) Routes() []*Route {
	var out []*Route
	add := func(hr *hostRules) {
		if hr == nil {
			return
		}
		for _, r := range hr.exact {
			out = append(out, r)
		}
		out = append(out, hr.prefixes...)
		out = append(out, hr.regexes...)
	}
	for _, hr := range t.exact {
		add(hr)
	}
	for _, hr := range t.wildcard {
		add(hr)
	}
	add(t.anyHost)
	if t.gateway != nil {
		for _, ls := range t.gateway.ports {
			for _, l := range ls {
				for _, es := range l.hosts {
					for _, e := range es {
						out = append(out, e.r)
					}
				}
			}
		}
	}
	// A host-less route that serves only its namespace's hosts is in its namespace's rules
	// alone; the others are in both.
	seen := make(map[*Route]bool, len(out))
	for _, r := range out {
		seen[r] = true
	}
	for _, nr := range t.namespaces {
		if hr := nr.anyHost; hr != nil {
			for _, r := range hr.exact {
				if !seen[r] {
					out = append(out, r)
				}
			}
			for _, r := range append(hr.prefixes[:len(hr.prefixes):len(hr.prefixes)], hr.regexes...) {
				if !seen[r] {
					out = append(out, r)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.PathType != b.PathType {
			return a.PathType < b.PathType
		}
		return a.Source.String() < b.Source.String()
	})
	return out
}

func (hr *hostRules) match(path string) *Route {
	if path == "" {
		path = "/"
	}
	if r := hr.exact[path]; r != nil {
		return r
	}
	// As nginx does: a regular expression that matches wins over a prefix (ingress-nginx's
	// use-regex locations are nginx regex locations).
	for _, r := range hr.regexes {
		if r.Regex.MatchString(path) {
			return r
		}
	}
	for _, r := range hr.prefixes {
		if prefixMatch(r.Path, path) {
			return r
		}
	}
	return nil
}

// prefixMatch reports whether path is under prefix, element by element: "/foo" matches
// "/foo", "/foo/" and "/foo/bar" but not "/foobar". A trailing slash on the prefix is
// ignored, as the Ingress API says.
func prefixMatch(prefix, path string) bool {
	p := strings.TrimRight(prefix, "/")
	if p == "" {
		return true
	}
	if !strings.HasPrefix(path, p) {
		return false
	}
	return len(path) == len(p) || path[len(p)] == '/'
}

// prefixLess orders prefixes longest first by element count, then by length, then by name.
func prefixLess(a, b string) bool {
	a, b = strings.TrimRight(a, "/"), strings.TrimRight(b, "/")
	ea, eb := strings.Count(a, "/"), strings.Count(b, "/")
	if ea != eb {
		return ea > eb
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a < b
}

func normalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// Passthrough returns the backend that TLS connections for server name sni go to without
// being decrypted (ssl-passthrough), or nil when the proxy terminates them.
func (t *Table) Passthrough(sni string) *Backend {
	if len(t.passthrough) == 0 || sni == "" {
		return nil
	}
	return t.passthrough[strings.ToLower(strings.TrimSuffix(sni, "."))]
}

// HasPassthrough reports whether any host is passed through.
func (t *Table) HasPassthrough() bool { return len(t.passthrough) > 0 }
