package table

import (
	"crypto/rsa"
	"crypto/tls"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The index a translator fills through a Builder. The translators decide (which Ingress owns
// a host, which listener admits a route); these methods only place what they decided, so the
// table's lookup structures are written in one file and read in table.go and gateway.go.

// Path match kinds for Add and AddHostless.
const (
	MatchExact  = "Exact"  // the path itself
	MatchPrefix = "Prefix" // the path and everything under it, by element
	MatchRegex  = "Regex"  // Route.Regex matches the path (longest pattern first)
)

// Host makes host known to the table, owned by namespace ns (the first to make it known
// keeps it): requests for a known host that match none of its paths stay in its namespace
// (Lookup). "*.foo.com" is a wildcard host; "" is the host-less rules of every namespace.
func (b *Builder) Host(host, ns string) { b.hostRules(host, ns) }

// Add places route r under its host (r.Host; "" for the host-less rules that serve hosts no
// Ingress names), owned by namespace ns when the host is new; kind is MatchExact, MatchPrefix
// or MatchRegex.
func (b *Builder) Add(r *Route, ns, kind string) { b.hostRules(r.Host, ns).add(r, kind) }

// AddHostless places host-less route r among namespace ns's own host-less rules, which serve
// that namespace's known hosts.
func (b *Builder) AddHostless(r *Route, ns, kind string) { b.namespace(ns).hostless().add(r, kind) }

// AddCertificate gives host (owned by ns when new) one more certificate, from Secret secret
// ("namespace/name", for the expiry metric), unless it has that Secret's already. A host's
// certificates keep the order they came in, except that an RSA one goes after the others
// (ECDSA, Ed25519): a client gets the first it can use, so modern clients get the cheaper
// signature and RSA-only clients still connect. The first identifies the host.
func (b *Builder) AddCertificate(host, ns, secret string, cert *tls.Certificate) {
	hr := b.hostRules(host, ns)
	for _, c := range hr.certs {
		if c.secret == secret {
			return
		}
	}
	at := len(hr.certs)
	if !isRSA(cert) {
		for i, c := range hr.certs {
			if isRSA(c.cert) {
				at = i
				break
			}
		}
	}
	hr.certs = slices.Insert(hr.certs, at, listenerCert{cert: cert, secret: secret})
}

// isRSA reports whether c's key is an RSA key.
func isRSA(c *tls.Certificate) bool {
	_, ok := c.PrivateKey.(*rsa.PrivateKey)
	return ok
}

// AddListenerCertificate gives HTTPS listener i one more certificate, from Secret secret
// ("namespace/name"), after those it has: the first identifies the listener, the others are
// for clients that cannot use the ones before them (GatewayHandshakeCertificate).
func (b *Builder) AddListenerCertificate(i int, cert *tls.Certificate, secret string) {
	b.listeners[i].certs = append(b.listeners[i].certs, listenerCert{cert: cert, secret: secret})
}

// RouteAt returns the route of namespace ns for path on host ("" for ns's own host-less
// rules) as a rule names it: with exact, the Exact route of path; otherwise the regex route
// of that pattern or the prefix route of that path ("/a/" is "/a"). nil when there is none.
func (b *Builder) RouteAt(ns, host, path string, exact bool) *Route {
	var hr *hostRules
	if host == "" {
		hr = b.namespace(ns).anyHost
	} else {
		hr = b.hostRules(host, ns)
	}
	if hr == nil {
		return nil
	}
	if exact {
		return hr.exact[path]
	}
	for _, r := range hr.regexes {
		if r.Path == path && r.Source.Namespace == ns {
			return r
		}
	}
	norm := "/" + strings.Trim(path, "/")
	for _, r := range hr.prefixes {
		if r.Path == norm && r.Source.Namespace == ns {
			return r
		}
	}
	return nil
}

// SetDefault makes r serve requests for hosts no Ingress names when no host-less rule
// matches.
func (b *Builder) SetDefault(r *Route) { b.t.Default = r }

// SetNamespaceDefault makes r serve namespace ns's own hosts' unmatched requests.
func (b *Builder) SetNamespaceDefault(ns string, r *Route) { b.namespace(ns).dflt = r }

// Ranked marks be as the backend of a default backend ranked against others by Tier:
// PatchEndpoints refuses a patch that changes its tier (the ranking would change).
func (b *Builder) Ranked(be *Backend) { b.patch.ranked[be.Key] = true }

// PassthroughBackend returns the backend TLS connections for host are passed through to
// so far, or nil.
func (b *Builder) PassthroughBackend(host string) *Backend { return b.t.passthrough[host] }

// SetPassthrough passes TLS connections for exact host, undecrypted, to be.
func (b *Builder) SetPassthrough(host string, be *Backend) {
	if b.t.passthrough == nil {
		b.t.passthrough = map[string]*Backend{}
	}
	b.t.passthrough[host] = be
}

// SetOwned records the Ingresses the table was built from, in build order (Table.Owned).
func (b *Builder) SetOwned(ids []types.NamespacedName) {
	b.t.Ingresses = len(ids)
	b.t.Owned = ids
}

// AddListener adds a Gateway listener on port (hostname "" for any host; an https one gets
// its certificates from AddListenerCertificate, none: no handshake) and returns its index
// for AddListenerRoute and AddListenerCertificate. Listeners of one
// port are tried most specific hostname first (Finish sorts them).
func (b *Builder) AddListener(port int32, name, hostname string, https bool) int {
	g := b.gatewayIndex()
	l := &gwListener{name: name, hostname: hostname, hosts: map[string][]gwEntry{}, https: https}
	b.listeners = append(b.listeners, l)
	g.ports[port] = append(g.ports[port], l)
	return len(b.listeners) - 1
}

// AddListenerRoute serves route r on listener l for effective hostname host (exact,
// "*.suffix", or "" for any); seq orders routes of equal precedence (Gateway API: the oldest
// route first, then its rules and matches in order).
func (b *Builder) AddListenerRoute(l int, host string, r *Route, seq int) {
	ls := b.listeners[l]
	ls.hosts[host] = append(ls.hosts[host], gwEntry{r: r, seq: seq})
}

// SetGatewayStatus makes the table a Gateway's, with the status its translation computed.
func (b *Builder) SetGatewayStatus(st *GatewayStatus) {
	b.gatewayIndex()
	b.t.Gateway = st
}

func (b *Builder) gatewayIndex() *gatewayTable {
	if b.t.gateway == nil {
		b.t.gateway = &gatewayTable{ports: map[int32][]*gwListener{}}
	}
	return b.t.gateway
}

// Finish lists the backends, sorts the rules and indexes the table for PatchEndpoints, and
// returns the table with every Problem reported.
func (b *Builder) Finish() (*Table, []Problem) {
	for _, be := range b.backends {
		b.t.Backends = append(b.t.Backends, be)
	}
	sort.Slice(b.t.Backends, func(i, j int) bool { return b.t.Backends[i].Key < b.t.Backends[j].Key })
	for _, hr := range b.t.exact {
		hr.sort()
	}
	for _, hr := range b.t.wildcard {
		hr.sort()
	}
	if b.t.anyHost != nil {
		b.t.anyHost.sort()
	}
	for _, nr := range b.t.namespaces {
		if nr.anyHost != nil {
			nr.anyHost.sort()
		}
	}
	if g := b.t.gateway; g != nil {
		for _, ls := range g.ports {
			sort.SliceStable(ls, func(i, j int) bool { return specificity(ls[i].hostname) > specificity(ls[j].hostname) })
		}
		for _, l := range b.listeners {
			for _, es := range l.hosts {
				sort.SliceStable(es, func(i, j int) bool { return gwBefore(es[i], es[j]) })
			}
		}
	}
	b.patch.index(b.t)
	return b.t, b.problems
}

// hostRules returns the rules of a host, made on first use with ns as its owner; "" is the
// host-less rules of every namespace.
func (b *Builder) hostRules(host, ns string) *hostRules {
	var m map[string]*hostRules
	switch {
	case host == "":
		if b.t.anyHost == nil {
			b.t.anyHost = &hostRules{exact: map[string]*Route{}}
		}
		return b.t.anyHost
	case strings.HasPrefix(host, "*."):
		m, host = b.t.wildcard, host[2:]
	default:
		m = b.t.exact
	}
	hr := m[host]
	if hr == nil {
		hr = &hostRules{namespace: ns, exact: map[string]*Route{}}
		m[host] = hr
	}
	return hr
}

// namespace returns the fall-through rules of a namespace, made on first use.
func (b *Builder) namespace(ns string) *namespaceRules {
	nr := b.t.namespaces[ns]
	if nr == nil {
		nr = &namespaceRules{}
		b.t.namespaces[ns] = nr
	}
	return nr
}

func (nr *namespaceRules) hostless() *hostRules {
	if nr.anyHost == nil {
		nr.anyHost = &hostRules{exact: map[string]*Route{}}
	}
	return nr.anyHost
}

func (hr *hostRules) add(r *Route, kind string) {
	switch kind {
	case MatchExact:
		hr.exact[r.Path] = r
	case MatchRegex:
		hr.regexes = append(hr.regexes, r)
	default:
		hr.prefixes = append(hr.prefixes, r)
	}
}

func (hr *hostRules) sort() {
	sort.SliceStable(hr.prefixes, func(i, j int) bool { return prefixLess(hr.prefixes[i].Path, hr.prefixes[j].Path) })
	// Regular expressions: the longest first, as ingress-nginx orders its locations.
	sort.SliceStable(hr.regexes, func(i, j int) bool { return len(hr.regexes[i].Path) > len(hr.regexes[j].Path) })
}
