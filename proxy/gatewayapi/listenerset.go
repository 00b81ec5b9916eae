package gatewayapi

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// ListenerSets (Gateway API, standard channel since v1.5) add listeners to a Gateway from
// other objects, possibly of other namespaces. The rules, in the order they apply:
//
//   - only ListenerSets whose spec.parentRef names the Gateway are the Gateway's;
//   - the Gateway admits them per spec.allowedListeners.namespaces.from: None (the default)
//     admits none, Same those of its namespace, Selector those of namespaces whose labels
//     match, All every one; a ListenerSet not admitted (NotAllowed) has no listener served;
//   - the merged listeners are the Gateway's own, then each admitted ListenerSet's in order
//     of precedence: the oldest first, then by namespace/name;
//   - a ListenerSet's listener on a port that a listener of higher precedence already takes
//     with another protocol is Conflicted (ProtocolConflict), with the same protocol and
//     hostname Conflicted (HostnameConflict); the listener of higher precedence keeps the
//     port and its hostname, so a ListenerSet can never take traffic from the Gateway's own
//     listeners nor from an older ListenerSet;
//   - each listener is judged like a Gateway's (judgeListener), except that a certificateRef
//     to another namespace needs a ReferenceGrant from ListenerSets of the ListenerSet's
//     namespace: one the Gateway holds is not inherited.

// ListenerSetVerdict is one ListenerSet of the Gateway: admitted or not, and what becomes of
// its listeners.
type ListenerSetVerdict struct {
	Set *gwv1.ListenerSet
	// NotAllowed says why the Gateway's spec.allowedListeners does not admit the ListenerSet
	// ("": admitted).
	NotAllowed string
	// Listeners are the listeners' statuses in spec order (Accepted, ResolvedRefs,
	// Conflicted and supported kinds; no Programmed, no times); nil when not admitted.
	Listeners []gwv1.ListenerStatus
	// OK says, per listener in spec order, whether it is served.
	OK []bool
	// AttachedRoutes counts, per listener name, the routes attached to it (set by Translate).
	AttachedRoutes map[string]int32
	// CertificateProblems says, per HTTPS listener name, why none of its certificateRefs gives
	// a certificate (set by Translate).
	CertificateProblems map[string]string
}

// Admitted says whether the Gateway admits the ListenerSet.
func (v ListenerSetVerdict) Admitted() bool { return v.NotAllowed == "" }

// Served says whether any of the ListenerSet's listeners is served: an admitted ListenerSet
// without one is not accepted (ListenersNotValid).
func (v ListenerSetVerdict) Served() bool {
	for _, ok := range v.OK {
		if ok {
			return true
		}
	}
	return false
}

// NamesGateway says whether ListenerSet ls's spec.parentRef names Gateway gw.
func NamesGateway(ls *gwv1.ListenerSet, gw types.NamespacedName) bool {
	ref := ls.Spec.ParentRef
	if ref.Group != nil && string(*ref.Group) != gatewayGroup || ref.Kind != nil && *ref.Kind != kindGateway {
		return false
	}
	ns := ls.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name
}

