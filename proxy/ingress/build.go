package ingress

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// ControllerName is the spec.controller of the IngressClasses metalgate serves.
const ControllerName = "metalgate.io/ingress-controller"

// defaultClassAnnotation marks the cluster's default IngressClass.
const defaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"

// Input is a snapshot of the objects a table is built from. Objects are read, never changed.
type Input struct {
	Ingresses []*networkingv1.Ingress
	Classes   []*networkingv1.IngressClass
	Services  []*corev1.Service
	Slices    []*discoveryv1.EndpointSlice
	Secrets   []*corev1.Secret
	// Controller is the spec.controller value that makes an IngressClass ours; default
	// ControllerName.
	Controller string
	// WatchDefaultClass also takes Ingresses without a class when the default IngressClass
	// is ours.
	WatchDefaultClass bool
	// AllowUnmanagedSlices and AllowLoopbackEndpoints: table.Sources'.
	AllowUnmanagedSlices   bool
	AllowLoopbackEndpoints bool
	// NginxAnnotations also reads the nginx.ingress.kubernetes.io/ form of every annotation
	// metalgate supports, and reports every other nginx annotation as a Problem
	// (UnsupportedAnnotation, RefusedAnnotation for snippets). Default false here; the proxy's
	// --nginx-annotations flag turns it on (its default).
	NginxAnnotations bool
	// SSLPassthrough honours the ssl-passthrough annotation (the proxy's
	// --enable-ssl-passthrough); without it the annotation is reported and ignored.
	SSLPassthrough bool
	// ReferenceGrants let an Ingress's auth-url name a Service of another namespace
	// (authurl.go).
	ReferenceGrants []*gatewayv1beta1.ReferenceGrant
	// ExternalAuthHosts are the outside hosts an auth-url may name (--external-auth-hosts;
	// none by default).
	ExternalAuthHosts table.HostList
	// DefaultBackendService and DefaultBackendPort name the proxy's own default backend
	// (--default-backend-service; no port: the Service's first): the error pages of requests
	// that match no route and of custom-http-errors without a default-backend
	// (table.ErrorBackend). Empty: none.
	DefaultBackendService types.NamespacedName
	DefaultBackendPort    networkingv1.ServiceBackendPort
}

// Sources is what the table's backends and certificates are resolved from.
func (in Input) Sources() table.Sources {
	return table.Sources{Services: in.Services, Slices: in.Slices, Secrets: in.Secrets,
		AllowUnmanagedSlices: in.AllowUnmanagedSlices, AllowLoopbackEndpoints: in.AllowLoopbackEndpoints}
}

// ingressRef is the SourceRef of Ingress id.
func ingressRef(id types.NamespacedName) table.SourceRef {
	return table.SourceRef{Kind: table.KindIngress, NamespacedName: id}
}

// Classes returns the names of the IngressClasses with our controller, and whether one of
// them is the cluster default.
func Classes(classes []*networkingv1.IngressClass, controller string) (names map[string]bool, defaultIsOurs bool) {
	if controller == "" {
		controller = ControllerName
	}
	names = map[string]bool{}
	for _, c := range classes {
		if c.Spec.Controller != controller {
			continue
		}
		names[c.Name] = true
		if c.Annotations[defaultClassAnnotation] == "true" {
			defaultIsOurs = true
		}
	}
	return names, defaultIsOurs
}

// Owns reports whether an Ingress belongs to us given our class names (from Classes).
func Owns(ing *networkingv1.Ingress, ours map[string]bool, defaultIsOurs, watchDefault bool) bool {
	if ing.Spec.IngressClassName != nil {
		return ours[*ing.Spec.IngressClassName]
	}
	// The deprecated annotation still names a class on old manifests.
	if c, ok := ing.Annotations["kubernetes.io/ingress.class"]; ok {
		return ours[c]
	}
	return watchDefault && defaultIsOurs
}

