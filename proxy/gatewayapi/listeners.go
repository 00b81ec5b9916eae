package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// apiGroup is a new pointer to the Gateway API group, for supportedKinds.
func apiGroup() *gwv1.Group {
	g := gwv1.Group(gwv1.GroupName)
	return &g
}

// routeKindsServed are the route kinds HTTP and HTTPS listeners support, in the order
// supportedKinds lists them by default.
var routeKindsServed = []gwv1.Kind{table.KindHTTPRoute, table.KindGRPCRoute}

// Listeners judges gw's listeners from its spec and the ReferenceGrants alone (no Secret is
// read): each one's Accepted, ResolvedRefs and Conflicted conditions and supported kinds (no
// Programmed, no times), in spec order, and whether it can be served. Cases:
//   - a protocol other than HTTP, HTTPS or TLS: Accepted=False UnsupportedProtocol;
//   - a TLS listener in mode Terminate (the default): Accepted=False UnsupportedValue (only
//     Passthrough is served; its supported kind is TLSRoute);
//   - another listener on its port with another protocol (ProtocolConflict), or the same
//     protocol and hostname (HostnameConflict): Conflicted=True, Accepted=False;
//   - route kinds other than HTTPRoute and GRPCRoute (TLSRoute on a TLS listener) in
//     allowedRoutes.kinds: ResolvedRefs=False InvalidRouteKinds (the listener keeps the valid
//     ones and is served);
//   - an HTTPS listener whose certificateRefs are missing or name what is not a core Secret
//     (InvalidCertificateRef), or a Secret of another namespace that no ReferenceGrant there
//     lets the Gateway's namespace refer to (RefNotPermitted): ResolvedRefs=False, not served.
//
// The controller's plan (controllers/gateway) and Translate both call it: one verdict.
func Listeners(gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant) ([]gwv1.ListenerStatus, []bool) {
	conflicts := conflictsByListener(gw.Spec.Listeners)
	out := make([]gwv1.ListenerStatus, len(gw.Spec.Listeners))
	ok := make([]bool, len(gw.Spec.Listeners))
	for i, l := range gw.Spec.Listeners {
		var c *conflict
		if found, in := conflicts[i]; in {
			c = &found
		}
		out[i], ok[i] = judgeListener(l, kindGateway, gw.Namespace, grants, c)
	}
	return out, ok
}

// kindGateway and kindListenerSet are the kinds that own listeners, as ReferenceGrants name
// them in spec.from.
const (
	kindGateway     = "Gateway"
	kindListenerSet = "ListenerSet"
)

