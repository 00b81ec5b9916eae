package table

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// GatewayController is the controllerName of the GatewayClasses metalgate serves; it is the
// controllerName of the route parent statuses a Gateway table computes (the same value as
// controllers/gateway.ControllerName).
const GatewayController gatewayv1.GatewayController = "metalgate.io/gateway-controller"

const gatewayGroup = gatewayv1.GroupName

// AppProtocolH2C is the Service port appProtocol of backends that speak HTTP/2 without TLS
// (prior knowledge): HTTPRoutes reach them over h2c.
const AppProtocolH2C = "kubernetes.io/h2c"

// The route kinds a Gateway table serves (RouteStatus.Kind, Route.Source.Kind).
const (
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
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
	Regex       *regexp.Regexp // RegularExpression matches, anchored at both ends
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
// controller, or the proxy): a pure result of Build, written by nobody here.
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
}

type gwListener struct {
	name     string
	hostname string               // "" for any host
	hosts    map[string][]gwEntry // by effective hostname: exact, "*.suffix", or "" for any
	// https: an HTTPS listener (TLS terminated here). cert is its certificate, nil when its
	// certificateRefs resolve to none (then its hosts get no TLS handshake at all).
	https bool
	cert  *tls.Certificate
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
		if !hostnameMatches(l.hostname, host) {
			continue
		}
		entries, ok := l.hosts[host]
		for i := 0; !ok && i < len(host); i++ {
			if host[i] == '.' {
				entries, ok = l.hosts["*"+host[i:]]
			}
		}
		if !ok {
			entries = l.hosts[""]
		}
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

// gwPathMatches says whether path takes route r of a Gateway table: an Exact path, an
// HTTPRoute's RegularExpression or a GRPCRoute's method expression (each anchored, over the
// whole path), or a path prefix by elements.
func gwPathMatches(r *Route, path string) bool {
	switch r.PathType {
	case "Exact":
		return r.Path == path
	case pathRegex, grpcMethodRegex:
		return r.Regex.MatchString(path)
	}
	return prefixMatch(r.Path, path)
}

// GatewayCertificate returns the certificate of a Gateway table's HTTPS listener on local port
// port for TLS server name serverName: the listener whose hostname covers it most
// specifically, as Match picks listeners; with no server name, the listener without a
// hostname. nil when that listener is not HTTPS or has no certificate, or none covers the
// name: the handshake then fails — a Gateway never answers with a certificate of another
// listener, nor with a default one.
func (t *Table) GatewayCertificate(port int32, serverName string) *tls.Certificate {
	if t.gateway == nil {
		return nil
	}
	host := normalizeHost(serverName)
	for _, l := range t.gateway.ports[port] {
		if host == "" && l.hostname != "" || !hostnameMatches(l.hostname, host) {
			continue
		}
		if !l.https {
			return nil
		}
		return l.cert
	}
	return nil
}

// listenerCertificate is an HTTPS listener's certificate: the first of its certificateRefs
// that names a TLS Secret holding a valid key pair, or why none does. A Secret of another
// namespace is used only when a ReferenceGrant there lets Gateways of the Gateway's namespace
// refer to it (Granted); otherwise the controller reports RefNotPermitted on the listener.
func (b *builder) listenerCertificate(gw *gatewayv1.Gateway, l gatewayv1.Listener) (*tls.Certificate, string) {
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return nil, "no certificateRefs"
	}
	if l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate {
		return nil, fmt.Sprintf("TLS mode %s is not supported", *l.TLS.Mode)
	}
	var problems []string
	for _, ref := range l.TLS.CertificateRefs {
		name := types.NamespacedName{Namespace: gw.Namespace, Name: string(ref.Name)}
		if ref.Namespace != nil {
			name.Namespace = string(*ref.Namespace)
		}
		switch {
		case ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Secret":
			problems = append(problems, fmt.Sprintf("%s is not a core Secret", ref.Name))
			continue
		case name.Namespace != gw.Namespace && !Granted(b.in.ReferenceGrants, "Gateway", gw.Namespace, "Secret", name):
			problems = append(problems, fmt.Sprintf("Secret %s is in another namespace and no ReferenceGrant there allows it", name))
			continue
		}
		sec := b.secrets[name]
		if sec == nil {
			problems = append(problems, fmt.Sprintf("Secret %s not found", name))
			continue
		}
		if sec.Type != corev1.SecretTypeTLS {
			problems = append(problems, fmt.Sprintf("Secret %s is of type %q, not %s", name, sec.Type, corev1.SecretTypeTLS))
			continue
		}
		cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			problems = append(problems, fmt.Sprintf("Secret %s: %v", name, err))
			continue
		}
		return &cert, ""
	}
	return nil, strings.Join(problems, "; ")
}

