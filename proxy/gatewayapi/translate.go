package gatewayapi

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/refgrant"
	"github.com/metalgate/metalgate/proxy/table"
)

// ControllerName is the controllerName of the GatewayClasses metalgate serves and of the
// route parent statuses Translate computes; controllers/gateway.ControllerName is this one.
const ControllerName gatewayv1.GatewayController = "metalgate.io/gateway-controller"

const gatewayGroup = gatewayv1.GroupName

// AppProtocolH2C is the Service port appProtocol of backends that speak HTTP/2 without TLS
// (prior knowledge): HTTPRoutes reach them over h2c.
const AppProtocolH2C = "kubernetes.io/h2c"

// listenerCert is one certificate of an HTTPS listener and its Secret ("namespace/name").
type listenerCert struct {
	cert   *tls.Certificate
	secret string
}

// listenerCertificates are an HTTPS listener's certificates: of its certificateRefs, in
// their order, those that name a TLS Secret holding a valid key pair (each Secret once), or
// why none does. The handshake gives a client the first of them it can use
// (table.GatewayHandshakeCertificate): an ECDSA certificate first and an RSA one after it
// serve modern clients with the cheaper signature and older ones still. A Secret of another
// namespace is used only when a ReferenceGrant there lets Gateways of the Gateway's namespace
// refer to it (Granted); otherwise the controller reports RefNotPermitted on the listener.
func (b *builder) listenerCertificates(owner, namespace string, l gatewayv1.Listener) ([]listenerCert, string) {
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return nil, "no certificateRefs"
	}
	if l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate {
		return nil, fmt.Sprintf("TLS mode %s is not supported", *l.TLS.Mode)
	}
	var out []listenerCert
	var problems []string
	for i, ref := range l.TLS.CertificateRefs {
		name, reason, msg := certificateRefOf(owner, namespace, i, ref, b.in.ReferenceGrants)
		if reason != "" {
			problems = append(problems, msg)
			continue
		}
		if slices.ContainsFunc(out, func(c listenerCert) bool { return c.secret == name.String() }) {
			continue
		}
		sec := b.tb.Secret(name)
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
		out = append(out, listenerCert{cert: &cert, secret: name.String()})
	}
	if len(out) == 0 {
		return nil, strings.Join(problems, "; ")
	}
	return out, ""
}

// addHTTPSListener adds a listener to the table with its certificates (none: no handshake).
func (b *builder) addHTTPSListener(port int32, name, hostname string, https bool, certs []listenerCert) int {
	i := b.tb.AddListener(port, name, hostname, https)
	for _, c := range certs {
		b.tb.AddListenerCertificate(i, c.cert, c.secret)
	}
	return i
}

// intersect is the hostname a route hostname serves on a listener (Gateway API: the more
// specific of the two when one covers the other), or false when they do not intersect.
func intersect(listener, route string) (string, bool) {
	switch {
	case listener == "":
		return route, true
	case route == "":
		return listener, true
	case table.HostnameMatches(listener, route) || listener == route:
		return route, true
	case table.HostnameMatches(route, listener):
		return listener, true
	case strings.HasPrefix(listener, "*.") && strings.HasPrefix(route, "*.") && strings.HasSuffix(route, listener[1:]):
		return route, true
	case strings.HasPrefix(listener, "*.") && strings.HasPrefix(route, "*.") && strings.HasSuffix(listener, route[1:]):
		return listener, true
	}
	return "", false
}