// judgeListener is the verdict on one listener of an object of kind owner (Gateway or
// ListenerSet) in namespace ns: its status (Accepted, ResolvedRefs, Conflicted; supported
// kinds) and whether it can be served. A conflict c found by the caller (nil: none) makes a
// listener that could otherwise be served Conflicted and not Accepted.
func judgeListener(l gwv1.Listener, owner, ns string, grants []*gwv1beta1.ReferenceGrant, c *conflict) (gwv1.ListenerStatus, bool) {
	st := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: []gwv1.RouteGroupKind{}}
	accepted := cond(gwv1.ListenerConditionAccepted, true, gwv1.ListenerReasonAccepted, "listener accepted")
	resolved := cond(gwv1.ListenerConditionResolvedRefs, true, gwv1.ListenerReasonResolvedRefs, "all references resolved")
	conflicted := cond(gwv1.ListenerConditionConflicted, false, gwv1.ListenerReasonNoConflicts, "no conflicts")
	ok := true
	switch l.Protocol {
	case gwv1.TLSProtocolType:
		if !passthroughListener(l) {
			// Terminating TLS for TLSRoutes (extended) is not served: no kind is supported.
			accepted = cond(gwv1.ListenerConditionAccepted, false, gwv1.ListenerReasonUnsupportedValue,
				"tls.mode Terminate is not supported on TLS listeners: metalgate passes TLS through (mode Passthrough)")
			ok = false
			break
		}
		kinds, badKinds := routeKinds(l.AllowedRoutes, tlsKindsServed)
		st.SupportedKinds = kinds
		if len(badKinds) > 0 {
			resolved = cond(gwv1.ListenerConditionResolvedRefs, false, gwv1.ListenerReasonInvalidRouteKinds,
				fmt.Sprintf("route kinds not supported on TLS listeners: %s (supported: TLSRoute)", strings.Join(badKinds, ", ")))
		}
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
		kinds, badKinds := routeKinds(l.AllowedRoutes, routeKindsServed)
		st.SupportedKinds = kinds
		if len(badKinds) > 0 {
			resolved = cond(gwv1.ListenerConditionResolvedRefs, false, gwv1.ListenerReasonInvalidRouteKinds,
				fmt.Sprintf("route kinds not supported on %s listeners: %s (supported: HTTPRoute, GRPCRoute)", l.Protocol, strings.Join(badKinds, ", ")))
		}
		if l.Protocol == gwv1.HTTPSProtocolType {
			if reason, msg := certificateRefs(owner, ns, l.TLS, grants); reason != "" {
				resolved = cond(gwv1.ListenerConditionResolvedRefs, false, reason, msg)
				ok = false
			}
		}
	default:
		accepted = cond(gwv1.ListenerConditionAccepted, false, gwv1.ListenerReasonUnsupportedProtocol,
			fmt.Sprintf("protocol %q is not supported: metalgate serves HTTP, HTTPS and TLS (Passthrough) listeners", l.Protocol))
		ok = false
	}
	if c != nil && (ok || c.always) {
		conflicted = cond(gwv1.ListenerConditionConflicted, true, c.reason, c.message)
		accepted = cond(gwv1.ListenerConditionAccepted, false, c.reason, c.message)
		ok = false
	}
	st.Conditions = []metav1.Condition{accepted, resolved, conflicted}
	return st, ok
}

type conflict struct {
	reason  gwv1.ListenerConditionReason
	message string
	// always: the conflict is reported even on a listener that could not be served anyway
	// (a ListenerSet's listener on a port a listener of higher precedence holds).
	always bool
}

// conflictsByListener finds listeners that share a port with another listener of another
// protocol (ProtocolConflict: HTTPS and TLS Passthrough included, metalgate does not mix
// them on a port) or of the same protocol and hostname (HostnameConflict). Only listeners
// metalgate serves are compared: an unsupported one (a protocol, or TLS in mode Terminate)
// is not served, so it takes no port.
func conflictsByListener(ls []gwv1.Listener) map[int]conflict {
	out := map[int]conflict{}
	for i, a := range ls {
		for j, b := range ls {
			if i == j || a.Port != b.Port || !supported(a) || !supported(b) {
				continue
			}
			switch {
			case a.Protocol != b.Protocol:
				out[i] = conflict{gwv1.ListenerReasonProtocolConflict,
					fmt.Sprintf("port %d is also used by listener %q with protocol %s", a.Port, b.Name, b.Protocol), false}
			case hostname(a.Hostname) == hostname(b.Hostname):
				if _, found := out[i]; !found {
					out[i] = conflict{gwv1.ListenerReasonHostnameConflict,
						fmt.Sprintf("listener %q has the same port %d, protocol and hostname %q", b.Name, a.Port, hostname(a.Hostname)), false}
				}
			}
		}
	}
	return out
}

func supported(l gwv1.Listener) bool {
	return l.Protocol == gwv1.HTTPProtocolType || l.Protocol == gwv1.HTTPSProtocolType || passthroughListener(l)
}

func hostname(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}

// tlsKindsServed is the route kind TLS listeners support.
var tlsKindsServed = []gwv1.Kind{table.KindTLSRoute}