// hostnameMatches reports whether a listener or route hostname ("" any, "*.s" any host under
// s by one label or more, or exact) covers host.
func hostnameMatches(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1
	}
	return pattern == host
}

// intersect is the hostname a route hostname serves on a listener (Gateway API: the more
// specific of the two when one covers the other), or false when they do not intersect.
func intersect(listener, route string) (string, bool) {
	switch {
	case listener == "":
		return route, true
	case route == "":
		return listener, true
	case hostnameMatches(listener, route) || listener == route:
		return route, true
	case hostnameMatches(route, listener):
		return listener, true
	case strings.HasPrefix(listener, "*.") && strings.HasPrefix(route, "*.") && strings.HasSuffix(route, listener[1:]):
		return route, true
	case strings.HasPrefix(listener, "*.") && strings.HasPrefix(route, "*.") && strings.HasSuffix(listener, route[1:]):
		return listener, true
	}
	return "", false
}

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

// gatewayRule is an HTTPRoute rule compiled once, before its listeners are known.
type gatewayRule struct {
	routes []*Route // one per match, Host not set
}

// buildGateway compiles the HTTPRoutes attached to Input.Gateway (Ingresses are not read).
func (b *builder) buildGateway() {
	gw := b.in.Gateway
	st := &GatewayStatus{AttachedRoutes: map[string]int32{}, CertificateProblems: map[string]string{}}
	gt, listeners := b.gatewayListeners(gw, st)
	nsLabels := map[string]labels.Set{}
	for _, ns := range b.in.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	seq := 0
	for _, ro := range routesByAge(b.gatewayRoutes()) {
		var ours []int
		for i, pr := range ro.parentRefs {
			if b.namesGateway(pr, ro.meta.Namespace) {
				ours = append(ours, i)
			}
		}
		if len(ours) == 0 {
			continue // another Gateway's route: not ours to route nor to write status on
		}
		st.Routes = append(st.Routes, b.attachRoute(gw, ro, ours, listeners, nsLabels, st, seq))
		seq += 1 << 32
	}
	for _, l := range listeners {
		for _, es := range l.hosts {
			sort.SliceStable(es, func(i, j int) bool { return gwBefore(es[i], es[j]) })
		}
	}
	sort.Slice(st.Routes, func(i, j int) bool {
		if a, c := st.Routes[i], st.Routes[j]; a.Route != c.Route {
			return a.Route.String() < c.Route.String()
		}
		return st.Routes[i].Kind < st.Routes[j].Kind
	})
	b.t.gateway, b.t.Gateway = gt, st
}

// gatewayListeners makes gw's listeners (in spec order, with their certificates) and the table
// of them by port, the most specific hostname first; every listener starts with 0 routes.
func (b *builder) gatewayListeners(gw *gatewayv1.Gateway, st *GatewayStatus) (*gatewayTable, []*gwListener) {
	gt := &gatewayTable{ports: map[int32][]*gwListener{}}
	listeners := make([]*gwListener, len(gw.Spec.Listeners))
	for i, l := range gw.Spec.Listeners {
		st.AttachedRoutes[string(l.Name)] = 0
		h := ""
		if l.Hostname != nil {
			h = strings.ToLower(string(*l.Hostname))
		}
		listeners[i] = &gwListener{name: string(l.Name), hostname: h, hosts: map[string][]gwEntry{}}
		if l.Protocol == gatewayv1.HTTPSProtocolType {
			listeners[i].https = true
			var problem string
			if listeners[i].cert, problem = b.listenerCertificate(gw, l); problem != "" {
				st.CertificateProblems[string(l.Name)] = problem
			}
		}
		gt.ports[l.Port] = append(gt.ports[l.Port], listeners[i])
	}
	for _, ls := range gt.ports {
		sort.SliceStable(ls, func(i, j int) bool { return specificity(ls[i].hostname) > specificity(ls[j].hostname) })
	}
	return gt, listeners
}

// gwRoute is an HTTPRoute or a GRPCRoute, as far as attaching it to listeners goes: the
// fields both kinds share, and the route itself to compile.
type gwRoute struct {
	kind       string // KindHTTPRoute or KindGRPCRoute
	meta       *metav1.ObjectMeta
	parentRefs []gatewayv1.ParentReference
	hostnames  []gatewayv1.Hostname
	http       *gatewayv1.HTTPRoute // set for KindHTTPRoute
	grpc       *gatewayv1.GRPCRoute // set for KindGRPCRoute
}

// ref is the route as a backendRef's referrer: its kind, namespace and name.
func (r gwRoute) ref() SourceRef {
	return SourceRef{Kind: r.kind, NamespacedName: types.NamespacedName{Namespace: r.meta.Namespace, Name: r.meta.Name}}
}

