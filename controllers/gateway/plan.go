package gateway

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// Plan is what one Gateway asks for, decided from its spec and the ReferenceGrants alone (no I/O): whether it is
// accepted, the Service ports and annotations that give it an address, and the listeners'
// conditions that do not depend on the address.
type Plan struct {
	// Accepted is the Gateway's Accepted condition (without times and generation).
	Accepted metav1.Condition
	// AddressProblem, when set, is why spec.addresses cannot be used (Programmed=False,
	// AddressNotUsable); no Service is made.
	AddressProblem string
	// StaticIPs are the requested addresses of type IPAddress, at most one per family.
	StaticIPs []netip.Addr
	// Ports are the Service ports: one per distinct port of the accepted listeners.
	Ports []corev1.ServicePort
	// Listeners are the listeners' statuses in spec order, without Programmed (which needs
	// the address) and without times.
	Listeners []gwv1.ListenerStatus
	// listenerOK says, per listener in spec order, whether it can be programmed.
	listenerOK []bool
}

// WantsService says whether the Gateway gets a LoadBalancer Service.
func (p Plan) WantsService() bool {
	return p.Accepted.Status == metav1.ConditionTrue && p.AddressProblem == "" && len(p.Ports) > 0
}

// routeKindsServed are the route kinds HTTP and HTTPS listeners support, in the order
// supportedKinds lists them by default.
var routeKindsServed = []gwv1.Kind{table.KindHTTPRoute, table.KindGRPCRoute}

// PlanGateway decides gw's Plan. Cases, in the order they are checked:
//   - a spec.addresses entry of a type other than IPAddress: Accepted=False UnsupportedAddress
//   - no listener that can be served: Accepted=False ListenersNotValid
//   - some listeners that cannot: Accepted=True ListenersNotValid
//   - two IPAddress entries of one family, or one that does not parse: AddressProblem
//
// A listener cannot be served when its protocol is not HTTP or HTTPS (UnsupportedProtocol)
// or it conflicts with another on its port: other protocol (ProtocolConflict), or same
// protocol and hostname (HostnameConflict). Route kinds other than HTTPRoute and GRPCRoute
// in allowedRoutes.kinds give ResolvedRefs=False InvalidRouteKinds (the listener keeps the valid
// ones); an HTTPS certificateRef that is not a core Secret (InvalidCertificateRef), or is in
// another namespace that no ReferenceGrant of grants lets the Gateway's namespace refer to
// (RefNotPermitted), gives ResolvedRefs=False and the listener is not served.
func PlanGateway(gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant) Plan {
	var p Plan
	for i, a := range gw.Spec.Addresses {
		if t := addressType(a.Type); t != gwv1.IPAddressType {
			p.Accepted = cond(gwv1.GatewayConditionAccepted, false, gwv1.GatewayReasonUnsupportedAddress,
				fmt.Sprintf("spec.addresses[%d]: type %q is not supported: metalgate assigns addresses of type %q only", i, t, gwv1.IPAddressType))
			return p
		}
	}
	p.Listeners, p.listenerOK = listenerStatuses(gw, grants)
	ports := map[gwv1.PortNumber]bool{}
	var bad []string
	for i, l := range gw.Spec.Listeners {
		if p.listenerOK[i] {
			ports[l.Port] = true
		} else {
			bad = append(bad, string(l.Name))
		}
	}
	switch {
	case len(ports) == 0:
		p.Accepted = cond(gwv1.GatewayConditionAccepted, false, gwv1.GatewayReasonListenersNotValid,
			"no listener can be served: "+strings.Join(bad, ", "))
		return p
	case len(bad) > 0:
		p.Accepted = cond(gwv1.GatewayConditionAccepted, true, gwv1.GatewayReasonListenersNotValid,
			"listeners not valid (see their conditions): "+strings.Join(bad, ", "))
	default:
		p.Accepted = cond(gwv1.GatewayConditionAccepted, true, gwv1.GatewayReasonAccepted, "Gateway accepted by "+string(ControllerName))
	}
	sorted := make([]int, 0, len(ports))
	for port := range ports {
		sorted = append(sorted, int(port))
	}
	sort.Ints(sorted)
	for _, port := range sorted {
		p.Ports = append(p.Ports, corev1.ServicePort{Name: fmt.Sprintf("port-%d", port), Protocol: corev1.ProtocolTCP,
			Port: int32(port), TargetPort: intstr.FromInt32(int32(port))})
	}
	p.StaticIPs, p.AddressProblem = staticIPs(gw.Spec.Addresses)
	return p
}