// ListenerSets judges the ListenerSets among sets that name gw, in order of precedence
// (oldest first, then namespace/name): admission by spec.allowedListeners (namespaces give
// the labels a Selector matches), then each listener of an admitted one against the
// Gateway's listeners and those of the ListenerSets before it. Pure, like Listeners; the
// controller's plan (ports) and Translate (routes, status) both call it.
func ListenerSets(gw *gwv1.Gateway, sets []*gwv1.ListenerSet, namespaces []*corev1.Namespace, grants []*gwv1beta1.ReferenceGrant) []ListenerSetVerdict {
	key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	var mine []*gwv1.ListenerSet
	for _, ls := range sets {
		if NamesGateway(ls, key) {
			mine = append(mine, ls)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	sort.SliceStable(mine, func(i, j int) bool {
		a, c := mine[i], mine[j]
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		return a.Name < c.Name
	})
	nsLabels := map[string]labels.Set{}
	for _, ns := range namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	// The listeners that hold a port, in precedence order: the Gateway's that it serves
	// a protocol of (its own conflicts are Listeners' to judge), then each served one of
	// an admitted ListenerSet.
	var holders []holder
	for _, l := range gw.Spec.Listeners {
		if supported(l) {
			holders = append(holders, holder{l, fmt.Sprintf("listener %q of Gateway %s", l.Name, key)})
		}
	}
	out := make([]ListenerSetVerdict, 0, len(mine))
	for _, ls := range mine {
		v := ListenerSetVerdict{Set: ls, NotAllowed: listenerSetRefused(gw, ls.Namespace, nsLabels)}
		if !v.Admitted() {
			out = append(out, v)
			continue
		}
		v.Listeners = make([]gwv1.ListenerStatus, len(ls.Spec.Listeners))
		v.OK = make([]bool, len(ls.Spec.Listeners))
		for j, e := range ls.Spec.Listeners {
			l := entryListener(e)
			v.Listeners[j], v.OK[j] = judgeListener(l, kindListenerSet, ls.Namespace, grants, heldBy(holders, l))
			if v.OK[j] {
				holders = append(holders, holder{l, fmt.Sprintf("listener %q of ListenerSet %s/%s", l.Name, ls.Namespace, ls.Name)})
			}
		}
		out = append(out, v)
	}
	return out
}

// holder is a listener that holds its port (and hostname on it), and how to name it.
type holder struct {
	l    gwv1.Listener
	name string
}

// heldBy is the conflict of listener l with the first holder of its port with another
// protocol (ProtocolConflict), else with the first of the same protocol and hostname
// (HostnameConflict), or nil. The conflict is reported whatever l is: a TCP listener on an
// HTTP port is ProtocolConflict, not only UnsupportedProtocol.
func heldBy(holders []holder, l gwv1.Listener) *conflict {
	var c *conflict
	for _, h := range holders {
		if h.l.Port != l.Port {
			continue
		}
		if h.l.Protocol != l.Protocol {
			return &conflict{gwv1.ListenerReasonProtocolConflict,
				fmt.Sprintf("port %d is taken by %s with protocol %s, which has precedence", l.Port, h.name, h.l.Protocol), true}
		}
		if c == nil && hostname(h.l.Hostname) == hostname(l.Hostname) {
			c = &conflict{gwv1.ListenerReasonHostnameConflict,
				fmt.Sprintf("port %d and hostname %q are taken by %s, which has precedence", l.Port, hostname(l.Hostname), h.name), true}
		}
	}
	return c
}

// entryListener is a ListenerSet's listener as a Gateway listener: the fields are the same.
func entryListener(e gwv1.ListenerEntry) gwv1.Listener {
	return gwv1.Listener(e)
}

// listenerSetRefused says why gw's spec.allowedListeners does not admit a ListenerSet of
// namespace ns, or "".
func listenerSetRefused(gw *gwv1.Gateway, ns string, nsLabels map[string]labels.Set) string {
	from := gwv1.NamespacesFromNone
	var sel *metav1.LabelSelector
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
		if al.Namespaces.From != nil {
			from = *al.Namespaces.From
		}
		sel = al.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return ""
	case gwv1.NamespacesFromSame:
		if ns != gw.Namespace {
			return fmt.Sprintf("Gateway %s/%s admits ListenerSets of its own namespace only (spec.allowedListeners.namespaces.from: Same)", gw.Namespace, gw.Name)
		}
		return ""
	case gwv1.NamespacesFromSelector:
		if sel == nil {
			return fmt.Sprintf("Gateway %s/%s: spec.allowedListeners.namespaces.selector is missing", gw.Namespace, gw.Name)
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return fmt.Sprintf("Gateway %s/%s: spec.allowedListeners.namespaces.selector: %v", gw.Namespace, gw.Name, err)
		}
		if l, ok := nsLabels[ns]; !ok || !s.Matches(l) {
			return fmt.Sprintf("namespace %s does not match spec.allowedListeners.namespaces.selector of Gateway %s/%s", ns, gw.Namespace, gw.Name)
		}
		return ""
	case gwv1.NamespacesFromNone:
		return fmt.Sprintf("Gateway %s/%s admits no ListenerSets (spec.allowedListeners.namespaces.from: None, the default)", gw.Namespace, gw.Name)
	default:
		return fmt.Sprintf("Gateway %s/%s: spec.allowedListeners.namespaces.from %q is not supported", gw.Namespace, gw.Name, from)
	}
}

// ListenerSetPorts are the ports of the served listeners of the admitted ListenerSets.
func ListenerSetPorts(vs []ListenerSetVerdict) []gwv1.PortNumber {
	var out []gwv1.PortNumber
	for _, v := range vs {
		for j, ok := range v.OK {
			if ok {
				out = append(out, v.Set.Spec.Listeners[j].Port)
			}
		}
	}
	return out
}

// ServedListenerSetListeners are the served listeners of the admitted ListenerSets, as
// Gateway listeners, in order of precedence: what the Gateway's proxy listens on besides
// the Gateway's own.
func ServedListenerSetListeners(vs []ListenerSetVerdict) []gwv1.Listener {
	var out []gwv1.Listener
	for _, v := range vs {
		for j, ok := range v.OK {
			if ok {
				out = append(out, entryListener(v.Set.Spec.Listeners[j]))
			}
		}
	}
	return out
}

// isListenerSetRef says whether parentRef pr names a ListenerSet, and which (a route's
// parentRef without a namespace names one of the route's namespace).
func isListenerSetRef(pr gwv1.ParentReference, routeNS string) (types.NamespacedName, bool) {
	if pr.Group == nil || string(*pr.Group) != gatewayGroup || pr.Kind == nil || *pr.Kind != kindListenerSet {
		return types.NamespacedName{}, false
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(pr.Name)}, true
}

// IsListenerSetRef is isListenerSetRef for the controller: the ListenerSet a route's
// parentRef names.
func IsListenerSetRef(pr gwv1.ParentReference, routeNS string) (types.NamespacedName, bool) {
	return isListenerSetRef(pr, routeNS)
}

// setParent is an admitted or refused ListenerSet as a route's parent in one translation.
type setParent struct {
	v *ListenerSetVerdict
	// index is the table index of each listener in spec order; -1 for one not served.
	index []int
}

// setListeners adds the served listeners of the admitted ListenerSets to the table, after
// the Gateway's (listeners), in order of precedence, with their certificates. A listener that
// is not served is never added: a conflicted one must not take its port or hostname.
func (b *builder) setListeners() {
	b.sets = map[types.NamespacedName]*setParent{}
	b.setOf = map[int]setListener{}
	for i := range b.verdicts {
		v := &b.verdicts[i]
		sp := &setParent{v: v}
		b.sets[types.NamespacedName{Namespace: v.Set.Namespace, Name: v.Set.Name}] = sp
		if !v.Admitted() {
			continue
		}
		v.AttachedRoutes = map[string]int32{}
		v.CertificateProblems = map[string]string{}
		sp.index = make([]int, len(v.Set.Spec.Listeners))
		for j, e := range v.Set.Spec.Listeners {
			v.AttachedRoutes[string(e.Name)] = 0
			sp.index[j] = -1
			if !v.OK[j] {
				continue
			}
			l := entryListener(e)
			h := strings.ToLower(hostname(l.Hostname))
			var ti int
			if passthroughListener(l) {
				ti = b.tb.AddPassthroughListener(int32(l.Port), v.Set.Namespace+"/"+v.Set.Name+"/"+string(l.Name), h)
			} else {
				https := l.Protocol == gwv1.HTTPSProtocolType
				var certs []listenerCert
				if https {
					var problem string
					if certs, problem = b.listenerCertificates(kindListenerSet, v.Set.Namespace, l); problem != "" {
						v.CertificateProblems[string(l.Name)] = problem
					}
				}
				ti = b.addHTTPSListener(int32(l.Port), v.Set.Namespace+"/"+v.Set.Name+"/"+string(l.Name), h, https, certs)
			}
			sp.index[j] = ti
			b.setOf[ti] = setListener{v: v, name: string(l.Name)}
		}
	}
}

// setListener is a ListenerSet's listener by table index.
type setListener struct {
	v    *ListenerSetVerdict
	name string
}

// setCandidates are the listeners of ListenerSet sp a parentRef can select.
func (sp *setParent) candidates() []parentListener {
	out := make([]parentListener, len(sp.v.Set.Spec.Listeners))
	for j, e := range sp.v.Set.Spec.Listeners {
		l := entryListener(e)
		out[j] = parentListener{l: l, index: sp.index[j], ok: sp.v.OK[j], ns: sp.v.Set.Namespace}
	}
	return out
}

// parentListener is a listener a route's parentRef can select: of the Gateway, or of one
// ListenerSet.
type parentListener struct {
	l gwv1.Listener
	// index is its index in the table (-1: not in it, then ok is false).
	index int
	// ok says the listener verdict let it be served.
	ok bool
	// ns is the namespace of the Gateway or ListenerSet it belongs to: allowedRoutes'
	// namespace Same is that one.
	ns string
}

// namesParent says whether parentRef pr of a route in routeNS names the Gateway, or a
// ListenerSet whose parentRef names it (admitted or not: either way the status for that
// parentRef is this Gateway's to give).
func (b *builder) namesParent(pr gwv1.ParentReference, routeNS string) bool {
	if key, ok := isListenerSetRef(pr, routeNS); ok {
		return b.sets[key] != nil
	}
	return b.namesGateway(pr, routeNS)
}

// attachParent is attach for parentRef pr: a parentRef naming the Gateway selects the
// Gateway's own listeners only, one naming a ListenerSet that ListenerSet's only. A
// ListenerSet the Gateway does not admit attaches no route (NotAllowedByListeners).
func (b *builder) attachParent(gw *gwv1.Gateway, ro gwRoute, pr gwv1.ParentReference, nsLabels map[string]labels.Set) (gwv1.RouteConditionReason, string, map[int][]string) {
	if key, ok := isListenerSetRef(pr, ro.meta.Namespace); ok {
		sp := b.sets[key]
		if !sp.v.Admitted() {
			return gwv1.RouteReasonNotAllowedByListeners, fmt.Sprintf("ListenerSet %s is not accepted: %s", key, sp.v.NotAllowed), nil
		}
		return b.attach("ListenerSet "+key.String(), sp.candidates(), ro, pr, nsLabels)
	}
	candidates := make([]parentListener, len(gw.Spec.Listeners))
	for i, l := range gw.Spec.Listeners {
		candidates[i] = parentListener{l: l, index: i, ok: b.accepted[i], ns: gw.Namespace}
	}
	return b.attach(fmt.Sprintf("Gateway %s/%s", gw.Namespace, gw.Name), candidates, ro, pr, nsLabels)
}

// countAttached counts one more route on the listener at table index li: the Gateway's
// (st.AttachedRoutes, by name) or a ListenerSet's (its verdict's AttachedRoutes).
func (b *builder) countAttached(st *table.GatewayStatus, li int) {
	if sl, ok := b.setOf[li]; ok {
		sl.v.AttachedRoutes[sl.name]++
		return
	}
	st.AttachedRoutes[string(b.in.Gateway.Spec.Listeners[li].Name)]++
}