// gatewayRoutes is every HTTPRoute and GRPCRoute of the Input.
func (b *builder) gatewayRoutes() []gwRoute {
	out := make([]gwRoute, 0, len(b.in.HTTPRoutes)+len(b.in.GRPCRoutes))
	for _, hr := range b.in.HTTPRoutes {
		out = append(out, gwRoute{kind: KindHTTPRoute, meta: &hr.ObjectMeta, parentRefs: hr.Spec.ParentRefs, hostnames: hr.Spec.Hostnames, http: hr})
	}
	for _, gr := range b.in.GRPCRoutes {
		out = append(out, gwRoute{kind: KindGRPCRoute, meta: &gr.ObjectMeta, parentRefs: gr.Spec.ParentRefs, hostnames: gr.Spec.Hostnames, grpc: gr})
	}
	return out
}

// routesByAge is routes oldest first, then by namespace/name (then kind): Gateway API's order
// of precedence between routes, HTTPRoutes and GRPCRoutes alike.
func routesByAge(routes []gwRoute) []gwRoute {
	sort.SliceStable(routes, func(i, j int) bool {
		a, c := routes[i].meta, routes[j].meta
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		if a.Name != c.Name {
			return a.Name < c.Name
		}
		return routes[i].kind < routes[j].kind
	})
	return routes
}

// attachRoute compiles ro, attaches it through its parentRefs ours (indexes naming gw) to the
// listeners that admit it, counting it once per listener and adding its routes there (seq
// orders them after older routes'), and returns its parent statuses.
func (b *builder) attachRoute(gw *gatewayv1.Gateway, ro gwRoute, ours []int, listeners []*gwListener,
	nsLabels map[string]labels.Set, st *GatewayStatus, seq int) RouteStatus {
	var rules []gatewayRule
	var unsupported, refsMsg string
	var refsReason gatewayv1.RouteConditionReason
	if ro.grpc != nil {
		rules, unsupported, refsReason, refsMsg = b.compileGRPCRoute(ro.grpc, ro.ref())
	} else {
		rules, unsupported, refsReason, refsMsg = b.compileHTTPRoute(ro.http, ro.ref())
	}
	rs := RouteStatus{Kind: ro.kind, Route: ro.ref().NamespacedName}
	attached := map[int]bool{}
	for _, i := range ours {
		pr := ro.parentRefs[i]
		reason, msg, hosts := b.attach(gw, ro, pr, nsLabels)
		if reason == "" && unsupported != "" {
			reason, msg = gatewayv1.RouteReasonUnsupportedValue, unsupported
		}
		for li, hs := range hosts {
			if attached[li] {
				continue
			}
			attached[li] = true
			st.AttachedRoutes[listeners[li].name]++
			if unsupported != "" {
				continue // a route with a value metalgate does not implement serves nothing
			}
			for _, h := range hs {
				for ri, rule := range rules {
					for mi, tmpl := range rule.routes {
						r := *tmpl
						r.Host = h
						listeners[li].hosts[h] = append(listeners[li].hosts[h], gwEntry{r: &r, seq: seq + ri<<16 + mi})
					}
				}
			}
		}
		rs.Parents = append(rs.Parents, parentStatus(gw, ro.meta.Generation, pr, reason, msg, refsReason, refsMsg))
	}
	return rs
}

