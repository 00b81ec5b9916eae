package controllers

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

func TestPlanBootstrap(t *testing.T) {
	lb := func(ns, name, uid string, mut func(*corev1.Service)) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	claim := func(addr string, holders ...v1alpha1.ClaimHolder) v1alpha1.IPAddressClaim {
		return v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-" + addr}, Spec: v1alpha1.IPAddressClaimSpec{Address: addr, Holders: holders}}
	}
	holder := func(ns, name, uid string) v1alpha1.ClaimHolder {
		return v1alpha1.ClaimHolder{Namespace: ns, Name: name, UID: types.UID(uid)}
	}
	services := []corev1.Service{
		lb("a", "web", "u1", nil),
		lb("a", "api", "u2", nil),
		lb("b", "other", "u3", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/lb") }),
		lb("b", "cip", "u4", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }),
		lb("b", "shown", "u5", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.6"}}
		}),
	}
	claims := []v1alpha1.IPAddressClaim{
		// Hostile first: holders that must not survive a restart.
		claim("192.0.2.1", holder("a", "gone", "u9")),                          // Service deleted
		claim("192.0.2.2", holder("a", "web", "u0"), holder("a", "web", "u1")), // an earlier Service of the same name, then the live one
		claim("192.0.2.3", holder("b", "other", "u3")),                         // another class now
		claim("192.0.2.4", holder("b", "cip", "u4")),                           // no longer a LoadBalancer
		claim("not-an-address", holder("a", "api", "u2")),                      // left alone, holder not counted
		// Not ours any more, but its status still shows the address: neither restored nor
		// dropped here (its own reconcile withdraws it, with the fence).
		claim("192.0.2.6", holder("b", "shown", "u5")),
		// Live holders, one sharing pair, IPv4-mapped unmapped.
		claim("::ffff:192.0.2.5", holder("a", "web", "u1"), holder("a", "api", "u2")),
		claim("2001:db8::1", holder("a", "api", "u2")),
	}
	got := planBootstrap(claims, services, "metalgate.io/metalgate")

	wantHeld := map[string][]netip.Addr{
		"a/web": {netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.5")},
		"a/api": {netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("2001:db8::1")},
	}
	if diff := cmp.Diff(wantHeld, got.held, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
	wantStale := []staleHolder{
		{"c-192.0.2.1", "a/gone", "u9"}, {"c-192.0.2.2", "a/web", "u0"}, {"c-192.0.2.3", "b/other", "u3"}, {"c-192.0.2.4", "b/cip", "u4"},
	}
	if diff := cmp.Diff(wantStale, got.stale, cmp.AllowUnexported(staleHolder{})); diff != "" {
		t.Errorf("stale, in claim order (-want +got):\n%s", diff)
	}
	if len(got.services) != len(services) || got.services["a/web"].UID != "u1" {
		t.Errorf("services by key = %v, want all %d, a/web with UID u1", got.services, len(services))
	}
}