// routeKinds splits allowedRoutes.kinds into the supported (of served, all of them the
// default when none are listed; each once, in the order listed) and the rest, as
// "group/Kind".
func routeKinds(ar *gwv1.AllowedRoutes, served []gwv1.Kind) (supportedKinds []gwv1.RouteGroupKind, bad []string) {
	supportedKinds = []gwv1.RouteGroupKind{}
	if ar == nil || len(ar.Kinds) == 0 {
		for _, k := range served {
			supportedKinds = append(supportedKinds, gwv1.RouteGroupKind{Group: apiGroup(), Kind: k})
		}
		return supportedKinds, nil
	}
	for _, k := range ar.Kinds {
		group := gwv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		switch {
		case group != gwv1.GroupName || !slices.Contains(served, k.Kind):
			bad = append(bad, group+"/"+string(k.Kind))
		case !slices.ContainsFunc(supportedKinds, func(s gwv1.RouteGroupKind) bool { return s.Kind == k.Kind }):
			supportedKinds = append(supportedKinds, gwv1.RouteGroupKind{Group: apiGroup(), Kind: k.Kind})
		}
	}
	return supportedKinds, bad
}

// certificateRefs checks an HTTPS listener's certificateRefs by their form (CertificateRef):
// the first that cannot be used makes the listener unserved. Whether each Secret exists and
// holds a certificate is listenerCertificate's to say (CertificateProblems).
func certificateRefs(owner, namespace string, tls *gwv1.ListenerTLSConfig, grants []*gwv1beta1.ReferenceGrant) (gwv1.ListenerConditionReason, string) {
	if tls == nil || len(tls.CertificateRefs) == 0 {
		return gwv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener needs tls.certificateRefs"
	}
	for i, r := range tls.CertificateRefs {
		if _, reason, msg := certificateRefOf(owner, namespace, i, r, grants); reason != "" {
			return reason, msg
		}
	}
	return "", ""
}

// CertificateRef is the Secret that certificateRefs[i] of a listener of a Gateway in
// namespace names, or why it may not be used: not a core Secret (InvalidCertificateRef), or in
// another namespace that no ReferenceGrant there lets Gateways of namespace refer to
// (RefNotPermitted). Everything that reads a listener's certificate asks it first: the
// listener verdict (Listeners), the certificate the proxy serves (Translate) and the Secrets
// the controller reads for it.
func CertificateRef(namespace string, i int, r gwv1.SecretObjectReference, grants []*gwv1beta1.ReferenceGrant) (types.NamespacedName, gwv1.ListenerConditionReason, string) {
	return certificateRefOf(kindGateway, namespace, i, r, grants)
}

// ListenerSetCertificateRef is CertificateRef for a listener of a ListenerSet in namespace:
// a Secret of another namespace needs a ReferenceGrant from ListenerSets of namespace (one
// from the parent Gateway's namespace does not do).
func ListenerSetCertificateRef(namespace string, i int, r gwv1.SecretObjectReference, grants []*gwv1beta1.ReferenceGrant) (types.NamespacedName, gwv1.ListenerConditionReason, string) {
	return certificateRefOf(kindListenerSet, namespace, i, r, grants)
}

// certificateRefOf is CertificateRef for a listener of an object of kind owner.
func certificateRefOf(owner, namespace string, i int, r gwv1.SecretObjectReference, grants []*gwv1beta1.ReferenceGrant) (types.NamespacedName, gwv1.ListenerConditionReason, string) {
	secret := types.NamespacedName{Namespace: namespace, Name: string(r.Name)}
	if r.Namespace != nil {
		secret.Namespace = string(*r.Namespace)
	}
	if (r.Group != nil && *r.Group != "") || (r.Kind != nil && *r.Kind != "Secret") {
		return secret, gwv1.ListenerReasonInvalidCertificateRef,
			fmt.Sprintf("tls.certificateRefs[%d]: only core Secrets are supported", i)
	}
	if secret.Namespace != namespace && !Granted(grants, owner, namespace, "Secret", secret) {
		return secret, gwv1.ListenerReasonRefNotPermitted,
			fmt.Sprintf("tls.certificateRefs[%d]: Secret %s is in another namespace and no ReferenceGrant there lets %ss of namespace %s refer to it", i, secret, owner, namespace)
	}
	return secret, "", ""
}

func cond[T ~string, R ~string](t T, status bool, reason R, message string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: message}
}