// staticIPs parses the requested addresses: at most one per IP family, since a Service has at
// most one address per family.
func staticIPs(addrs []gwv1.GatewaySpecAddress) ([]netip.Addr, string) {
	var out []netip.Addr
	for i, a := range addrs {
		ip, err := netip.ParseAddr(a.Value)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Sprintf("spec.addresses[%d]: %q is not an IP address", i, a.Value)
		}
		ip = ip.Unmap()
		for _, o := range out {
			if o.Is4() == ip.Is4() {
				return nil, fmt.Sprintf("spec.addresses[%d]: %s and %s are of one IP family: a Gateway gets at most one address per family", i, o, ip)
			}
		}
		out = append(out, ip)
	}
	return out, ""
}

func addressType(t *gwv1.AddressType) gwv1.AddressType {
	if t == nil {
		return gwv1.IPAddressType
	}
	return *t
}

// listenerStatuses decides each listener's Accepted, ResolvedRefs and Conflicted conditions
// and supported kinds (see PlanGateway), and whether it can be served.
func listenerStatuses(gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant) ([]gwv1.ListenerStatus, []bool) {
	conflicts := conflictsByListener(gw.Spec.Listeners)
	out := make([]gwv1.ListenerStatus, len(gw.Spec.Listeners))
	ok := make([]bool, len(gw.Spec.Listeners))
	for i, l := range gw.Spec.Listeners {
		st := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: []gwv1.RouteGroupKind{}}
		accepted := cond(gwv1.ListenerConditionAccepted, true, gwv1.ListenerReasonAccepted, "listener accepted")
		resolved := cond(gwv1.ListenerConditionResolvedRefs, true, gwv1.ListenerReasonResolvedRefs, "all references resolved")
		conflicted := cond(gwv1.ListenerConditionConflicted, false, gwv1.ListenerReasonNoConflicts, "no conflicts")
		ok[i] = true
		switch l.Protocol {
		case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
			kinds, badKinds := routeKinds(l.AllowedRoutes)
			st.SupportedKinds = kinds
			if len(badKinds) > 0 {
				resolved = cond(gwv1.ListenerConditionResolvedRefs, false, gwv1.ListenerReasonInvalidRouteKinds,
					fmt.Sprintf("route kinds not supported on %s listeners: %s (supported: HTTPRoute, GRPCRoute)", l.Protocol, strings.Join(badKinds, ", ")))
			}
			if l.Protocol == gwv1.HTTPSProtocolType {
				if reason, msg := certificateRefs(gw.Namespace, l.TLS, grants); reason != "" {
					resolved = cond(gwv1.ListenerConditionResolvedRefs, false, reason, msg)
					ok[i] = false
				}
			}
		default:
			accepted = cond(gwv1.ListenerConditionAccepted, false, gwv1.ListenerReasonUnsupportedProtocol,
				fmt.Sprintf("protocol %q is not supported: metalgate serves HTTP and HTTPS listeners", l.Protocol))
			ok[i] = false
		}
		if c, found := conflicts[i]; found && ok[i] {
			conflicted = cond(gwv1.ListenerConditionConflicted, true, c.reason, c.message)
			accepted = cond(gwv1.ListenerConditionAccepted, false, c.reason, c.message)
			ok[i] = false
		}
		st.Conditions = []metav1.Condition{accepted, resolved, conflicted}
		out[i] = st
	}
	return out, ok
}

type conflict struct {
	reason  gwv1.ListenerConditionReason
	message string
}