// Build makes a table from a snapshot. It never fails as a whole: each Ingress that is wrong
// in part is reported as Problems and what is right in it is still routed.
//
// Ingresses are taken in order: those not being deleted first, then by creation time, then
// namespace/name; the first wins every conflict. Tenants are walls (docs/proxy.md, Tenancy):
//   - a host belongs to the namespace of the first Ingress that names it, in a rule or under
//     spec.tls; an exact host and a wildcard over it ("a.foo.com", "*.foo.com") are two
//     hosts. Rules and certificates for it from other namespaces are refused (HostConflict);
//   - the same host, path and path type in two Ingresses goes to the first (PathConflict);
//     for a host-less rule, the first of all serves unknown hosts and the first of each
//     namespace serves that namespace's hosts;
//   - default backends rank by what they can serve (a ready endpoint, then only terminating
//     ones, then none), then by order; the best serves hosts no Ingress names, and each
//     namespace's best serves its own hosts' unmatched requests;
//   - endpoints are pod IPs from managed EndpointSlices; others are refused (RefusedEndpoint).
func Build(in Input) (*table.Table, []table.Problem) {
	b := builder{
		in:      in,
		tb:      table.NewBuilder(in.Sources()),
		owner:   map[routeKey]types.NamespacedName{},
		nsOwner: map[nsRouteKey]types.NamespacedName{},
		hosts:   map[string]types.NamespacedName{},
	}
	ours, defaultIsOurs := Classes(in.Classes, in.Controller)
	var owned []*networkingv1.Ingress
	for _, ing := range in.Ingresses {
		if Owns(ing, ours, defaultIsOurs, in.WatchDefaultClass) {
			owned = append(owned, ing)
		}
	}
	sort.Slice(owned, func(i, j int) bool { return first(owned[i], owned[j]) })
	parsed := make([]parsedIngress, len(owned))
	for i, ing := range owned {
		parsed[i].opts, parsed[i].problems = parseOptions(ing.Annotations, in.NginxAnnotations)
		parsed[i].rules = withAliases(ing.Spec.Rules, parsed[i].opts.ServerAliases)
		if parsed[i].opts.Canary == nil { // a canary claims no host
			b.claim(ing, parsed[i].rules)
		}
	}
	for i, ing := range owned {
		if parsed[i].opts.Canary == nil {
			b.ingress(ing, parsed[i])
		}
	}
	for i, ing := range owned {
		if parsed[i].opts.Canary != nil {
			b.canary(ing, parsed[i])
		}
	}
	b.chooseDefaults()
	b.errorBackend()
	ids := make([]types.NamespacedName, len(owned))
	for i, ing := range owned {
		ids[i] = types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	}
	b.tb.SetOwned(ids)
	return b.tb.Finish()
}

// first orders Ingresses for conflicts: not being deleted before being deleted, then older
// before newer, then by namespace/name.
func first(a, c *networkingv1.Ingress) bool {
	if ad, cd := a.DeletionTimestamp != nil, c.DeletionTimestamp != nil; ad != cd {
		return cd
	}
	if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
		return a.CreationTimestamp.Before(&c.CreationTimestamp)
	}
	if a.Namespace != c.Namespace {
		return a.Namespace < c.Namespace
	}
	return a.Name < c.Name
}

type routeKey struct{ host, path, pathType string }

// nsRouteKey is a host-less route within one namespace.
type nsRouteKey struct {
	ns string
	routeKey
}

type builder struct {
	in    Input
	tb    *table.Builder
	owner map[routeKey]types.NamespacedName
	// nsOwner is owner for host-less routes within each namespace: a namespace's own
	// host-less rules serve its hosts even where another namespace's serve unknown hosts.
	nsOwner map[nsRouteKey]types.NamespacedName
	// hosts maps each host named by an Ingress ("*.foo.com" for a wildcard) to the first
	// Ingress naming it: its namespace owns the host.
	hosts    map[string]types.NamespacedName
	defaults []defaultCandidate // in build order
}

// problem reports something wrong with Ingress id.
func (b *builder) problem(id types.NamespacedName, reason, format string, args ...any) {
	b.tb.Problem(ingressRef(id), reason, format, args...)
}

// backend resolves an IngressBackend of Ingress id (namespace ns) through the table's
// resolver; nil when it cannot be served at all (a resource backend).
func (b *builder) backend(id types.NamespacedName, ns string, ib *networkingv1.IngressBackend, opts options) *table.Backend {
	if ib.Service == nil {
		b.problem(id, table.ReasonInvalidRule, "resource backends are not supported")
		return nil
	}
	return b.tb.Backend(ingressRef(id), types.NamespacedName{Namespace: ns, Name: ib.Service.Name}, ib.Service.Port, opts.Options, opts.backendTLS)
}

// validHost reports whether a lower-case host is usable: no wildcard, or "*." and one label
// wildcard only. "" (any host) is valid.
func validHost(h string) bool {
	return !strings.Contains(h, "*") || strings.HasPrefix(h, "*.") && strings.Count(h, "*") == 1
}