// parentStatus is a route's status for one parentRef naming gw: Accepted (or why not) and
// ResolvedRefs (or which reason the first unresolved backendRef gave).
func parentStatus(gw *gatewayv1.Gateway, generation int64, pr gatewayv1.ParentReference,
	reason gatewayv1.RouteConditionReason, msg string, refsReason gatewayv1.RouteConditionReason, refsMsg string) gatewayv1.RouteParentStatus {
	accepted := metav1.Condition{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.RouteReasonAccepted), Message: "attached to Gateway " + gw.Namespace + "/" + gw.Name, ObservedGeneration: generation}
	if reason != "" {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(reason), msg
	}
	resolved := metav1.Condition{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "every backendRef resolved", ObservedGeneration: generation}
	if refsReason != "" {
		resolved.Status, resolved.Reason, resolved.Message = metav1.ConditionFalse, string(refsReason), refsMsg
	}
	return gatewayv1.RouteParentStatus{ParentRef: pr, ControllerName: GatewayController, Conditions: []metav1.Condition{accepted, resolved}}
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
	if ax, cx := ra.PathType == pathRegex, rc.PathType == pathRegex; ax != cx {
		return ax
	}
	if len(ra.Path) != len(rc.Path) {
		return len(ra.Path) > len(rc.Path)
	}
	// A GRPCRoute's method expression (its Path "/") is more specific than no method match.
	if ax, cx := ra.PathType == grpcMethodRegex, rc.PathType == grpcMethodRegex; ax != cx {
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

// namesGateway reports whether a parentRef names the table's Gateway.
func (b *builder) namesGateway(pr gatewayv1.ParentReference, routeNS string) bool {
	if pr.Group != nil && string(*pr.Group) != gatewayGroup || pr.Kind != nil && *pr.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return ns == b.in.Gateway.Namespace && string(pr.Name) == b.in.Gateway.Name
}

// attach finds the listeners a parentRef of the route attaches to, with the hostnames the
// route serves on each (by listener index), or the reason it attaches nowhere.
func (b *builder) attach(gw *gatewayv1.Gateway, ro gwRoute, pr gatewayv1.ParentReference, nsLabels map[string]labels.Set) (gatewayv1.RouteConditionReason, string, map[int][]string) {
	var selected []int
	for i, l := range gw.Spec.Listeners {
		if pr.SectionName != nil && *pr.SectionName != l.Name || pr.Port != nil && *pr.Port != l.Port {
			continue
		}
		selected = append(selected, i)
	}
	if len(selected) == 0 {
		return gatewayv1.RouteReasonNoMatchingParent, fmt.Sprintf("Gateway %s/%s has no listener%s", gw.Namespace, gw.Name, sectionText(pr)), nil
	}
	var allowed []int
	var why []string
	for _, i := range selected {
		l := &gw.Spec.Listeners[i]
		if w := routeRefused(l, gw.Namespace, ro.meta.Namespace, ro.kind, nsLabels); w != "" {
			why = append(why, fmt.Sprintf("listener %s: %s", l.Name, w))
			continue
		}
		allowed = append(allowed, i)
	}
	if len(allowed) == 0 {
		return gatewayv1.RouteReasonNotAllowedByListeners, strings.Join(why, "; "), nil
	}
	hosts := map[int][]string{}
	for _, i := range allowed {
		l := gw.Spec.Listeners[i]
		lh := ""
		if l.Hostname != nil {
			lh = strings.ToLower(string(*l.Hostname))
		}
		var hs []string
		if len(ro.hostnames) == 0 {
			hs = []string{lh}
		}
		for _, rh := range ro.hostnames {
			if h, ok := intersect(lh, strings.ToLower(string(rh))); ok {
				hs = append(hs, h)
			}
		}
		if len(hs) > 0 {
			hosts[i] = hs
		}
	}
	if len(hosts) == 0 {
		return gatewayv1.RouteReasonNoMatchingListenerHostname, fmt.Sprintf("no hostname of the route intersects the hostname of listener%s", sectionText(pr)), nil
	}
	return "", "", hosts
}

func sectionText(pr gatewayv1.ParentReference) string {
	s := ""
	if pr.SectionName != nil {
		s += fmt.Sprintf(" named %q", *pr.SectionName)
	}
	if pr.Port != nil {
		s += fmt.Sprintf(" on port %d", *pr.Port)
	}
	return s
}

// routeRefused says why listener l of a Gateway in namespace gwNS does not admit a route of
// kind kind (HTTPRoute or GRPCRoute: both are served on HTTP and HTTPS listeners) in
// namespace routeNS, or "".
func routeRefused(l *gatewayv1.Listener, gwNS, routeNS, kind string, nsLabels map[string]labels.Set) string {
	if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
		return fmt.Sprintf("protocol %s does not serve %ss", l.Protocol, kind)
	}
	from, ar := gatewayv1.NamespacesFromSame, l.AllowedRoutes
	if ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil {
		from = *ar.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
	case gatewayv1.NamespacesFromSame:
		if routeNS != gwNS {
			return fmt.Sprintf("allowedRoutes admits only namespace %s", gwNS)
		}
	case gatewayv1.NamespacesFromSelector:
		if ar.Namespaces.Selector == nil {
			return "allowedRoutes.namespaces.selector is missing"
		}
		sel, err := metav1.LabelSelectorAsSelector(ar.Namespaces.Selector)
		if err != nil {
			return fmt.Sprintf("allowedRoutes.namespaces.selector: %v", err)
		}
		ls, ok := nsLabels[routeNS]
		if !ok || !sel.Matches(ls) {
			return fmt.Sprintf("namespace %s does not match allowedRoutes.namespaces.selector", routeNS)
		}
	default:
		return fmt.Sprintf("allowedRoutes.namespaces.from %q is not supported", from)
	}
	if ar == nil || len(ar.Kinds) == 0 {
		return ""
	}
	for _, k := range ar.Kinds {
		if (k.Group == nil || string(*k.Group) == gatewayGroup) && string(k.Kind) == kind {
			return ""
		}
	}
	return "allowedRoutes.kinds does not list " + kind
}