// Input is what a Gateway's table is translated from. Objects are read, never changed.
type Input struct {
	// Gateway is the one Gateway the table serves; nil makes an empty table (no Gateway:
	// nothing is routed, no status is computed).
	Gateway *gatewayv1.Gateway
	// HTTPRoutes are the candidates; only those with a parentRef naming Gateway are read.
	HTTPRoutes []*gatewayv1.HTTPRoute
	// GRPCRoutes likewise: each is served as the HTTP/2 requests its rules match (path
	// /service/method, headers), to its backends over HTTP/2 without TLS (h2c).
	GRPCRoutes []*gatewayv1.GRPCRoute
	// TLSRoutes likewise: each is served on the TLS listeners in mode Passthrough, by the
	// server name of the ClientHello, the connection passed to a backend undecrypted.
	TLSRoutes []*gatewayv1.TLSRoute
	// ReferenceGrants allow backendRefs to Services, and certificateRefs to Secrets, of other
	// namespaces.
	ReferenceGrants []*gatewayv1beta1.ReferenceGrant
	// Namespaces give the labels that allowedRoutes.namespaces.selector matches; a route of
	// a namespace not listed is not selected.
	Namespaces []*corev1.Namespace
	Services   []*corev1.Service
	Slices     []*discoveryv1.EndpointSlice
	Secrets    []*corev1.Secret
	// ConfigMaps hold the CA bundles spec.tls.frontend's caCertificateRefs (frontend.go) and
	// the BackendTLSPolicies (of the policy's namespace only; backendtls.go) name; only
	// those are read.
	ConfigMaps []*corev1.ConfigMap
	// ListenerSets are the candidates for extra listeners; only those whose parentRef names
	// Gateway and that it admits are served (listenerset.go).
	ListenerSets []*gatewayv1.ListenerSet
	// BackendTLSPolicies decide TLS to the Services they target (backendtls.go).
	BackendTLSPolicies []*gatewayv1.BackendTLSPolicy
	// AllowUnmanagedSlices and AllowLoopbackEndpoints: table.Sources'.
	AllowUnmanagedSlices   bool
	AllowLoopbackEndpoints bool
}

// Sources is what the table's backends and certificates are resolved from.
func (in Input) Sources() table.Sources {
	return table.Sources{Services: in.Services, Slices: in.Slices, Secrets: in.Secrets,
		AllowUnmanagedSlices: in.AllowUnmanagedSlices, AllowLoopbackEndpoints: in.AllowLoopbackEndpoints}
}

// Result is a translation: the table the Gateway's proxy serves, with its status (Status is
// Table.Gateway: attached routes per listener, each route's parent statuses, the HTTPS
// listeners without a certificate), the listeners' verdict (Listeners: conditions and
// supported kinds, in spec order, as the controller's plan writes them), and the Problems met
// on the way (a route's are in its status too). Without a Gateway, only Table is set.
type Result struct {
	Table     *table.Table
	Status    *table.GatewayStatus
	Listeners []gatewayv1.ListenerStatus
	// ListenerSets are the verdicts on the ListenerSets naming the Gateway, in order of
	// precedence, with their listeners' attached routes and certificate problems.
	ListenerSets []ListenerSetVerdict
	Problems     []table.Problem
}

// Translate makes the table of Input.Gateway: its listeners (by port, the most specific
// hostname first, HTTPS ones with their certificate) and the HTTPRoutes and GRPCRoutes
// attached to them, with every status the translation decides. It is pure: no client, no
// I/O, no clock.
func Translate(in Input) Result {
	b := builder{in: in, tb: table.NewBuilder(in.Sources())}
	var res Result
	if in.Gateway != nil {
		res.Listeners, b.accepted = Listeners(in.Gateway, in.ReferenceGrants)
		b.verdicts = ListenerSets(in.Gateway, in.ListenerSets, in.Namespaces, in.ReferenceGrants)
		frontend := b.frontend(in.Gateway, res.Listeners)
		res.Status = b.translate()
		res.Status.FrontendProblems = frontend
		b.backendTLSStatus(res.Status)
		b.tb.SetGatewayStatus(res.Status)
		res.ListenerSets = b.verdicts
	}
	res.Table, res.Problems = b.tb.Finish()
	return res
}