// parsedIngress is an Ingress's annotations read once: its options, their problems, and its
// rules with those of its server aliases.
type parsedIngress struct {
	opts     options
	problems []problemText
	rules    []networkingv1.IngressRule
}

// claim records the hosts an Ingress names, in its rules (server aliases included) and under
// spec.tls, that no Ingress before it named: its namespace owns them.
func (b *builder) claim(ing *networkingv1.Ingress, rules []networkingv1.IngressRule) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	name := func(h string) {
		if h = strings.ToLower(h); h == "" || !validHost(h) {
			return
		}
		if _, taken := b.hosts[h]; !taken {
			b.hosts[h] = id
		}
	}
	for _, r := range rules {
		name(r.Host)
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			name(h)
		}
	}
}

// allowed reports whether Ingress id may use host h (lower-case, not ""): h belongs to its
// namespace. When not, a HostConflict naming field is reported, once per Ingress and host.
func (b *builder) allowed(id types.NamespacedName, field, h string) bool {
	owner := b.hosts[h]
	if owner.Namespace == id.Namespace {
		return true
	}
	if b.tb.Once(ingressRef(id), "host "+h) {
		b.problem(id, table.ReasonHostConflict, "%s %q ignored: the host belongs to namespace %s, where Ingress %s named it first", field, h, owner.Namespace, owner)
	}
	return false
}

func (b *builder) ingress(ing *networkingv1.Ingress, p parsedIngress) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	opts, rules := p.opts, p.rules
	for _, pt := range p.problems {
		b.problem(id, pt.reason, "%s", pt.msg)
	}
	if opts.auth != nil {
		opts.Policy.BasicAuth = b.basicAuth(id, opts.auth)
	}
	if opts.extAuth != nil {
		opts.Policy.ExternalAuth = b.externalAuth(id, opts.extAuth)
	}
	if opts.errorPages != nil {
		opts.Policy.ErrorPages = b.errorPages(id, opts.errorPages)
	}
	// Hosts first: one of another namespace is refused before anything for it is loaded, and
	// a host of ours is known even without a path (its requests stay in this namespace).
	for i, rule := range rules {
		field := fmt.Sprintf("spec.rules[%d].host", i)
		if i >= len(ing.Spec.Rules) {
			field = "server-alias"
		}
		if host := strings.ToLower(rule.Host); host != "" && validHost(host) && b.allowed(id, field, host) {
			b.tb.Host(host, ing.Namespace)
		}
	}
	tlsHosts := b.tls(ing, id)
	b.clientAuth(ing, id, &opts, rules)
	if d := ing.Spec.DefaultBackend; d != nil {
		if be := b.backend(id, ing.Namespace, d, opts); be != nil {
			b.defaults = append(b.defaults, defaultCandidate{
				route:    &table.Route{Path: "/", PathType: "Default", Source: ingressRef(id), Backend: be, Options: opts.Options},
				deleting: ing.DeletionTimestamp != nil,
			})
		}
	}
	for _, rule := range rules {
		b.rule(ing, id, rule, opts, tlsHosts)
	}
}

// rule adds the routes of one rule of ing (an Ingress rule or a server-alias copy of one).
func (b *builder) rule(ing *networkingv1.Ingress, id types.NamespacedName, rule networkingv1.IngressRule, opts options, tlsHosts map[string]bool) {
	host := strings.ToLower(rule.Host)
	if !validHost(host) {
		b.problem(id, table.ReasonInvalidRule, "host %q: a wildcard must be the whole first label (*.example.com)", rule.Host)
		return
	}
	if host != "" && b.hosts[host].Namespace != ing.Namespace {
		return // another namespace's host: reported in ingress
	}
	if rule.HTTP == nil {
		return
	}
	if opts.SSLPassthrough {
		b.passthrough(id, ing.Namespace, host, rule.HTTP, opts)
	}
	for _, p := range rule.HTTP.Paths {
		b.path(ing, id, rule.Host, host, p, opts, tlsHosts)
	}
}