// compileHTTPRoute compiles an HTTPRoute's rules into routes without a host. unsupported
// says which value metalgate does not implement ("" when none: then the route is served);
// refsReason and refsMsg say which backendRefs did not resolve ("" when all did).
func (b *builder) compileHTTPRoute(hr *gatewayv1.HTTPRoute, from SourceRef) (rules []gatewayRule, unsupported string, refsReason gatewayv1.RouteConditionReason, refsMsg string) {
	var refProblems []string
	for ri, rule := range hr.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		opts, _ := parseOptions(nil, false) // the defaults: plain HTTP, round robin
		var fullPath *string
		if why := ruleUnsupported(rule); why != "" {
			return nil, field + "." + why, "", ""
		}
		if rule.Timeouts != nil {
			var why string
			if opts.Policy.RequestTimeout, why = routeTimeout(rule.Timeouts); why != "" {
				return nil, field + ".timeouts." + why, "", ""
			}
		}
		for fi, f := range rule.Filters {
			ff := fmt.Sprintf("%s.filters[%d]", field, fi)
			var why string
			switch f.Type {
			case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
				opts.Policy.RequestHeaders, why = headerEdits(f.RequestHeaderModifier)
			case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
				opts.Policy.ResponseHeaders, why = headerEdits(f.ResponseHeaderModifier)
			case gatewayv1.HTTPRouteFilterRequestRedirect:
				opts.Policy.RequestRedirect, why = requestRedirect(f.RequestRedirect)
			case gatewayv1.HTTPRouteFilterURLRewrite:
				why = urlRewrite(f.URLRewrite, &opts.Policy, &fullPath)
			case gatewayv1.HTTPRouteFilterCORS:
				if opts.Policy.CORS != nil {
					return nil, ff + ": CORS filter cannot be repeated", "", ""
				}
				if opts.Policy.CORS, why = gatewayCORS(f.CORS); why != "" {
					return nil, ff + "." + why, "", ""
				}
			case gatewayv1.HTTPRouteFilterRequestMirror:
				var m Mirror
				var reason gatewayv1.RouteConditionReason
				var msg string
				if m, reason, msg, why = b.requestMirror(from, f.RequestMirror, opts); reason != "" {
					if refsReason == "" {
						refsReason = reason
					}
					refProblems = append(refProblems, ff+".requestMirror.backendRef: "+msg)
				}
				opts.Policy.Mirrors = append(opts.Policy.Mirrors, m)
			default:
				why = fmt.Sprintf("filter type %s is not supported", f.Type)
			}
			if why != "" {
				return nil, ff + ": " + why, "", ""
			}
		}
		refs := make([]ruleRef, len(rule.BackendRefs))
		for i, ref := range rule.BackendRefs {
			refs[i].ref = ref.BackendRef
			for _, f := range ref.Filters {
				refs[i].filters = append(refs[i].filters, refFilter{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier})
			}
		}
		be, canary, split, why := b.ruleTarget(from, field, refs, opts, &refsReason, &refProblems)
		if why != "" {
			return nil, why, "", ""
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		var gr gatewayRule
		for mi, m := range matches {
			r, why := matchRoute(m)
			if why != "" {
				return nil, fmt.Sprintf("%s.matches[%d].%s", field, mi, why), "", ""
			}
			r.Source, r.Backend, r.Canary, r.Split, r.Options = from, be, canary, split, opts
			if r.PathType == pathRegex && (fullPath == nil && opts.Policy.Rewrite != nil ||
				opts.Policy.RequestRedirect != nil && opts.Policy.RequestRedirect.PrefixPath != nil) {
				return nil, fmt.Sprintf("%s.matches[%d].path: ReplacePrefixMatch needs a PathPrefix match, not RegularExpression", field, mi), "", ""
			}
			if fullPath != nil && r.PathType != "Exact" {
				// The data plane replaces a whole path by expanding a regular expression
				// matching all of it (a RegularExpression path is one already); "$" in the
				// target is literal.
				if r.PathType != pathRegex {
					r.Regex = matchAll
				}
				r.Options.Policy.Rewrite = &Rewrite{Target: strings.ReplaceAll(*fullPath, "$", "$$"), Regex: true}
			}
			gr.routes = append(gr.routes, r)
		}
		rules = append(rules, gr)
	}
	return rules, "", refsReason, strings.Join(refProblems, "; ")
}

// matchAll matches every path (a full-path URLRewrite on a prefix route).
var matchAll = regexp.MustCompile(`^(?s).*$`)

// ruleUnsupported names a rule field metalgate does not implement, or "".
func ruleUnsupported(rule gatewayv1.HTTPRouteRule) string {
	switch {
	case rule.Retry != nil:
		return "retry: not supported"
	case rule.SessionPersistence != nil:
		return "sessionPersistence: not supported"
	}
	return ""
}

