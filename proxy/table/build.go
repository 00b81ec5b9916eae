package table

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
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
	// AllowUnmanagedSlices also routes to EndpointSlices that the endpoint-slice controller
	// does not manage (label endpointslice.kubernetes.io/managed-by other than
	// EndpointSliceController, or none): hand-written slices, and slices mirrored from
	// hand-written Endpoints objects. Default false: their endpoints are refused. Addresses
	// are checked either way (see AllowLoopbackEndpoints).
	AllowUnmanagedSlices bool
	// AllowLoopbackEndpoints accepts loopback endpoint addresses (127.0.0.0/8, ::1). Only a
	// --static-config file (development, benchmarks on one host) sets it; default false.
	// Link-local, unspecified, multicast and broadcast addresses are always refused.
	AllowLoopbackEndpoints bool
	// NginxAnnotations also reads the nginx.ingress.kubernetes.io/ form of every annotation
	// metalgate supports, and reports every other nginx annotation as a Problem
	// (UnsupportedAnnotation, RefusedAnnotation for snippets). Default false here; the proxy's
	// --nginx-annotations flag turns it on (its default).
	NginxAnnotations bool
	// SSLPassthrough honours the ssl-passthrough annotation (the proxy's
	// --enable-ssl-passthrough); without it the annotation is reported and ignored.
	SSLPassthrough bool

	// Gateway, when set, makes this the table of that one Gateway's proxy: it routes the
	// HTTPRoutes attached to the Gateway's listeners (Table.Match) and computes their status
	// (Table.Gateway); Ingresses and IngressClasses are not read, so Ingress host ownership
	// and Gateway routes never meet in one table (docs/gateway.md).
	Gateway *gatewayv1.Gateway
	// HTTPRoutes are the candidates; only those with a parentRef naming Gateway are read.
	HTTPRoutes []*gatewayv1.HTTPRoute
	// GRPCRoutes likewise: each is served as the HTTP/2 requests its rules match (path
	// /service/method, headers), to its backends over HTTP/2 without TLS (h2c).
	GRPCRoutes []*gatewayv1.GRPCRoute
	// ReferenceGrants allow backendRefs to Services of other namespaces.
	ReferenceGrants []*gatewayv1beta1.ReferenceGrant
	// Namespaces give the labels that allowedRoutes.namespaces.selector matches; a route of
	// a namespace not listed is not selected.
	Namespaces []*corev1.Namespace
}

// EndpointSliceController is the endpointslice.kubernetes.io/managed-by value of the
// slices kube-controller-manager derives from a Service's selector: the only ones routed to
// unless Input.AllowUnmanagedSlices.
const EndpointSliceController = "endpointslice-controller.k8s.io"

// Problem is something wrong with one object (an Ingress, an HTTPRoute, a GRPCRoute); the
// rest of the table still works.
type Problem struct {
	Object  SourceRef
	Reason  string // CamelCase, for the Event
	Message string
}

// ingressRef is the SourceRef of Ingress id.
func ingressRef(id types.NamespacedName) SourceRef {
	return SourceRef{Kind: KindIngress, NamespacedName: id}
}