// builder is one translation.
type builder struct {
	in Input
	tb *table.Builder
	// accepted says, per listener in spec order, whether it takes routes: Listeners let it be
	// served and, for HTTPS, its certificateRefs gave a certificate.
	accepted []bool
	// verdicts are the ListenerSets naming the Gateway (listenerset.go); sets finds each by
	// namespace/name as a route's parent, setOf the ListenerSet listener at a table index.
	verdicts []ListenerSetVerdict
	sets     map[types.NamespacedName]*setParent
	setOf    map[int]setListener
	// btls are the BackendTLSPolicies, indexed on first use (backendtls.go).
	btls *policyIndex
}

// gatewayRule is an HTTPRoute rule compiled once, before its listeners are known.
type gatewayRule struct {
	routes []*table.Route // one per match, Host not set
}

// translate compiles the routes attached to Input.Gateway.
func (b *builder) translate() *table.GatewayStatus {
	gw := b.in.Gateway
	st := &table.GatewayStatus{AttachedRoutes: map[string]int32{}, CertificateProblems: map[string]string{}}
	b.listeners(gw, st)
	b.setListeners()
	nsLabels := map[string]labels.Set{}
	for _, ns := range b.in.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	seq := 0
	for _, ro := range routesByAge(b.gatewayRoutes()) {
		var ours []int
		for i, pr := range ro.parentRefs {
			if b.namesParent(pr, ro.meta.Namespace) {
				ours = append(ours, i)
			}
		}
		if len(ours) == 0 {
			continue // another Gateway's route: not ours to route nor to write status on
		}
		st.Routes = append(st.Routes, b.attachRoute(gw, ro, ours, nsLabels, st, seq))
		seq += 1 << 32
	}
	sort.Slice(st.Routes, func(i, j int) bool {
		if a, c := st.Routes[i], st.Routes[j]; a.Route != c.Route {
			return a.Route.String() < c.Route.String()
		}
		return st.Routes[i].Kind < st.Routes[j].Kind
	})
	return st
}

// listeners adds gw's listeners to the table in spec order (so a listener's index in the table
// is its index in spec.listeners), with their certificates; every listener starts with 0
// routes. An HTTPS listener without a usable certificate still takes its routes (the API
// counts them in attachedRoutes; its ResolvedRefs and Programmed conditions say it is not
// served): with no certificate, no handshake completes, so nothing reaches them.
func (b *builder) listeners(gw *gatewayv1.Gateway, st *table.GatewayStatus) {
	for _, l := range gw.Spec.Listeners {
		st.AttachedRoutes[string(l.Name)] = 0
		h := ""
		if l.Hostname != nil {
			h = strings.ToLower(string(*l.Hostname))
		}
		if passthroughListener(l) {
			b.tb.AddPassthroughListener(int32(l.Port), string(l.Name), h)
			continue
		}
		https := l.Protocol == gatewayv1.HTTPSProtocolType
		var certs []listenerCert
		if https {
			var problem string
			if certs, problem = b.listenerCertificates(kindGateway, gw.Namespace, l); problem != "" {
				st.CertificateProblems[string(l.Name)] = problem
			}
		}
		b.addHTTPSListener(int32(l.Port), string(l.Name), h, https, certs)
	}
}

// gwRoute is an HTTPRoute or a GRPCRoute, as far as attaching it to listeners goes: the
// fields both kinds share, and the route itself to compile.
type gwRoute struct {
	kind       string // KindHTTPRoute, KindGRPCRoute or KindTLSRoute
	meta       *metav1.ObjectMeta
	parentRefs []gatewayv1.ParentReference
	hostnames  []gatewayv1.Hostname
	http       *gatewayv1.HTTPRoute // set for KindHTTPRoute
	grpc       *gatewayv1.GRPCRoute // set for KindGRPCRoute
	tls        *gatewayv1.TLSRoute  // set for KindTLSRoute
}