// path adds the route of one path of a rule for host (rawHost as written, for messages),
// unless another Ingress routes it already.
func (b *builder) path(ing *networkingv1.Ingress, id types.NamespacedName, rawHost, host string, p networkingv1.HTTPIngressPath, opts options, tlsHosts map[string]bool) {
	path, pt, kind, re, problem := routePath(p, rawHost, opts.UseRegex)
	if problem != "" {
		b.problem(id, table.ReasonInvalidRule, "%s", problem)
		return
	}
	k := routeKey{host, path, kind}
	prev, taken := b.owner[k]
	if host == "" {
		// A host-less route has two owners: the first Ingress of the namespace
		// (for the namespace's own hosts) and the first of all (for unknown hosts).
		prev, taken = b.nsOwner[nsRouteKey{ing.Namespace, k}]
	}
	if taken {
		if prev != id {
			b.problem(id, table.ReasonPathConflict, "%s path %q on host %q ignored: Ingress %s already routes it", kind, path, hostOrAny(rawHost), prev)
		}
		return
	}
	be := b.backend(id, ing.Namespace, &p.Backend, opts)
	if be == nil {
		return
	}
	r := &table.Route{Host: host, Path: path, PathType: pt, Source: ingressRef(id), Backend: be, Options: opts.Options, TLS: tlsHosts[host], Regex: re}
	if host == "" {
		b.nsOwner[nsRouteKey{ing.Namespace, k}] = id
		b.tb.AddHostless(r, ing.Namespace, kind)
		if other, ok := b.owner[k]; ok {
			b.problem(id, table.ReasonPathConflict, "%s path %q without a host serves only hosts of namespace %s: Ingress %s routes it for other hosts", kind, path, ing.Namespace, other)
			return
		}
	}
	b.owner[k] = id
	b.tb.Add(r, ing.Namespace, kind)
}

// routePath is how an Ingress path of a rule for rawHost matches: the path as routed, its
// pathType (ImplementationSpecific when unset) and the kind of match — Exact stays exact;
// Prefix and ImplementationSpecific both match by element ("/a/" is "/a"), or, with useRegex,
// as a regular expression (re). problem says why the path cannot be routed ("" when it can).
func routePath(p networkingv1.HTTPIngressPath, rawHost string, useRegex bool) (path, pathType, kind string, re *regexp.Regexp, problem string) {
	pathType = string(networkingv1.PathTypeImplementationSpecific)
	if p.PathType != nil {
		pathType = string(*p.PathType)
	}
	path = p.Path
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", "", nil, fmt.Sprintf("path %q on host %q must start with /", p.Path, rawHost)
	}
	switch {
	case pathType == string(networkingv1.PathTypeExact):
		return path, pathType, "Exact", nil, ""
	case useRegex:
		re, err := table.RegexRoute(path)
		if err != nil {
			return "", "", "", nil, fmt.Sprintf("path %q on host %q is not a regular expression (use-regex, RE2 syntax): %v", p.Path, hostOrAny(rawHost), err)
		}
		return path, pathType, "Regex", re, ""
	default:
		return "/" + strings.Trim(path, "/"), pathType, "Prefix", nil, ""
	}
}

// basicAuth reads the htpasswd Secret of an Ingress's basic authentication. Only a Secret of
// the Ingress's own namespace is read (tenants are walls). When it cannot be used the route
// refuses everyone (no users) and a Problem says why.
func (b *builder) basicAuth(id types.NamespacedName, ref *authRef) *table.BasicAuth {
	ba := &table.BasicAuth{Realm: ref.realm, Users: map[string]string{}}
	fail := func(format string, args ...any) *table.BasicAuth {
		b.problem(id, table.ReasonInvalidAnnotation, "%s: "+format+"; every request is refused (401) until it is fixed", append([]any{ref.key}, args...)...)
		return ba
	}
	switch {
	case ref.unsupported != "":
		return fail("%s", ref.unsupported)
	case ref.name == "":
		return fail("auth-secret names no Secret")
	case ref.namespace != "" && ref.namespace != id.Namespace:
		return fail("auth-secret %s/%s is in another namespace; only Secrets of namespace %s are read", ref.namespace, ref.name, id.Namespace)
	}
	sec := b.tb.Secret(types.NamespacedName{Namespace: id.Namespace, Name: ref.name})
	if sec == nil {
		return fail("Secret %s/%s not found", id.Namespace, ref.name)
	}
	ba.Version = string(sec.UID) + "/" + sec.ResourceVersion
	if ref.asMap {
		var lines []string
		for user, hash := range sec.Data {
			lines = append(lines, user+":"+string(hash))
		}
		sort.Strings(lines)
		users, err := table.ParseHtpasswd(strings.Join(lines, "\n"))
		if err != nil {
			return fail("Secret %s/%s (auth-map): %v", id.Namespace, ref.name, err)
		}
		ba.Users, ba.Decoy = users, table.DecoyHash(users)
		return ba
	}
	text, ok := sec.Data["auth"]
	if !ok {
		return fail("Secret %s/%s has no key \"auth\" (htpasswd lines; auth-secret-type auth-map reads a user per key)", id.Namespace, ref.name)
	}
	users, err := table.ParseHtpasswd(string(text))
	if err != nil {
		return fail("Secret %s/%s key auth: %v", id.Namespace, ref.name, err)
	}
	if len(users) == 0 {
		return fail("Secret %s/%s key auth holds no user", id.Namespace, ref.name)
	}
	ba.Users, ba.Decoy = users, table.DecoyHash(users)
	return ba
}