// Problem reasons.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonMissingService    = "MissingService"
	ReasonMissingPort       = "MissingServicePort"
	ReasonInvalidTLS        = "InvalidTLSSecret"
	ReasonPathConflict      = "PathConflict"
	ReasonInvalidRule       = "InvalidRule"
	// ReasonHostConflict: the Ingress names a host that belongs to another namespace; its
	// rules and TLS entries for that host are ignored.
	ReasonHostConflict = "HostConflict"
	// ReasonRefusedEndpoint: a backend's EndpointSlices list addresses that are not routed
	// (not a pod IP, or a slice not managed by the endpoint-slice controller).
	ReasonRefusedEndpoint = "RefusedEndpoint"
	// ReasonUnsupportedAnnotation: an nginx.ingress.kubernetes.io annotation metalgate does
	// not implement; it has no effect (never silently).
	ReasonUnsupportedAnnotation = "UnsupportedAnnotation"
	// ReasonRefusedAnnotation: a snippet annotation, refused by name (free-form
	// configuration is how ingress-nginx got its remote-code-execution CVEs).
	ReasonRefusedAnnotation = "RefusedAnnotation"
)

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
func Build(in Input) (*Table, []Problem) {
	b := builder{
		in:       in,
		t:        &Table{exact: map[string]*hostRules{}, wildcard: map[string]*hostRules{}, namespaces: map[string]*namespaceRules{}},
		services: make(map[types.NamespacedName]*corev1.Service, len(in.Services)),
		slices:   map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
		secrets:  make(map[types.NamespacedName]*corev1.Secret),
		backends: map[string]*Backend{},
		owner:    map[routeKey]types.NamespacedName{},
		nsOwner:  map[nsRouteKey]types.NamespacedName{},
		hosts:    map[string]types.NamespacedName{},
		reported: map[reportKey]bool{},
		patch: &patchState{unmanaged: in.AllowUnmanagedSlices, loopback: in.AllowLoopbackEndpoints,
			ports: map[string]corev1.ServicePort{}, refusals: map[string]string{}, ranked: map[string]bool{}},
	}
	b.t.patch = b.patch
	for _, s := range in.Services {
		b.services[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	for _, s := range in.Slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := types.NamespacedName{Namespace: s.Namespace, Name: name}
			b.slices[k] = append(b.slices[k], s)
		}
	}
	for _, s := range in.Secrets {
		b.secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	if in.Gateway != nil {
		b.buildGateway()
		b.finish()
		return b.t, b.problems
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
	b.t.Ingresses = len(owned)
	b.t.Owned = make([]types.NamespacedName, len(owned))
	for i, ing := range owned {
		b.t.Owned[i] = types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	}
	b.finish()
	return b.t, b.problems
}

// finish lists the backends and sorts the rules.
func (b *builder) finish() {
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
	b.patch.index(b.t)
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

// reportKey makes a Problem once per Ingress and subject (a host, a backend).
type reportKey struct {
	src     SourceRef
	subject string
}

type builder struct {
	in       Input
	t        *Table
	services map[types.NamespacedName]*corev1.Service
	slices   map[types.NamespacedName][]*discoveryv1.EndpointSlice
	secrets  map[types.NamespacedName]*corev1.Secret
	backends map[string]*Backend
	owner    map[routeKey]types.NamespacedName
	// nsOwner is owner for host-less routes within each namespace: a namespace's own
	// host-less rules serve its hosts even where another namespace's serve unknown hosts.
	nsOwner map[nsRouteKey]types.NamespacedName
	// hosts maps each host named by an Ingress ("*.foo.com" for a wildcard) to the first
	// Ingress naming it: its namespace owns the host.
	hosts    map[string]types.NamespacedName
	reported map[reportKey]bool
	defaults []defaultCandidate // in build order
	problems []Problem
	patch    *patchState // what PatchEndpoints needs of this build (Table.patch)
}

func (b *builder) problem(src SourceRef, reason, format string, args ...any) {
	b.problems = append(b.problems, Problem{Object: src, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// validHost reports whether a lower-case host is usable: no wildcard, or "*." and one label
// wildcard only. "" (any host) is valid.
func validHost(h string) bool {
	return !strings.Contains(h, "*") || strings.HasPrefix(h, "*.") && strings.Count(h, "*") == 1
}

// parsedIngress is an Ingress's annotations read once: its options, their problems, and its
// rules with those of its server aliases.
type parsedIngress struct {
	opts     Options
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
	if k := (reportKey{ingressRef(id), "host " + h}); !b.reported[k] {
		b.reported[k] = true
		b.problem(ingressRef(id), ReasonHostConflict, "%s %q ignored: the host belongs to namespace %s, where Ingress %s named it first", field, h, owner.Namespace, owner)
	}
	return false
}

func (b *builder) ingress(ing *networkingv1.Ingress, p parsedIngress) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	opts, rules := p.opts, p.rules
	for _, pt := range p.problems {
		b.problem(ingressRef(id), pt.reason, "%s", pt.msg)
	}
	if opts.auth != nil {
		opts.Policy.BasicAuth = b.basicAuth(id, opts.auth)
	}
	if opts.extAuth != nil {
		opts.Policy.ExternalAuth = b.externalAuth(id, opts.extAuth)
	}
	// Hosts first: one of another namespace is refused before anything for it is loaded, and
	// a host of ours is known even without a path (its requests stay in this namespace).
	for i, rule := range rules {
		field := fmt.Sprintf("spec.rules[%d].host", i)
		if i >= len(ing.Spec.Rules) {
			field = "server-alias"
		}
		if host := strings.ToLower(rule.Host); host != "" && validHost(host) && b.allowed(id, field, host) {
			b.hostRules(host, ing.Namespace)
		}
	}
	tlsHosts := b.tls(ing, id)
	if d := ing.Spec.DefaultBackend; d != nil {
		if be := b.backend(ingressRef(id), ing.Namespace, d, opts); be != nil {
			b.defaults = append(b.defaults, defaultCandidate{
				route:    &Route{Path: "/", PathType: "Default", Source: ingressRef(id), Backend: be, Options: opts},
				deleting: ing.DeletionTimestamp != nil,
			})
		}
	}
	for _, rule := range rules {
		b.rule(ing, id, rule, opts, tlsHosts)
	}
}

// rule adds the routes of one rule of ing (an Ingress rule or a server-alias copy of one).
func (b *builder) rule(ing *networkingv1.Ingress, id types.NamespacedName, rule networkingv1.IngressRule, opts Options, tlsHosts map[string]bool) {
	host := strings.ToLower(rule.Host)
	if !validHost(host) {
		b.problem(ingressRef(id), ReasonInvalidRule, "host %q: a wildcard must be the whole first label (*.example.com)", rule.Host)
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
func (b *builder) path(ing *networkingv1.Ingress, id types.NamespacedName, rawHost, host string, p networkingv1.HTTPIngressPath, opts Options, tlsHosts map[string]bool) {
	path, pt, kind, re, problem := routePath(p, rawHost, opts.UseRegex)
	if problem != "" {
		b.problem(ingressRef(id), ReasonInvalidRule, "%s", problem)
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
			b.problem(ingressRef(id), ReasonPathConflict, "%s path %q on host %q ignored: Ingress %s already routes it", kind, path, hostOrAny(rawHost), prev)
		}
		return
	}
	be := b.backend(ingressRef(id), ing.Namespace, &p.Backend, opts)
	if be == nil {
		return
	}
	r := &Route{Host: host, Path: path, PathType: pt, Source: ingressRef(id), Backend: be, Options: opts, TLS: tlsHosts[host], Regex: re}
	if host == "" {
		b.nsOwner[nsRouteKey{ing.Namespace, k}] = id
		b.namespace(ing.Namespace).hostless().add(r, kind)
		if other, ok := b.owner[k]; ok {
			b.problem(ingressRef(id), ReasonPathConflict, "%s path %q without a host serves only hosts of namespace %s: Ingress %s routes it for other hosts", kind, path, ing.Namespace, other)
			return
		}
	}
	b.owner[k] = id
	b.hostRules(host, ing.Namespace).add(r, kind)
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
		re, err := regexRoute(path)
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
func (b *builder) basicAuth(id types.NamespacedName, ref *authRef) *BasicAuth {
	ba := &BasicAuth{Realm: ref.realm, Users: map[string]string{}}
	fail := func(format string, args ...any) *BasicAuth {
		b.problem(ingressRef(id), ReasonInvalidAnnotation, "%s: "+format+"; every request is refused (401) until it is fixed", append([]any{ref.key}, args...)...)
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
	sec := b.secrets[types.NamespacedName{Namespace: id.Namespace, Name: ref.name}]
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
		users, err := parseHtpasswd(strings.Join(lines, "\n"))
		if err != nil {
			return fail("Secret %s/%s (auth-map): %v", id.Namespace, ref.name, err)
		}
		ba.Users, ba.Decoy = users, decoyHash(users)
		return ba
	}
	text, ok := sec.Data["auth"]
	if !ok {
		return fail("Secret %s/%s has no key \"auth\" (htpasswd lines; auth-secret-type auth-map reads a user per key)", id.Namespace, ref.name)
	}
	users, err := parseHtpasswd(string(text))
	if err != nil {
		return fail("Secret %s/%s key auth: %v", id.Namespace, ref.name, err)
	}
	if len(users) == 0 {
		return fail("Secret %s/%s key auth holds no user", id.Namespace, ref.name)
	}
	ba.Users, ba.Decoy = users, decoyHash(users)
	return ba
}

// externalAuth resolves auth-url to a Service of the Ingress's own namespace: http:// and
// a host "svc", "svc.ns", "svc.ns.svc" or "svc.ns.svc.cluster.local" (ns the Ingress's), with
// the Service port named by the URL's port (80 when none). Anything else — another
// namespace, an outside host, an address, https — is refused: the proxy would otherwise ask
// whatever a tenant names, the API server or a metadata service included. Refused, the route
// refuses every request (never lets one through unchecked) and a Problem says why.
func (b *builder) externalAuth(id types.NamespacedName, ref *extAuthRef) *ExternalAuth {
	ea := &ExternalAuth{Method: ref.method, Signin: ref.signin, ResponseHeaders: ref.responseHeaders, RequestRedirect: ref.requestRedirect}
	fail := func(format string, args ...any) *ExternalAuth {
		b.problem(ingressRef(id), ReasonInvalidAnnotation, "%s: "+format+"; every request is refused (500) until it is fixed", append([]any{ref.key}, args...)...)
		return ea
	}
	u, err := url.Parse(ref.url)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return fail("%q is not an http:// URL of a Service of namespace %s (https to the auth service is not supported)", ref.url, id.Namespace)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	labels := strings.Split(strings.TrimSuffix(strings.ToLower(host), "."), ".")
	svc, ns := labels[0], id.Namespace
	switch {
	case len(labels) == 1:
	case len(labels) == 2 || len(labels) == 3 && labels[2] == "svc" || len(labels) == 5 && strings.Join(labels[2:], ".") == "svc.cluster.local":
		ns = labels[1]
	default:
		return fail("host %q is not a Service (svc.%s.svc.cluster.local); outside hosts and addresses are not asked", host, id.Namespace)
	}
	if ns != id.Namespace {
		return fail("Service %s/%s is in another namespace; only Services of namespace %s are asked", ns, svc, id.Namespace)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fail("port %q is not a number", port)
	}
	ea.Host, ea.Path = u.Host, u.RequestURI()
	ea.Backend = b.backend(ingressRef(id), ns, &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc,
		Port: networkingv1.ServiceBackendPort{Number: int32(n)}}}, Options{Protocol: ProtocolHTTP, Balance: Balance{Algorithm: RoundRobin}})
	return ea
}

// canary attaches a canary Ingress to the routes it shadows: each of its host and path pairs
// must be routed already by an Ingress of the same namespace (the host's owner), and gets at
// most one canary.
func (b *builder) canary(ing *networkingv1.Ingress, p parsedIngress) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	for _, pt := range p.problems {
		b.problem(ingressRef(id), pt.reason, "%s", pt.msg)
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
				b.problem(ingressRef(id), ReasonInvalidRule, "canary path %q on host %q ignored: no Ingress of namespace %s routes it (a canary needs its main Ingress)", path, hostOrAny(rule.Host), ing.Namespace)
			case r.Canary != nil:
				b.problem(ingressRef(id), ReasonPathConflict, "canary path %q on host %q ignored: Ingress %s is its canary already", path, hostOrAny(rule.Host), r.Canary.Source.NamespacedName)
			default:
				be := b.backend(ingressRef(id), ing.Namespace, &hp.Backend, p.opts)
				if be != nil {
					r.Canary = &Canary{CanaryRule: *p.opts.Canary, Source: ingressRef(id), Backend: be}
				}
			}
		}
	}
}

// routeFor finds the route of a host (of namespace ns) and path as an Ingress rule names
// it; nil when there is none.
func (b *builder) routeFor(ns, host, path string, pt *networkingv1.PathType) *Route {
	var hr *hostRules
	if host == "" {
		hr = b.namespace(ns).anyHost
	} else if b.hosts[host].Namespace == ns {
		hr = b.hostRules(host, ns)
	}
	if hr == nil {
		return nil
	}
	if pt != nil && *pt == networkingv1.PathTypeExact {
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

// hostRules returns the rules of a host, made on first use with ns as its owner; "" is the
// host-less rules of every namespace.
func (b *builder) hostRules(host, ns string) *hostRules {
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
func (b *builder) namespace(ns string) *namespaceRules {
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
	case "Exact":
		hr.exact[r.Path] = r
	case "Regex":
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

// tls loads the certificates of the Ingress's hosts (those of its namespace) into the table
// and returns the hosts it lists. The first Ingress of the owner namespace with a valid
// Secret for a host keeps its certificate; a Secret never serves another namespace's host.
func (b *builder) tls(ing *networkingv1.Ingress, id types.NamespacedName) map[string]bool {
	hosts := map[string]bool{}
	for i, t := range ing.Spec.TLS {
		var ours []string
		for j, h := range t.Hosts {
			if h = strings.ToLower(h); h == "" || !validHost(h) || !b.allowed(id, fmt.Sprintf("spec.tls[%d].hosts[%d]", i, j), h) {
				continue
			}
			b.hostRules(h, ing.Namespace)
			hosts[h] = true
			ours = append(ours, h)
		}
		if t.SecretName == "" || len(ours) == 0 {
			continue // the default certificate serves these hosts
		}
		sec := b.secrets[types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}]
		if sec == nil {
			b.problem(ingressRef(id), ReasonInvalidTLS, "TLS Secret %s/%s not found; the default certificate is served for %v", ing.Namespace, t.SecretName, ours)
			continue
		}
		cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			b.problem(ingressRef(id), ReasonInvalidTLS, "TLS Secret %s/%s: %v; the default certificate is served for %v", ing.Namespace, t.SecretName, err, ours)
			continue
		}
		for _, h := range ours {
			if hr := b.hostRules(h, ing.Namespace); hr.cert == nil {
				hr.cert = &cert
			}
		}
	}
	return hosts
}

// defaultCandidate is an Ingress's spec.defaultBackend.
type defaultCandidate struct {
	route    *Route
	deleting bool
}

// tier ranks what a default backend can serve: 0 a ready endpoint, 1 only endpoints serving
// while terminating, 2 nothing (missing Service or port, no endpoint: 503).
func (c defaultCandidate) tier() int { return c.route.Backend.tier() }

// tier ranks what a backend can serve, for default backends: 0 a ready endpoint, 1 only
// endpoints serving while terminating, 2 nothing. It is the only thing Build reads from a
// backend's endpoints besides copying them (PatchEndpoints compares it).
func (be *Backend) tier() int {
	if len(be.Endpoints) == 0 {
		return 2
	}
	for _, st := range be.States {
		if st.Ready && st.Refused == "" {
			return 0
		}
	}
	return 1
}

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
			b.patch.ranked[c.route.Backend.Key] = true
		}
	}
	b.t.Default = b.defaults[global].route
	for ns, i := range best {
		b.namespace(ns).dflt = b.defaults[i].route
	}
	for i, c := range b.defaults {
		id := c.route.Source.NamespacedName
		switch nsBest := best[id.Namespace]; i {
		case global:
		case nsBest:
			w := b.defaults[global]
			b.problem(ingressRef(id), ReasonPathConflict, "spec.defaultBackend serves only hosts of namespace %s: requests for other hosts go to the default backend of Ingress %s (%s)",
				id.Namespace, w.route.Source.NamespacedName, c.why(w))
		default:
			w := b.defaults[nsBest]
			b.problem(ingressRef(id), ReasonPathConflict, "spec.defaultBackend ignored: the default backend of Ingress %s is preferred (%s)", w.route.Source.NamespacedName, c.why(w))
		}
	}
}

// backend resolves an IngressBackend to endpoints; nil when it cannot be served at all
// (a resource backend). A missing Service or port still gives a backend, with no endpoints
// (503), and a Problem.
func (b *builder) backend(src SourceRef, ns string, ib *networkingv1.IngressBackend, opts Options) *Backend {
	if ib.Service == nil {
		b.problem(src, ReasonInvalidRule, "resource backends are not supported")
		return nil
	}
	svcID := types.NamespacedName{Namespace: ns, Name: ib.Service.Name}
	port := ib.Service.Port.Name
	if port == "" {
		port = strconv.Itoa(int(ib.Service.Port.Number))
	}
	key := svcID.String() + ":" + port + "|" + string(opts.Protocol) + "|" + opts.Balance.String()
	if opts.backendTLS != nil {
		key += "|" + opts.backendTLS.String()
	}
	if be := b.backends[key]; be != nil {
		b.reportRefused(src, be)
		return be
	}
	be := &Backend{Key: key, Service: svcID, Port: port, Protocol: opts.Protocol, Balance: opts.Balance}
	if opts.Protocol == ProtocolHTTPS || opts.Protocol == ProtocolGRPCS {
		be.TLS = b.resolveBackendTLS(src, svcID, opts.backendTLS)
	}
	b.backends[key] = be
	svc := b.services[svcID]
	if svc == nil {
		b.problem(src, ReasonMissingService, "Service %s not found", svcID)
		return be
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (ib.Service.Port.Name != "" && p.Name == ib.Service.Port.Name) || (ib.Service.Port.Name == "" && p.Port == ib.Service.Port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		b.problem(src, ReasonMissingPort, "Service %s has no port %s", svcID, port)
		return be
	}
	b.patch.ports[key] = *sp
	var msg string
	be.Endpoints, be.States, msg = b.resolve(be, b.slices[svcID], sp)
	if msg != "" {
		b.patch.refusals[key] = msg
	}
	b.reportRefused(src, be)
	return be
}

// resolve computes the endpoints of backend be (Service port sp) from the Service's slices,
// and the message of the RefusedEndpoint Problem it causes ("" when none is refused). Build
// and PatchEndpoints both call it: one computation, so a patch cannot drift from a build.
func (b *builder) resolve(be *Backend, slices []*discoveryv1.EndpointSlice, sp *corev1.ServicePort) (routed []string, states []EndpointState, refusal string) {
	routed, states, refused, nRefused, total := b.endpoints(slices, sp)
	if nRefused > 0 {
		const shown = 3
		more := ""
		if len(refused) > shown {
			refused, more = refused[:shown], fmt.Sprintf("; and %d more", len(refused)-shown)
		}
		refusal = fmt.Sprintf("Service %s port %s: %d of %d endpoint addresses refused: %s%s", be.Service, be.Port, nRefused, total, strings.Join(refused, "; "), more)
	}
	return routed, states, refusal
}

// reportRefused reports a backend's refused endpoints on src, once per object.
func (b *builder) reportRefused(src SourceRef, be *Backend) {
	msg := b.patch.refusals[be.Key]
	if msg == "" {
		return
	}
	if k := (reportKey{src, "backend " + be.Key}); !b.reported[k] {
		b.reported[k] = true
		b.problem(src, ReasonRefusedEndpoint, "%s", msg)
	}
}

// endpoints lists "ip:port" of the ready endpoints of a Service port, or, when none is
// ready, of those serving while terminating (they still finish requests during a rollout).
// states lists every address of the port in the EndpointSlices with its conditions, sorted,
// refused ones with the reason. refused describes the refusals for a Problem (one item per
// refused slice or address); nRefused of total listed addresses were refused.
func (b *builder) endpoints(slices []*discoveryv1.EndpointSlice, sp *corev1.ServicePort) (routed []string, states []EndpointState, refused []string, nRefused, total int) {
	var ready, serving []string
	seen, listed := map[string]bool{}, map[string]int{} // listed: index in states
	for _, s := range slices {
		var port int32 = -1
		for _, p := range s.Ports {
			if (p.Name == nil && sp.Name == "") || (p.Name != nil && *p.Name == sp.Name) {
				if p.Port != nil {
					port = *p.Port
				}
				break
			}
		}
		if port < 0 || (p2proto(s) != "" && p2proto(s) != sp.Protocol && sp.Protocol != "") {
			continue
		}
		sliceWhy := b.sliceRefused(s)
		if sliceWhy != "" && len(s.Endpoints) > 0 {
			refused = append(refused, sliceWhy)
		}
		for i, e := range s.Endpoints {
			c := e.Conditions
			isReady := c.Ready == nil || *c.Ready // nil means unknown: ready, says the API
			isServing := c.Serving != nil && *c.Serving
			for j, raw := range e.Addresses {
				total++
				addr, why := raw, sliceWhy
				if why == "" {
					if addr, why = b.address(s.AddressType, raw); why != "" {
						refused = append(refused, fmt.Sprintf("EndpointSlice %s/%s endpoints[%d].addresses[%d] %q: %s", s.Namespace, s.Name, i, j, raw, why))
					}
				}
				hp := net.JoinHostPort(addr, strconv.Itoa(int(port)))
				st := EndpointState{Addr: hp, Ready: isReady, Serving: isServing || isReady && c.Serving == nil,
					Terminating: c.Terminating != nil && *c.Terminating, Refused: why}
				// The first slice listing an address describes it, unless that slice was
				// refused and this one is not.
				if k, ok := listed[hp]; !ok {
					listed[hp] = len(states)
					states = append(states, st)
				} else if states[k].Refused != "" && why == "" {
					states[k] = st
				}
				if why != "" {
					nRefused++
					continue
				}
				if (!isReady && !isServing) || seen[hp] {
					continue
				}
				seen[hp] = true
				if isReady {
					ready = append(ready, hp)
				} else {
					serving = append(serving, hp)
				}
			}
		}
	}
	out := ready
	if len(out) == 0 {
		out = serving
	}
	sort.Strings(out)
	sort.Slice(states, func(i, j int) bool { return states[i].Addr < states[j].Addr })
	return out, states, refused, nRefused, total
}

// sliceRefused says why no address of a slice is routed, or "". Only the endpoint-slice
// controller's slices are trusted by default: anyone who may write EndpointSlices (or
// Endpoints, which the mirroring controller copies into slices) could otherwise point the
// proxy at the API server, its own admin port or any address it can reach.
func (b *builder) sliceRefused(s *discoveryv1.EndpointSlice) string {
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		// FQDN endpoints would make the proxy resolve and dial any name
		// (metadata.google.internal).
		return fmt.Sprintf("EndpointSlice %s/%s has addressType %s (only IPv4 and IPv6 are served)", s.Namespace, s.Name, s.AddressType)
	}
	if b.in.AllowUnmanagedSlices {
		return ""
	}
	switch m, ok := s.Labels[discoveryv1.LabelManagedBy]; {
	case !ok:
		return fmt.Sprintf("EndpointSlice %s/%s is not managed by %s (no label %s)", s.Namespace, s.Name, EndpointSliceController, discoveryv1.LabelManagedBy)
	case m != EndpointSliceController:
		return fmt.Sprintf("EndpointSlice %s/%s is not managed by %s (managed-by %q)", s.Namespace, s.Name, EndpointSliceController, m)
	}
	return ""
}

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// address checks one endpoint address of a slice of addressType at: a pod IP of the slice's
// family, never a special address. It returns the address in canonical form, or why it is
// refused.
func (b *builder) address(at discoveryv1.AddressType, raw string) (addr, refused string) {
	a, err := netip.ParseAddr(raw)
	switch {
	case err != nil:
		return raw, "not an IP address"
	case a.Zone() != "":
		return raw, "address with a zone"
	case at == discoveryv1.AddressTypeIPv4 && !a.Is4():
		return raw, "IPv6 address in an IPv4 EndpointSlice"
	case at == discoveryv1.AddressTypeIPv6 && (a.Is4() || a.Is4In6()):
		return raw, "IPv4 address in an IPv6 EndpointSlice"
	case a.IsUnspecified():
		return raw, "unspecified address"
	case a.IsLoopback():
		if !b.in.AllowLoopbackEndpoints {
			return raw, "loopback address"
		}
	case a.IsLinkLocalUnicast():
		return raw, "link-local address" // 169.254.169.254 is the cloud metadata service
	case a.IsMulticast():
		return raw, "multicast address"
	case a == broadcast:
		return raw, "broadcast address"
	case a.Is4():
		return raw, "" // ParseAddr takes only the canonical IPv4 form (no leading zeros)
	}
	return a.String(), ""
}

// p2proto is the protocol of a slice's first port; slices carry one protocol in practice.
func p2proto(s *discoveryv1.EndpointSlice) corev1.Protocol {
	if len(s.Ports) > 0 && s.Ports[0].Protocol != nil {
		return *s.Ports[0].Protocol
	}
	return ""
}

// passthrough makes host a TLS passthrough host of Ingress id: its TLS connections go,
// undecrypted, to the backend of the rule's first path. Only an exact host of the Ingress's
// own namespace (checked by the caller) can be one; the first Ingress to ask wins.
func (b *builder) passthrough(id types.NamespacedName, ns, host string, rule *networkingv1.HTTPIngressRuleValue, opts Options) {
	switch {
	case !b.in.SSLPassthrough:
		if k := (reportKey{ingressRef(id), "ssl-passthrough"}); !b.reported[k] {
			b.reported[k] = true
			b.problem(ingressRef(id), ReasonInvalidAnnotation, "ssl-passthrough needs the proxy's --enable-ssl-passthrough; the hosts are served with TLS terminated")
		}
		return
	case host == "" || strings.HasPrefix(host, "*."):
		b.problem(ingressRef(id), ReasonInvalidRule, "ssl-passthrough: host %q: passthrough routes by the exact name a client sends (SNI); a rule without a host or with a wildcard is not passed through", host)
		return
	case len(rule.Paths) == 0:
		return
	}
	if prev, ok := b.t.passthrough[host]; ok {
		b.problem(ingressRef(id), ReasonPathConflict, "ssl-passthrough: host %q is passed through to %s already", host, prev.Service)
		return
	}
	be := b.backend(ingressRef(id), ns, &rule.Paths[0].Backend, opts)
	if be == nil {
		return
	}
	if b.t.passthrough == nil {
		b.t.passthrough = map[string]*Backend{}
	}
	b.t.passthrough[host] = be
}