// ref is the route as a backendRef's referrer: its kind, namespace and name.
func (r gwRoute) ref() table.SourceRef {
	return table.SourceRef{Kind: r.kind, NamespacedName: types.NamespacedName{Namespace: r.meta.Namespace, Name: r.meta.Name}}
}

// gatewayRoutes is every HTTPRoute and GRPCRoute of the Input.
func (b *builder) gatewayRoutes() []gwRoute {
	out := make([]gwRoute, 0, len(b.in.HTTPRoutes)+len(b.in.GRPCRoutes)+len(b.in.TLSRoutes))
	for _, hr := range b.in.HTTPRoutes {
		out = append(out, gwRoute{kind: table.KindHTTPRoute, meta: &hr.ObjectMeta, parentRefs: hr.Spec.ParentRefs, hostnames: hr.Spec.Hostnames, http: hr})
	}
	for _, gr := range b.in.GRPCRoutes {
		out = append(out, gwRoute{kind: table.KindGRPCRoute, meta: &gr.ObjectMeta, parentRefs: gr.Spec.ParentRefs, hostnames: gr.Spec.Hostnames, grpc: gr})
	}
	for _, tr := range b.in.TLSRoutes {
		out = append(out, gwRoute{kind: table.KindTLSRoute, meta: &tr.ObjectMeta, parentRefs: tr.Spec.ParentRefs, hostnames: tr.Spec.Hostnames, tls: tr})
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
func (b *builder) attachRoute(gw *gatewayv1.Gateway, ro gwRoute, ours []int,
	nsLabels map[string]labels.Set, st *table.GatewayStatus, seq int) table.RouteStatus {
	var rules []gatewayRule
	var unsupported, refsMsg string
	var refsReason gatewayv1.RouteConditionReason
	switch {
	case ro.tls != nil:
		rules, unsupported, refsReason, refsMsg = b.compileTLSRoute(ro.tls, ro.ref())
	case ro.grpc != nil:
		rules, unsupported, refsReason, refsMsg = b.compileGRPCRoute(ro.grpc, ro.ref())
	default:
		rules, unsupported, refsReason, refsMsg = b.compileHTTPRoute(ro.http, ro.ref())
	}
	rs := table.RouteStatus{Kind: ro.kind, Route: ro.ref().NamespacedName}
	attached := map[int]bool{}
	for _, i := range ours {
		pr := ro.parentRefs[i]
		reason, msg, hosts := b.attachParent(gw, ro, pr, nsLabels)
		if reason == "" && unsupported != "" {
			reason, msg = gatewayv1.RouteReasonUnsupportedValue, unsupported
		}
		for li, hs := range hosts {
			if attached[li] {
				continue
			}
			attached[li] = true
			b.countAttached(st, li)
			if unsupported != "" {
				continue // a route with a value metalgate does not implement serves nothing
			}
			for _, h := range hs {
				for ri, rule := range rules {
					for mi, tmpl := range rule.routes {
						r := *tmpl
						r.Host = h
						b.tb.AddListenerRoute(li, h, &r, seq+ri<<16+mi)
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
	return gatewayv1.RouteParentStatus{ParentRef: pr, ControllerName: ControllerName, Conditions: []metav1.Condition{accepted, resolved}}
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
// route serves on each (by listener index), or the reason it attaches nowhere. Only listeners
// the verdict accepted (b.accepted) take routes: one the parentRef selects but the verdict
// refused counts as not allowing the route (NotAllowedByListeners when no other does).
func (b *builder) attach(parent string, candidates []parentListener, ro gwRoute, pr gatewayv1.ParentReference, nsLabels map[string]labels.Set) (gatewayv1.RouteConditionReason, string, map[int][]string) {
	var selected []int
	for i, c := range candidates {
		if pr.SectionName != nil && *pr.SectionName != c.l.Name || pr.Port != nil && *pr.Port != c.l.Port {
			continue
		}
		selected = append(selected, i)
	}
	if len(selected) == 0 {
		return gatewayv1.RouteReasonNoMatchingParent, fmt.Sprintf("%s has no listener%s", parent, sectionText(pr)), nil
	}
	var allowed []int
	var why []string
	for _, i := range selected {
		l := &candidates[i].l
		if !candidates[i].ok {
			// The listener verdict (Listeners) refused it: a conflicted listener, or an HTTPS
			// one whose certificateRefs may not be used, serves no route and counts none.
			why = append(why, fmt.Sprintf("listener %s: not served (see its conditions)", l.Name))
			continue
		}
		if w := routeRefused(l, candidates[i].ns, ro.meta.Namespace, ro.kind, nsLabels); w != "" {
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
		l := candidates[i].l
		lh := ""
		if l.Hostname != nil {
			lh = strings.ToLower(string(*l.Hostname))
		}
		var hs []string
		if len(ro.hostnames) == 0 {
			hs = []string{lh}
		}
		for _, rh := range ro.hostnames {
			// Two route hostnames can narrow to one (*.example.com and shop.example.com on a
			// listener for shop.example.com): the route is served there once.
			if h, ok := intersect(lh, strings.ToLower(string(rh))); ok && !slices.Contains(hs, h) {
				hs = append(hs, h)
			}
		}
		if len(hs) > 0 {
			hosts[candidates[i].index] = hs
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
// kind kind (HTTPRoute or GRPCRoute: both are served on HTTP and HTTPS listeners; TLSRoute:
// on TLS listeners in mode Passthrough) in namespace routeNS, or "".
func routeRefused(l *gatewayv1.Listener, gwNS, routeNS, kind string, nsLabels map[string]labels.Set) string {
	if kind == table.KindTLSRoute {
		if !passthroughListener(*l) {
			return fmt.Sprintf("protocol %s does not serve %ss (TLS listeners in mode Passthrough do)", l.Protocol, kind)
		}
	} else if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
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
func (b *builder) compileHTTPRoute(hr *gatewayv1.HTTPRoute, from table.SourceRef) (rules []gatewayRule, unsupported string, refsReason gatewayv1.RouteConditionReason, refsMsg string) {
	var refProblems []string
	for ri, rule := range hr.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		opts := table.DefaultOptions() // plain HTTP, round robin
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
				var m table.Mirror
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
		gr, why := compileRule(b, from, field, opts, rule.BackendRefs, httpRuleRef, rule.Matches, matchRoute, func(mi int, r *table.Route) string {
			if r.PathType == table.PathRegex && (fullPath == nil && opts.Policy.Rewrite != nil ||
				opts.Policy.RequestRedirect != nil && opts.Policy.RequestRedirect.PrefixPath != nil) {
				return fmt.Sprintf("%s.matches[%d].path: ReplacePrefixMatch needs a PathPrefix match, not RegularExpression", field, mi)
			}
			if fullPath != nil && r.PathType != "Exact" {
				// The data plane replaces a whole path by expanding a regular expression
				// matching all of it (a RegularExpression path is one already); "$" in the
				// target is literal.
				if r.PathType != table.PathRegex {
					r.Regex = matchAll
				}
				r.Options.Policy.Rewrite = &table.Rewrite{Target: strings.ReplaceAll(*fullPath, "$", "$$"), Regex: true}
			}
			return ""
		}, &refsReason, &refProblems)
		if why != "" {
			return nil, why, "", ""
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

// httpRuleRef is an HTTPRoute backendRef with its filters.
func httpRuleRef(ref gatewayv1.HTTPBackendRef) ruleRef {
	rr := ruleRef{ref: ref.BackendRef}
	for _, f := range ref.Filters {
		rr.filters = append(rr.filters, refFilter{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier})
	}
	return rr
}

// matchRoute makes the route of one HTTPRoute match: path, method, headers, query.
func matchRoute(m gatewayv1.HTTPRouteMatch) (*table.Route, string) {
	r := &table.Route{Path: "/", PathType: "Prefix", Match: &table.RequestMatch{}}
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
			re, err := table.Anchored(r.Path)
			if err != nil {
				return nil, fmt.Sprintf("path.value: not a regular expression (RE2 syntax): %v", err)
			}
			r.PathType, r.Regex = table.PathRegex, re
		case p.Type == nil || *p.Type == t:
		default:
			return nil, fmt.Sprintf("path.type %s is not supported (Exact, PathPrefix and RegularExpression are)", *p.Type)
		}
	}
	if m.Method != nil {
		r.Match.Method = string(*m.Method)
	}
	for i, h := range m.Headers {
		if !table.ValidHeaderName(string(h.Name)) {
			return nil, fmt.Sprintf("headers[%d].name %q is not a header name", i, h.Name)
		}
		vm := table.ValueMatch{Name: table.CanonicalHeader(string(h.Name)), Value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			var err error
			if vm.Regex, err = table.Anchored(h.Value); err != nil {
				return nil, fmt.Sprintf("headers[%d].value: not a regular expression (RE2 syntax): %v", i, err)
			}
		} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
			return nil, fmt.Sprintf("headers[%d].type %s is not supported (Exact and RegularExpression are)", i, *h.Type)
		}
		r.Match.Headers = append(r.Match.Headers, vm)
	}
	for i, q := range m.QueryParams {
		vm := table.ValueMatch{Name: string(q.Name), Value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			var err error
			if vm.Regex, err = table.Anchored(q.Value); err != nil {
				return nil, fmt.Sprintf("queryParams[%d].value: not a regular expression (RE2 syntax): %v", i, err)
			}
		} else if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact {
			return nil, fmt.Sprintf("queryParams[%d].type %s is not supported (Exact and RegularExpression are)", i, *q.Type)
		}
		r.Match.Query = append(r.Match.Query, vm)
	}
	return r, ""
}

// headerEdits maps a header modifier filter onto HeaderEdits. The framing and hop-by-hop
// headers (and Host) stay the proxy's, as for the Ingress annotations.
func headerEdits(f *gatewayv1.HTTPHeaderFilter) (table.HeaderEdits, string) {
	var e table.HeaderEdits
	if f == nil {
		return e, "the filter's settings are missing"
	}
	check := func(n, v string) string {
		if !table.ValidHeaderName(n) || table.ProtectedHeader(n) || !table.ValidHeaderValue(v) {
			return fmt.Sprintf("header %q cannot be edited (invalid, or set only by the proxy)", n)
		}
		return ""
	}
	for _, h := range f.Set {
		if why := check(string(h.Name), h.Value); why != "" {
			return e, why
		}
		e.Set = append(e.Set, table.Header{Name: table.CanonicalHeader(string(h.Name)), Value: h.Value})
	}
	for _, h := range f.Add {
		if why := check(string(h.Name), h.Value); why != "" {
			return e, why
		}
		e.Add = append(e.Add, table.Header{Name: table.CanonicalHeader(string(h.Name)), Value: h.Value})
	}
	for _, n := range f.Remove {
		if why := check(n, ""); why != "" {
			return e, why
		}
		e.Remove = append(e.Remove, table.CanonicalHeader(n))
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
func requestRedirect(f *gatewayv1.HTTPRequestRedirectFilter) (*table.RequestRedirect, string) {
	if f == nil {
		return nil, "the filter's settings are missing"
	}
	rr := &table.RequestRedirect{Code: http.StatusFound}
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
func (b *builder) requestMirror(from table.SourceRef, f *gatewayv1.HTTPRequestMirrorFilter, opts table.Options) (m table.Mirror, reason gatewayv1.RouteConditionReason, msg, why string) {
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
func urlRewrite(f *gatewayv1.HTTPURLRewriteFilter, p *table.Policy, fullPath **string) string {
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
			p.Rewrite = &table.Rewrite{Target: *pm.ReplaceFullPath}
		case pm.Type == gatewayv1.PrefixMatchHTTPPathModifier && pm.ReplacePrefixMatch != nil:
			p.Rewrite = &table.Rewrite{Target: *pm.ReplacePrefixMatch}
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
func (b *builder) ruleBackends(from table.SourceRef, refs []gatewayv1.BackendRef, per []refEdits, opts table.Options) (be *table.Backend, canary *table.Canary, split []table.Weighted, reason gatewayv1.RouteConditionReason, msg, why string) {
	type weighted struct {
		be *table.Backend
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
			split = append(split, table.Weighted{Backend: o.be, Weight: o.w, Edits: true,
				RequestHeaders:  thenEdits(opts.Policy.RequestHeaders, o.e.req),
				ResponseHeaders: thenEdits(opts.Policy.ResponseHeaders, o.e.resp)})
		}
		return out[0].be, nil, split, reason, msg, ""
	}
	switch len(out) {
	case 0:
		// No backend, or all of weight 0: the spec answers 500.
		return &table.Backend{Key: "unresolved:" + from.NamespacedName.String(), Unresolved: true}, nil, nil, reason, msg, ""
	case 1:
		return out[0].be, nil, nil, reason, msg, ""
	case 2:
		return out[0].be, &table.Canary{CanaryRule: table.CanaryRule{Weight: out[1].w, WeightTotal: out[0].w + out[1].w}, Source: from, Backend: out[1].be}, nil, reason, msg, ""
	}
	for _, o := range out {
		split = append(split, table.Weighted{Backend: o.be, Weight: o.w})
	}
	return out[0].be, nil, split, reason, msg, ""
}

// gatewayBackend resolves one backendRef: a Service port, in another namespace only with a
// ReferenceGrant there. When it cannot, it returns a backend without endpoints and why.
func (b *builder) gatewayBackend(from table.SourceRef, ref gatewayv1.BackendObjectReference, opts table.Options) (*table.Backend, gatewayv1.RouteConditionReason, string) {
	ns := from.NamespacedName.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	svcID := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	none := &table.Backend{Key: "unresolved:" + svcID.String(), Service: svcID, Unresolved: true}
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
	svc := b.tb.Service(svcID)
	if svc == nil {
		return none, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s not found", svcID)
	}
	found, section := false, ""
	for _, p := range svc.Spec.Ports {
		if p.Port != *ref.Port {
			continue
		}
		found, section = true, p.Name
		if p.AppProtocol != nil && *p.AppProtocol == AppProtocolH2C {
			// The Service says its port speaks HTTP/2 without TLS (Gateway API:
			// HTTPRouteBackendProtocolH2C); GRPCRoute backends are h2c already.
			opts.Protocol = table.ProtocolH2C
		}
	}
	if !found {
		return none, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s has no port %d", svcID, *ref.Port)
	}
	port := networkingv1.ServiceBackendPort{Number: *ref.Port}
	if bt := b.policyTLS(svcID, section, &opts); bt != nil {
		return b.tb.BackendWithTLS(from, svcID, port, opts, bt), "", ""
	}
	return b.tb.Backend(from, svcID, port, opts, nil), "", ""
}

// Granted reports whether one of grants, in the namespace of to, lets objects of the Gateway
// API kind fromKind in namespace from refer to the core object of kind toKind named to
// (refgrant.Allows, the rule every translator shares). The controller's listener status and
// the proxy's choice of a certificate both ask it, so what status says is permitted is what
// is served.
func Granted(grants []*gatewayv1beta1.ReferenceGrant, fromKind, from, toKind string, to types.NamespacedName) bool {
	return refgrant.Allows(grants, refgrant.From{Group: gatewayGroup, Kind: fromKind, Namespace: from}, toKind, to)
}