// canary attaches a canary Ingress to the routes it shadows: each of its host and path pairs
// must be routed already by an Ingress of the same namespace (the host's owner), and gets at
// most one canary.
func (b *builder) canary(ing *networkingv1.Ingress, p parsedIngress) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	for _, pt := range p.problems {
		b.problem(id, pt.reason, "%s", pt.msg)
	}
	for _, rule := range p.rules {
		host := strings.ToLower(rule.Host)
		if rule.HTTP == nil || !validHost(host) {
			continue
		}
		for _, hp := range rule.HTTP.Paths {
			path := hp.Path
			if path == "" {
				path = "/"
			}
			r := b.routeFor(ing.Namespace, host, path, hp.PathType)
			switch {
			case r == nil:
				b.problem(id, table.ReasonInvalidRule, "canary path %q on host %q ignored: no Ingress of namespace %s routes it (a canary needs its main Ingress)", path, hostOrAny(rule.Host), ing.Namespace)
			case r.Canary != nil:
				b.problem(id, table.ReasonPathConflict, "canary path %q on host %q ignored: Ingress %s is its canary already", path, hostOrAny(rule.Host), r.Canary.Source.NamespacedName)
			default:
				be := b.backend(id, ing.Namespace, &hp.Backend, p.opts)
				if be != nil {
					r.Canary = &table.Canary{CanaryRule: *p.opts.Canary, Source: ingressRef(id), Backend: be}
				}
			}
		}
	}
}

// routeFor finds the route of a host (of namespace ns) and path as an Ingress rule names
// it; nil when there is none.
func (b *builder) routeFor(ns, host, path string, pt *networkingv1.PathType) *table.Route {
	if host != "" && b.hosts[host].Namespace != ns {
		return nil
	}
	return b.tb.RouteAt(ns, host, path, pt != nil && *pt == networkingv1.PathTypeExact)
}

// withAliases returns rules followed by a copy of every rule with a host for each alias
// (server-alias): the aliases serve what the Ingress's hosts serve.
func withAliases(rules []networkingv1.IngressRule, aliases []string) []networkingv1.IngressRule {
	if len(aliases) == 0 {
		return rules
	}
	out := append([]networkingv1.IngressRule(nil), rules...)
	for _, alias := range aliases {
		for _, r := range rules {
			if r.Host != "" {
				r.Host = alias
				out = append(out, r)
			}
		}
	}
	return out
}

func hostOrAny(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// tls loads the certificates of the Ingress's hosts (those of its namespace) into the table
// and returns the hosts it lists. Every valid Secret the owner namespace's Ingresses name for a
// host is one of its certificates (ECDSA before RSA, then in build order: AddCertificate); a
// Secret never serves another namespace's host.
func (b *builder) tls(ing *networkingv1.Ingress, id types.NamespacedName) map[string]bool {
	hosts := map[string]bool{}
	for i, t := range ing.Spec.TLS {
		var ours []string
		for j, h := range t.Hosts {
			if h = strings.ToLower(h); h == "" || !validHost(h) || !b.allowed(id, fmt.Sprintf("spec.tls[%d].hosts[%d]", i, j), h) {
				continue
			}
			b.tb.Host(h, ing.Namespace)
			hosts[h] = true
			ours = append(ours, h)
		}
		if t.SecretName == "" || len(ours) == 0 {
			continue // the default certificate serves these hosts
		}
		sec := b.tb.Secret(types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName})
		if sec == nil {
			b.problem(id, table.ReasonInvalidTLS, "TLS Secret %s/%s not found; the default certificate is served for %v", ing.Namespace, t.SecretName, ours)
			continue
		}
		cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			b.problem(id, table.ReasonInvalidTLS, "TLS Secret %s/%s: %v; the default certificate is served for %v", ing.Namespace, t.SecretName, err, ours)
			continue
		}
		for _, h := range ours {
			b.tb.AddCertificate(h, ing.Namespace, ing.Namespace+"/"+t.SecretName, &cert)
		}
	}
	return hosts
}

