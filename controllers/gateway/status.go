package gateway

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// Observed is what the controller saw of the Gateway's Service.
type Observed struct {
	// Service is the Service's namespace/name ("" when the plan wants none).
	Service string
	// VIPs are the addresses in the Service's status, as the allocator wrote them.
	VIPs []netip.Addr
	// Problem is the allocator's last word on why the Service has no address (its newest
	// Warning event), or "".
	Problem string
	// ProxyProblem says why the Gateway's proxy does not serve yet (no available replica, a
	// Deployment of that name that is not this Gateway's), or "": served, or no proxy is
	// made by this controller.
	ProxyProblem string
	// AddressRequested says the Service was just created, or its address request (requested
	// IPs, pool) just changed.
	AddressRequested bool
	// AttachedRoutes counts the routes attached to each listener, by name (the table's
	// GatewayStatus); a listener not in it has none.
	AttachedRoutes map[string]int32
	// CertificateProblems says, per HTTPS listener name, why none of its certificateRefs gives
	// a certificate (the table's GatewayStatus: missing Secret, wrong type, bad key pair); such
	// a listener has ResolvedRefs=False InvalidCertificateRef and is not Programmed.
	CertificateProblems map[string]string
	// FrontendProblems says, per HTTPS listener name, what is wrong with its port's
	// client-certificate validation (the table's GatewayStatus; frontend.go).
	FrontendProblems map[string]table.FrontendProblem
	// BackendClientCertificate says why spec.tls.backend.clientCertificateRef cannot be used
	// (the table's GatewayStatus); nil when it can or none is set (backendtls.go).
	BackendClientCertificate *table.RefProblem
}

// Status is the Gateway's status for plan and obs, keeping the transition times of the
// conditions in prev that did not change. The addresses are exactly the Service's VIPs (never
// a node address) and only once they are what spec.addresses asked for.
func Status(gw *gwv1.Gateway, plan Plan, obs Observed, prev gwv1.GatewayStatus, now metav1.Time) gwv1.GatewayStatus {
	gen := gw.Generation
	var addrs []gwv1.GatewayStatusAddress
	programmed := cond(gwv1.GatewayConditionProgrammed, false, gwv1.GatewayReasonInvalid, "the Gateway is not accepted")
	switch {
	case plan.Accepted.Status != metav1.ConditionTrue:
	case plan.AddressProblem != "":
		programmed = cond(gwv1.GatewayConditionProgrammed, false, gwv1.GatewayReasonAddressNotUsable, plan.AddressProblem)
	case len(obs.VIPs) == 0 || !matches(plan.StaticIPs, obs.VIPs):
		programmed = notAssigned(plan, obs)
	default:
		for _, ip := range obs.VIPs {
			addrs = append(addrs, gwv1.GatewayStatusAddress{Type: ptr(gwv1.IPAddressType), Value: ip.String()})
		}
		programmed = cond(gwv1.GatewayConditionProgrammed, true, gwv1.GatewayReasonProgrammed,
			fmt.Sprintf("address assigned to Service %s", obs.Service))
		if obs.ProxyProblem != "" {
			// The address is the Gateway's (so it is listed), but nothing serves it yet.
			programmed = cond(gwv1.GatewayConditionProgrammed, false, gwv1.GatewayReasonPending,
				fmt.Sprintf("address assigned to Service %s; %s", obs.Service, obs.ProxyProblem))
		}
	}
	st := gwv1.GatewayStatus{Addresses: addrs, Conditions: slices.Clone(prev.Conditions)}
	setCondition(&st.Conditions, plan.Accepted, gen, now)
	setCondition(&st.Conditions, programmed, gen, now)
	clientCertificateCondition(gw, plan, obs, &st.Conditions, now)
	for i, l := range plan.Listeners {
		ls := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: l.SupportedKinds, AttachedRoutes: obs.AttachedRoutes[string(l.Name)]}
		if j := slices.IndexFunc(prev.Listeners, func(p gwv1.ListenerStatus) bool { return p.Name == l.Name }); j >= 0 {
			ls.Conditions = slices.Clone(prev.Listeners[j].Conditions)
		}
		for _, c := range l.Conditions {
			setCondition(&ls.Conditions, c, gen, now)
		}
		certProblem, noCert := obs.CertificateProblems[string(l.Name)]
		noCert = noCert && plan.listenerOK[i]
		if noCert {
			setCondition(&ls.Conditions, cond(gwv1.ListenerConditionResolvedRefs, false, gwv1.ListenerReasonInvalidCertificateRef,
				"no usable certificate: "+certProblem), gen, now)
		}
		lp := cond(gwv1.ListenerConditionProgrammed, true, gwv1.ListenerReasonProgrammed, "listener programmed")
		switch {
		case noCert:
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonInvalid, "no usable certificate: "+certProblem)
		case !plan.listenerOK[i] || plan.Accepted.Status != metav1.ConditionTrue:
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonInvalid, "listener not valid or Gateway not accepted")
		case programmed.Status != metav1.ConditionTrue:
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonPending, "waiting for the Gateway: "+programmed.Message)
		}
		setCondition(&ls.Conditions, lp, gen, now)
		st.Listeners = append(st.Listeners, ls)
	}
	frontendStatus(gw, &st, obs.FrontendProblems, gen, now) // frontend.go
	return st
}

// notAssigned is Programmed=False while the Service has no address (or not the requested
// one): AddressNotUsable when specific addresses were requested and the allocator refused
// them, else AddressNotAssigned; the message is the allocator's reason when there is one.
func notAssigned(plan Plan, obs Observed) metav1.Condition {
	if obs.Problem == "" {
		return cond(gwv1.GatewayConditionProgrammed, false, gwv1.GatewayReasonAddressNotAssigned,
			fmt.Sprintf("waiting for the allocator to assign an address to Service %s", obs.Service))
	}
	reason := gwv1.GatewayReasonAddressNotAssigned
	if len(plan.StaticIPs) > 0 {
		reason = gwv1.GatewayReasonAddressNotUsable
	}
	return cond(gwv1.GatewayConditionProgrammed, false, reason,
		fmt.Sprintf("Service %s has no address: %s", obs.Service, obs.Problem))
}

// matches says whether the VIPs are the requested static addresses (any VIPs do when none
// were requested).
func matches(static, vips []netip.Addr) bool {
	if len(static) == 0 {
		return true
	}
	if len(static) != len(vips) {
		return false
	}
	for _, s := range static {
		if !slices.Contains(vips, s) {
			return false
		}
	}
	return true
}

func setCondition(conds *[]metav1.Condition, c metav1.Condition, gen int64, now metav1.Time) {
	c.ObservedGeneration = gen
	c.LastTransitionTime = now
	meta.SetStatusCondition(conds, c)
}