// conflictsByListener finds listeners that share a port with another listener of another
// protocol (ProtocolConflict) or of the same protocol and hostname (HostnameConflict). Only
// listeners of supported protocols are compared: an unsupported one is not served, so it
// takes no port.
func conflictsByListener(ls []gwv1.Listener) map[int]conflict {
	out := map[int]conflict{}
	for i, a := range ls {
		for j, b := range ls {
			if i == j || a.Port != b.Port || !supported(a.Protocol) || !supported(b.Protocol) {
				continue
			}
			switch {
			case a.Protocol != b.Protocol:
				out[i] = conflict{gwv1.ListenerReasonProtocolConflict,
					fmt.Sprintf("port %d is also used by listener %q with protocol %s", a.Port, b.Name, b.Protocol)}
			case hostname(a.Hostname) == hostname(b.Hostname):
				if _, found := out[i]; !found {
					out[i] = conflict{gwv1.ListenerReasonHostnameConflict,
						fmt.Sprintf("listener %q has the same port %d, protocol and hostname %q", b.Name, a.Port, hostname(a.Hostname))}
				}
			}
		}
	}
	return out
}

func supported(p gwv1.ProtocolType) bool {
	return p == gwv1.HTTPProtocolType || p == gwv1.HTTPSProtocolType
}

func hostname(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}

// routeKinds splits allowedRoutes.kinds into the supported (HTTPRoute and GRPCRoute, both
// the default when none are listed; each once, in the order listed) and the rest, as
// "group/Kind".
func routeKinds(ar *gwv1.AllowedRoutes) (supportedKinds []gwv1.RouteGroupKind, bad []string) {
	supportedKinds = []gwv1.RouteGroupKind{}
	if ar == nil || len(ar.Kinds) == 0 {
		for _, k := range routeKindsServed {
			supportedKinds = append(supportedKinds, gwv1.RouteGroupKind{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: k})
		}
		return supportedKinds, nil
	}
	for _, k := range ar.Kinds {
		group := gwv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		switch {
		case group != gwv1.GroupName || !slices.Contains(routeKindsServed, k.Kind):
			bad = append(bad, group+"/"+string(k.Kind))
		case !slices.ContainsFunc(supportedKinds, func(s gwv1.RouteGroupKind) bool { return s.Kind == k.Kind }):
			supportedKinds = append(supportedKinds, gwv1.RouteGroupKind{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: k.Kind})
		}
	}
	return supportedKinds, bad
}

// certificateRefs checks an HTTPS listener's certificateRefs by their form: core Secrets in
// the Gateway's namespace, or in another one whose ReferenceGrant lets Gateways of namespace
// refer to them (table.Granted, the check the proxy makes when it picks the certificate).
// Whether each Secret exists and holds a certificate is checked by the data plane, not here.
func certificateRefs(namespace string, tls *gwv1.ListenerTLSConfig, grants []*gwv1beta1.ReferenceGrant) (gwv1.ListenerConditionReason, string) {
	if tls == nil || len(tls.CertificateRefs) == 0 {
		return gwv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener needs tls.certificateRefs"
	}
	for i, r := range tls.CertificateRefs {
		if (r.Group != nil && *r.Group != "") || (r.Kind != nil && *r.Kind != "Secret") {
			return gwv1.ListenerReasonInvalidCertificateRef,
				fmt.Sprintf("tls.certificateRefs[%d]: only core Secrets are supported", i)
		}
		secret := types.NamespacedName{Namespace: namespace, Name: string(r.Name)}
		if r.Namespace != nil {
			secret.Namespace = string(*r.Namespace)
		}
		if secret.Namespace != namespace && !table.Granted(grants, "Gateway", namespace, "Secret", secret) {
			return gwv1.ListenerReasonRefNotPermitted,
				fmt.Sprintf("tls.certificateRefs[%d]: Secret %s is in another namespace and no ReferenceGrant there lets Gateways of namespace %s refer to it", i, secret, namespace)
		}
	}
	return "", ""
}

func cond[T ~string, R ~string](t T, status bool, reason R, message string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: message}
}

func ptr[T any](v T) *T { return &v }