// defaultCandidate is an Ingress's spec.defaultBackend.
type defaultCandidate struct {
	route    *table.Route
	deleting bool
}

// tier ranks what a default backend can serve: 0 a ready endpoint, 1 only endpoints serving
// while terminating, 2 nothing (missing Service or port, no endpoint: 503).
func (c defaultCandidate) tier() int { return c.route.Backend.Tier() }

// better reports whether c beats d, which comes before it in build order: an Ingress being
// deleted never beats one that is not, then only a better tier wins.
func (c defaultCandidate) better(d defaultCandidate) bool {
	if c.deleting != d.deleting {
		return !c.deleting
	}
	return c.tier() < d.tier()
}

// why says why loser lost to winner.
func (c defaultCandidate) why(winner defaultCandidate) string {
	be := c.route.Backend
	switch {
	case c.deleting && !winner.deleting:
		return "this Ingress is being deleted"
	case c.tier() > winner.tier() && c.tier() == 2:
		return fmt.Sprintf("Service %s port %s has no endpoint", be.Service, be.Port)
	case c.tier() > winner.tier():
		return fmt.Sprintf("Service %s port %s has no ready endpoint", be.Service, be.Port)
	}
	return "it is older"
}

// chooseDefaults picks the default backend for hosts no Ingress names (the best of all) and
// for each namespace's own hosts (the best of that namespace), and reports the others. A
// default backend that cannot serve never shadows one that can: a missing Service or an
// Ingress being deleted used to answer 503 for everyone while a valid one waited.
func (b *builder) chooseDefaults() {
	best := map[string]int{} // namespace → index in b.defaults
	global := -1
	for i, c := range b.defaults { // in build order: among equals the first stays
		ns := c.route.Source.Namespace
		if j, ok := best[ns]; !ok || c.better(b.defaults[j]) {
			best[ns] = i
		}
		if global < 0 || c.better(b.defaults[global]) {
			global = i
		}
	}
	if global < 0 {
		return
	}
	if len(b.defaults) > 1 { // one alone wins whatever its endpoints
		for _, c := range b.defaults {
			b.tb.Ranked(c.route.Backend)
		}
	}
	b.tb.SetDefault(b.defaults[global].route)
	for ns, i := range best {
		b.tb.SetNamespaceDefault(ns, b.defaults[i].route)
	}
	for i, c := range b.defaults {
		id := c.route.Source.NamespacedName
		switch nsBest := best[id.Namespace]; i {
		case global:
		case nsBest:
			w := b.defaults[global]
			b.problem(id, table.ReasonPathConflict, "spec.defaultBackend serves only hosts of namespace %s: requests for other hosts go to the default backend of Ingress %s (%s)",
				id.Namespace, w.route.Source.NamespacedName, c.why(w))
		default:
			w := b.defaults[nsBest]
			b.problem(id, table.ReasonPathConflict, "spec.defaultBackend ignored: the default backend of Ingress %s is preferred (%s)", w.route.Source.NamespacedName, c.why(w))
		}
	}
}

// passthrough makes host a TLS passthrough host of Ingress id: its TLS connections go,
// undecrypted, to the backend of the rule's first path. Only an exact host of the Ingress's
// own namespace (checked by the caller) can be one; the first Ingress to ask wins.
func (b *builder) passthrough(id types.NamespacedName, ns, host string, rule *networkingv1.HTTPIngressRuleValue, opts options) {
	switch {
	case !b.in.SSLPassthrough:
		if b.tb.Once(ingressRef(id), "ssl-passthrough") {
			b.problem(id, table.ReasonInvalidAnnotation, "ssl-passthrough needs the proxy's --enable-ssl-passthrough; the hosts are served with TLS terminated")
		}
		return
	case host == "" || strings.HasPrefix(host, "*."):
		b.problem(id, table.ReasonInvalidRule, "ssl-passthrough: host %q: passthrough routes by the exact name a client sends (SNI); a rule without a host or with a wildcard is not passed through", host)
		return
	case len(rule.Paths) == 0:
		return
	}
	if prev := b.tb.PassthroughBackend(host); prev != nil {
		b.problem(id, table.ReasonPathConflict, "ssl-passthrough: host %q is passed through to %s already", host, prev.Service)
		return
	}
	be := b.backend(id, ns, &rule.Paths[0].Backend, opts)
	if be == nil {
		return
	}
	b.tb.SetPassthrough(host, be)
}
