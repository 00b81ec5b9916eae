package controllers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// TestMetalLBAliases runs Services annotated as MetalLB users annotate them (metallb.io/… and
// the older metallb.universe.tf/…) through the controller: they are allocated as with the
// metalgate.io names, and names that disagree are reported in an InvalidRequest Warning.
func TestMetalLBAliases(t *testing.T) {
	kube.Need(t)
	startController(t)
	manual := func(p *v1alpha1.IPAddressPool) { p.Spec.AutoAssign = ptr.To(false) }
	pool(t, "alias-a", manual, "10.202.0.0/29")
	pool(t, "alias-b", manual, "10.202.1.0/29")
	ns := namespace(t, nil)

	// Steps run in order against one controller: later steps see earlier Services.
	steps := []struct {
		desc    string
		name    string
		opts    []svcOpt
		wantIPs string
		warn    string // substring of an InvalidRequest Warning event
	}{
		{desc: "metallb.io/address-pool", name: "a", opts: []svcOpt{withAnnotation(contract.AnnotationMetalLBAddressPool, "alias-a")}, wantIPs: "10.202.0.0"},
		{desc: "metallb.universe.tf/address-pool", name: "b", opts: []svcOpt{withAnnotation(contract.AnnotationMetalLBLegacyAddressPool, "alias-b")}, wantIPs: "10.202.1.0"},
		{desc: "metallb.io/loadBalancerIPs", name: "c", opts: []svcOpt{withAnnotation(contract.AnnotationMetalLBLoadBalancerIPs, "10.202.0.5")}, wantIPs: "10.202.0.5"},
		{desc: "metalgate.io wins over metallb.io, and the Warning says so", name: "d",
			opts:    []svcOpt{withAnnotation(contract.AnnotationAddressPool, "alias-a"), withAnnotation(contract.AnnotationMetalLBAddressPool, "alias-b")},
			wantIPs: "10.202.0.1", warn: `annotation metallb.io/address-pool="alias-b" is ignored: metalgate.io/address-pool="alias-a" takes precedence`},
		{desc: "metallb.io wins over metallb.universe.tf", name: "e",
			opts:    []svcOpt{withAnnotation(contract.AnnotationMetalLBAddressPool, "alias-b"), withAnnotation(contract.AnnotationMetalLBLegacyAddressPool, "alias-a")},
			wantIPs: "10.202.1.1", warn: `annotation metallb.universe.tf/address-pool="alias-a" is ignored: metallb.io/address-pool="alias-b" takes precedence`},
		{desc: "sharing key by metallb.io", name: "f",
			opts:    []svcOpt{withAnnotation(contract.AnnotationMetalLBAllowSharedIP, "k"), withAnnotation(contract.AnnotationMetalLBAddressPool, "alias-b"), withPort(corev1.ProtocolTCP, 443)},
			wantIPs: "10.202.1.2"},
		{desc: "same key by metallb.universe.tf shares", name: "g",
			opts:    []svcOpt{withAnnotation(contract.AnnotationMetalLBLegacyAllowSharedIP, "k"), withAnnotation(contract.AnnotationMetalLBLegacyLoadBalancerIPs, "10.202.1.2"), withPort(corev1.ProtocolUDP, 443)},
			wantIPs: "10.202.1.2"},
		{desc: "a bad alias is named", name: "h", opts: []svcOpt{withAnnotation(contract.AnnotationMetalLBLoadBalancerIPs, "not-an-ip")},
			warn: `metadata.annotations[metallb.io/loadBalancerIPs]: "not-an-ip" is not an IP address`},
	}
	for _, st := range steps {
		t.Run(st.desc, func(t *testing.T) {
			service(t, ns, st.name, st.opts...)
			if st.wantIPs != "" {
				waitIPs(t, ns, st.name, st.wantIPs)
			}
			if st.warn != "" {
				warning(t, ns, st.name, contract.ReasonInvalidRequest, st.warn)
			}
			if st.wantIPs == "" {
				if got := ips(getService(t, ns, st.name)); got != "" {
					t.Errorf("invalid request got addresses %q", got)
				}
			}
		})
	}
	assertNoAddressHeldTwice(t)
}
