package gateway

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
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

// PlanGateway decides gw's Plan. Cases, in the order they are checked:
//   - a spec.addresses entry of a type other than IPAddress: Accepted=False UnsupportedAddress
//   - no listener that can be served: Accepted=False ListenersNotValid
//   - some listeners that cannot: Accepted=True ListenersNotValid
//   - two IPAddress entries of one family, or one that does not parse: AddressProblem
//
// The listeners are judged by gatewayapi.Listeners, the verdict the translator that attaches
// routes to them (gatewayapi.Translate) reads too: one judge for both.
func PlanGateway(gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant) Plan {
	var p Plan
	for i, a := range gw.Spec.Addresses {
		if t := addressType(a.Type); t != gwv1.IPAddressType {
			p.Accepted = cond(gwv1.GatewayConditionAccepted, false, gwv1.GatewayReasonUnsupportedAddress,
				fmt.Sprintf("spec.addresses[%d]: type %q is not supported: metalgate assigns addresses of type %q only", i, t, gwv1.IPAddressType))
			return p
		}
	}
	p.Listeners, p.listenerOK = gatewayapi.Listeners(gw, grants)
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

func cond[T ~string, R ~string](t T, status bool, reason R, message string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: message}
}

func ptr[T any](v T) *T { return &v }