// matchRoute makes the route of one HTTPRoute match: path, method, headers, query.
func matchRoute(m gatewayv1.HTTPRouteMatch) (*Route, string) {
	r := &Route{Path: "/", PathType: "Prefix", Match: &RequestMatch{}}
	if p := m.Path; p != nil {
		if p.Value != nil {
			r.Path = *p.Value
		}
		if !strings.HasPrefix(r.Path, "/") {
			return nil, fmt.Sprintf("path.value %q must start with /", r.Path)
		}
		switch t := gatewayv1.PathMatchPathPrefix; {
		case p.Type != nil && *p.Type == gatewayv1.PathMatchExact:
			r.PathType = "Exact"
		case p.Type != nil && *p.Type == gatewayv1.PathMatchRegularExpression:
			re, err := anchored(r.Path)
			if err != nil {
				return nil, fmt.Sprintf("path.value: not a regular expression (RE2 syntax): %v", err)
			}
			r.PathType, r.Regex = pathRegex, re
		case p.Type == nil || *p.Type == t:
		default:
			return nil, fmt.Sprintf("path.type %s is not supported (Exact, PathPrefix and RegularExpression are)", *p.Type)
		}
	}
	if m.Method != nil {
		r.Match.Method = string(*m.Method)
	}
	for i, h := range m.Headers {
		if !validHeaderName(string(h.Name)) {
			return nil, fmt.Sprintf("headers[%d].name %q is not a header name", i, h.Name)
		}
		vm := ValueMatch{Name: canonicalHeader(string(h.Name)), Value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			var err error
			if vm.Regex, err = anchored(h.Value); err != nil {
				return nil, fmt.Sprintf("headers[%d].value: not a regular expression (RE2 syntax): %v", i, err)
			}
		} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
			return nil, fmt.Sprintf("headers[%d].type %s is not supported (Exact and RegularExpression are)", i, *h.Type)
		}
		r.Match.Headers = append(r.Match.Headers, vm)
	}
	for i, q := range m.QueryParams {
		vm := ValueMatch{Name: string(q.Name), Value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			var err error
			if vm.Regex, err = anchored(q.Value); err != nil {
				return nil, fmt.Sprintf("queryParams[%d].value: not a regular expression (RE2 syntax): %v", i, err)
			}
		} else if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact {
			return nil, fmt.Sprintf("queryParams[%d].type %s is not supported (Exact and RegularExpression are)", i, *q.Type)
		}
		r.Match.Query = append(r.Match.Query, vm)
	}
	return r, ""
}

// pathRegex is the PathType of an HTTPRoute's RegularExpression path match: Route.Regex,
// anchored, matches the whole path.
const pathRegex = "RegularExpression"

// anchored compiles a Gateway API RegularExpression (RE2, Go's regexp syntax) so that it
// matches a whole value, never a part of one: "/api" does not take "/api/v1", nor "a" "bad".
func anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// headerEdits maps a header modifier filter onto HeaderEdits. The framing and hop-by-hop
// headers (and Host) stay the proxy's, as for the Ingress annotations.
func headerEdits(f *gatewayv1.HTTPHeaderFilter) (HeaderEdits, string) {
	var e HeaderEdits
	if f == nil {
		return e, "the filter's settings are missing"
	}
	check := func(n, v string) string {
		if !validHeaderName(n) || protectedHeader(n) || !validHeaderValue(v) {
			return fmt.Sprintf("header %q cannot be edited (invalid, or set only by the proxy)", n)
		}
		return ""
	}
	for _, h := range f.Set {
		if why := check(string(h.Name), h.Value); why != "" {
			return e, why
		}
		e.Set = append(e.Set, Header{Name: canonicalHeader(string(h.Name)), Value: h.Value})
	}
	for _, h := range f.Add {
		if why := check(string(h.Name), h.Value); why != "" {
			return e, why
		}
		e.Add = append(e.Add, Header{Name: canonicalHeader(string(h.Name)), Value: h.Value})
	}
	for _, n := range f.Remove {
		if why := check(n, ""); why != "" {
			return e, why
		}
		e.Remove = append(e.Remove, canonicalHeader(n))
	}
	return e, ""
}

