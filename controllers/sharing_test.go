package controllers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// TestSharingAcrossNamespaces: a sharing key does not reach into another namespace unless the
// pool's spec.addressSharing is AcrossNamespaces (invariant 10). Steps in order against one
// controller, in two namespaces, for a pool with the default and a pool that allows it.
func TestSharingAcrossNamespaces(t *testing.T) {
	kube.Need(t)
	startController(t)
	manual := func(p *v1alpha1.IPAddressPool) { p.Spec.AutoAssign = ptr.To(false) }
	pool(t, "share-within", manual, "203.0.113.64/30") // spec.addressSharing unset: WithinNamespace
	pool(t, "share-across", func(p *v1alpha1.IPAddressPool) {
		manual(p)
		p.Spec.AddressSharing = v1alpha1.AddressSharingAcrossNamespaces
	}, "203.0.113.72/30")
	teamA, teamB := namespace(t, nil), namespace(t, nil)
	share := func(key, pool string, port int32, more ...svcOpt) []svcOpt {
		return append([]svcOpt{withAnnotation(contract.AnnotationAllowSharedIP, key), withAnnotation(contract.AnnotationAddressPool, pool),
			withPort(corev1.ProtocolTCP, port)}, more...)
	}
	for _, st := range []struct {
		desc, ns, name string
		opts           []svcOpt
		wantIPs, warn  string
	}{
		{"team-a/web, key k, within pool", teamA, "web", share("k", "share-within", 80), "203.0.113.64", ""},
		{"team-b/evil, same key, same pool: its own address", teamB, "evil", share("k", "share-within", 443), "203.0.113.65", ""},
		{"team-b/evil2 asks for team-a's address with the same key: refused", teamB, "evil2",
			share("k", "share-within", 8443, withAnnotation(contract.AnnotationLoadBalancerIPs, "203.0.113.64")), "", "another namespace"},
		{"team-a/api, same key, same namespace: shares", teamA, "api", share("k", "share-within", 8080), "203.0.113.64", ""},
		{"team-a/db, key d, across pool", teamA, "db", share("d", "share-across", 5432), "203.0.113.72", ""},
		{"team-b/db2, same key, across pool: shares (MetalLB's behaviour, allowed by the pool)", teamB, "db2", share("d", "share-across", 3306), "203.0.113.72", ""},
	} {
		t.Run(st.desc, func(t *testing.T) {
			service(t, st.ns, st.name, st.opts...)
			if st.warn != "" {
				warning(t, st.ns, st.name, "", st.warn)
				if got := ips(getService(t, st.ns, st.name)); got != "" {
					t.Errorf("refused Service has addresses %q", got)
				}
				return
			}
			waitIPs(t, st.ns, st.name, st.wantIPs)
		})
	}
	assertNoAddressHeldTwice(t)
}