// routeTimeout is the deadline of a rule's timeouts: the shorter of request and
// backendRequest that is set and not zero ("0s" disables one). metalgate sends a request to a
// backend once (a connect failure is retried before anything is sent), so one deadline over
// the exchange is both.
func routeTimeout(t *gatewayv1.HTTPRouteTimeouts) (time.Duration, string) {
	var out time.Duration
	for _, f := range []struct {
		name string
		v    *gatewayv1.Duration
	}{{"request", t.Request}, {"backendRequest", t.BackendRequest}} {
		if f.v == nil {
			continue
		}
		d, err := time.ParseDuration(string(*f.v))
		if err != nil || d < 0 {
			return 0, fmt.Sprintf("%s: %q is not a duration", f.name, *f.v)
		}
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out, ""
}

// requestRedirect maps a RequestRedirect filter onto Policy.RequestRedirect.
func requestRedirect(f *gatewayv1.HTTPRequestRedirectFilter) (*RequestRedirect, string) {
	if f == nil {
		return nil, "the filter's settings are missing"
	}
	rr := &RequestRedirect{Code: http.StatusFound}
	if f.StatusCode != nil {
		rr.Code = *f.StatusCode
	}
	switch rr.Code {
	case 301, 302, 303, 307, 308:
	default:
		return nil, fmt.Sprintf("requestRedirect.statusCode %d is not a redirect", rr.Code)
	}
	if f.Scheme != nil {
		if *f.Scheme != "http" && *f.Scheme != "https" {
			return nil, fmt.Sprintf("requestRedirect.scheme %q: http or https", *f.Scheme)
		}
		rr.Scheme = *f.Scheme
	}
	if f.Hostname != nil {
		rr.Host = strings.ToLower(string(*f.Hostname))
	}
	if f.Port != nil {
		rr.Port = int(*f.Port)
	}
	if pm := f.Path; pm != nil {
		switch {
		case pm.Type == gatewayv1.FullPathHTTPPathModifier && pm.ReplaceFullPath != nil:
			rr.FullPath = pm.ReplaceFullPath
		case pm.Type == gatewayv1.PrefixMatchHTTPPathModifier && pm.ReplacePrefixMatch != nil:
			rr.PrefixPath = pm.ReplacePrefixMatch
		default:
			return nil, fmt.Sprintf("requestRedirect.path.type %s is not supported (or its value is missing)", pm.Type)
		}
	}
	return rr, ""
}

// requestMirror maps a RequestMirror filter onto a Mirror: its backendRef resolved like a
// rule's (reason and msg say why it did not: the mirror then gets nothing), its percent or
// fraction the share of requests it gets (all when neither is set); why names a value that
// is not supported.
func (b *builder) requestMirror(from SourceRef, f *gatewayv1.HTTPRequestMirrorFilter, opts Options) (m Mirror, reason gatewayv1.RouteConditionReason, msg, why string) {
	if f == nil {
		return m, "", "", "requestMirror is missing"
	}
	m.Numerator, m.Denominator = 1, 1
	switch {
	case f.Percent != nil && f.Fraction != nil:
		return m, "", "", "requestMirror: percent and fraction are exclusive"
	case f.Percent != nil:
		if *f.Percent < 0 || *f.Percent > 100 {
			return m, "", "", fmt.Sprintf("requestMirror.percent %d: from 0 to 100", *f.Percent)
		}
		m.Numerator, m.Denominator = int(*f.Percent), 100
	case f.Fraction != nil:
		m.Numerator, m.Denominator = int(f.Fraction.Numerator), 100
		if f.Fraction.Denominator != nil {
			m.Denominator = int(*f.Fraction.Denominator)
		}
		if m.Numerator < 0 || m.Denominator < 1 || m.Numerator > m.Denominator {
			return m, "", "", fmt.Sprintf("requestMirror.fraction %d/%d: the numerator from 0 to the denominator, which is at least 1", m.Numerator, m.Denominator)
		}
	}
	m.Backend, reason, msg = b.gatewayBackend(from, f.BackendRef, opts)
	return m, reason, msg, ""
}

// urlRewrite maps a URLRewrite onto UpstreamHost and Rewrite; a full-path replacement is
// left in fullPath for the routes to compile.
func urlRewrite(f *gatewayv1.HTTPURLRewriteFilter, p *Policy, fullPath **string) string {
	if f == nil {
		return "the filter's settings are missing"
	}
	if f.Hostname != nil {
		p.UpstreamHost = string(*f.Hostname)
	}
	if pm := f.Path; pm != nil {
		switch {
		case pm.Type == gatewayv1.FullPathHTTPPathModifier && pm.ReplaceFullPath != nil:
			*fullPath = pm.ReplaceFullPath
			p.Rewrite = &Rewrite{Target: *pm.ReplaceFullPath}
		case pm.Type == gatewayv1.PrefixMatchHTTPPathModifier && pm.ReplacePrefixMatch != nil:
			p.Rewrite = &Rewrite{Target: *pm.ReplacePrefixMatch}
		default:
			return fmt.Sprintf("urlRewrite.path.type %s is not supported (or its value is missing)", pm.Type)
		}
	}
	return ""
}

// ruleBackends resolves a rule's backendRefs: one backend, two split by weight (the canary
// split Ingresses use), or three or more shared by weight (split), as is any number of which
// one has filters (per, by ref: its edits follow the rule's, opts.Policy's). An unresolved
// ref routes to an Unresolved backend (500, the share of the requests its weight gives it)
// and is reported in reason and msg; why names an unsupported value.
func (b *builder) ruleBackends(from SourceRef, refs []gatewayv1.BackendRef, per []refEdits, opts Options) (be *Backend, canary *Canary, split []Weighted, reason gatewayv1.RouteConditionReason, msg, why string) {
	type weighted struct {
		be *Backend
		w  int
		e  refEdits
	}
	var out []weighted
	var msgs []string
	for i, ref := range refs {
		w := 1
		if ref.Weight != nil {
			w = int(*ref.Weight)
		}
		rb, rr, m := b.gatewayBackend(from, ref.BackendObjectReference, opts)
		if rr != "" {
			if reason == "" {
				reason = rr
			}
			msgs = append(msgs, fmt.Sprintf("[%d]: %s", i, m))
		}
		if w > 0 {
			out = append(out, weighted{rb, w, per[i]})
		}
	}
	msg = strings.Join(msgs, "; ")
	if slices.ContainsFunc(out, func(o weighted) bool { return o.e.set }) {
		for _, o := range out {
			split = append(split, Weighted{Backend: o.be, Weight: o.w, Edits: true,
				RequestHeaders:  opts.Policy.RequestHeaders.then(o.e.req),
				ResponseHeaders: opts.Policy.ResponseHeaders.then(o.e.resp)})
		}
		return out[0].be, nil, split, reason, msg, ""
	}
	switch len(out) {
	case 0:
		// No backend, or all of weight 0: the spec answers 500.
		return &Backend{Key: "unresolved:" + from.NamespacedName.String(), Unresolved: true}, nil, nil, reason, msg, ""
	case 1:
		return out[0].be, nil, nil, reason, msg, ""
	case 2:
		return out[0].be, &Canary{CanaryRule: CanaryRule{Weight: out[1].w, WeightTotal: out[0].w + out[1].w}, Source: from, Backend: out[1].be}, nil, reason, msg, ""
	}
	for _, o := range out {
		split = append(split, Weighted{Backend: o.be, Weight: o.w})
	}
	return out[0].be, nil, split, reason, msg, ""
}

// gatewayBackend resolves one backendRef: a Service port, in another namespace only with a
// ReferenceGrant there. When it cannot, it returns a backend without endpoints and why.
func (b *builder) gatewayBackend(from SourceRef, ref gatewayv1.BackendObjectReference, opts Options) (*Backend, gatewayv1.RouteConditionReason, string) {
	ns := from.NamespacedName.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	svcID := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	none := &Backend{Key: "unresolved:" + svcID.String(), Service: svcID, Unresolved: true}
	switch {
	case ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service":
		g, k := "", "Service"
		if ref.Group != nil {
			g = string(*ref.Group)
		}
		if ref.Kind != nil {
			k = string(*ref.Kind)
		}
		return none, gatewayv1.RouteReasonInvalidKind, fmt.Sprintf("kind %s of group %q is not a Service", k, g)
	case ns != from.NamespacedName.Namespace && !Granted(b.in.ReferenceGrants, from.Kind, from.NamespacedName.Namespace, "Service", svcID):
		return none, gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("Service %s is in another namespace and no ReferenceGrant there allows %ss of namespace %s", svcID, from.Kind, from.NamespacedName.Namespace)
	case ref.Port == nil:
		return none, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s: port is required", svcID)
	}
	svc := b.services[svcID]
	if svc == nil {
		return none, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s not found", svcID)
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Port != *ref.Port {
			continue
		}
		found = true
		if p.AppProtocol != nil && *p.AppProtocol == AppProtocolH2C {
			// The Service says its port speaks HTTP/2 without TLS (Gateway API:
			// HTTPRouteBackendProtocolH2C); GRPCRoute backends are h2c already.
			opts.Protocol = ProtocolH2C
		}
	}
	if !found {
		return none, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s has no port %d", svcID, *ref.Port)
	}
	ib := &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svcID.Name, Port: networkingv1.ServiceBackendPort{Number: *ref.Port}}}
	return b.backend(from, ns, ib, opts), "", ""
}

// Granted reports whether one of grants, in the namespace of to, lets objects of the Gateway
// API kind fromKind in namespace from refer to the core object of kind toKind named to: its
// from lists that group, kind and namespace, and its to lists the core group, toKind and
// either no name or to's name. The controller's listener status and the proxy's choice of a
// certificate both ask it, so what status says is permitted is what is served.
func Granted(grants []*gatewayv1beta1.ReferenceGrant, fromKind, from, toKind string, to types.NamespacedName) bool {
	for _, g := range grants {
		if g.Namespace != to.Namespace {
			continue
		}
		fromOK, toOK := false, false
		for _, f := range g.Spec.From {
			fromOK = fromOK || string(f.Group) == gatewayGroup && string(f.Kind) == fromKind && string(f.Namespace) == from
		}
		for _, t := range g.Spec.To {
			toOK = toOK || t.Group == corev1.GroupName && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == to.Name)
		}
		if fromOK && toOK {
			return true
		}
	}
	return false
}
