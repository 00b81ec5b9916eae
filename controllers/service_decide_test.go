package controllers

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
)

const testClass = "metalgate.io/metalgate"

func decideSvc(mut func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

func TestDecideService(t *testing.T) {
	deleting := func(s *corev1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) }
	otherClass := func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }
	clusterIP := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }
	tests := []struct {
		name string
		svc  *corev1.Service
		held bool
		want serviceAction
	}{
		{"gone, held", nil, true, serviceRelease},
		{"gone, not held", nil, false, serviceRelease},
		{"being deleted, held: release, write nothing on it", decideSvc(deleting), true, serviceRelease},
		{"other class, held: release, its status belongs to the other class", decideSvc(otherClass), true, serviceRelease},
		{"other class, not held", decideSvc(otherClass), false, serviceRelease},
		{"no longer a LoadBalancer, held: clear what we wrote", decideSvc(clusterIP), true, serviceReleaseAndClear},
		{"no longer a LoadBalancer, not held: nothing of ours to clear", decideSvc(clusterIP), false, serviceRelease},
		{"NodePort, held", decideSvc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }), true, serviceReleaseAndClear},
		{"ours, no class", decideSvc(nil), false, serviceAllocate},
		{"ours, held", decideSvc(nil), true, serviceAllocate},
		{"ours, our class named", decideSvc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To(testClass) }), false, serviceAllocate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideService(tc.svc, testClass, tc.held); got != tc.want {
				t.Errorf("decideService = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServedBy(t *testing.T) {
	tests := []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"LoadBalancer without class", decideSvc(nil), true},
		{"LoadBalancer of our class", decideSvc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To(testClass) }), true},
		{"LoadBalancer of another class", decideSvc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("x/y") }), false},
		{"empty class is a class, not none", decideSvc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("") }), false},
		{"ClusterIP of our class", decideSvc(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.LoadBalancerClass = ptr.To(testClass)
		}), false},
		{"ExternalName", decideSvc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := servedBy(tc.svc, testClass); got != tc.want {
				t.Errorf("servedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdoptable(t *testing.T) {
	shows := func(ips ...string) *corev1.Service {
		return decideSvc(func(s *corev1.Service) {
			for _, ip := range ips {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
			}
		})
	}
	addrs := func(ips ...string) []netip.Addr {
		var out []netip.Addr
		for _, ip := range ips {
			out = append(out, netip.MustParseAddr(ip))
		}
		return out
	}
	tests := []struct {
		name string
		svc  *corev1.Service
		held []netip.Addr
		want []netip.Addr
	}{
		{"held the same: nothing to adopt", shows("192.0.2.1"), addrs("192.0.2.1"), nil},
		{"held the same in another order", shows("2001:db8::1", "192.0.2.1"), addrs("192.0.2.1", "2001:db8::1"), nil},
		{"held another: the status wins (another controller published it)", shows("192.0.2.1"), addrs("192.0.2.7"),
			addrs("192.0.2.1")},
		{"held one family of two: adopt both", shows("192.0.2.1", "2001:db8::1"), addrs("192.0.2.1"),
			addrs("192.0.2.1", "2001:db8::1")},
		{"not held, status shows addresses: adopt them", shows("192.0.2.1", "2001:db8::1"), nil,
			addrs("192.0.2.1", "2001:db8::1")},
		{"not held, empty status", shows(), nil, nil},
		{"held, empty status: keep what is held", shows(), addrs("192.0.2.1"), nil},
		{"not held, a status entry that is no address is not adopted", shows("lb.example.com"), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, adoptable(tc.svc, tc.held), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("adoptable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewlyAssigned(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	tests := []struct {
		name          string
		before, after []netip.Addr
		deferred      bool
		want          bool
	}{
		{"first assignment", nil, []netip.Addr{a}, false, true},
		{"moved to another address", []netip.Addr{a}, []netip.Addr{b}, false, true},
		{"a second family added", []netip.Addr{a}, []netip.Addr{a, b}, false, true},
		{"unchanged: no Event on every reconcile", []netip.Addr{a}, []netip.Addr{a}, false, false},
		{"deferred: an earlier reconcile wrote and announced it", nil, []netip.Addr{a}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := newlyAssigned(tc.before, tc.after, tc.deferred); got != tc.want {
				t.Errorf("newlyAssigned = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNeedsPoolAnnotation(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		pool        string
		want        bool
	}{
		{"no annotations", nil, "a", true},
		{"another pool recorded", map[string]string{contract.AnnotationAllocatedFromPool: "b"}, "a", true},
		{"this pool recorded", map[string]string{contract.AnnotationAllocatedFromPool: "a"}, "a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := decideSvc(func(s *corev1.Service) { s.Annotations = tc.annotations })
			if got := needsPoolAnnotation(svc, tc.pool); got != tc.want {
				t.Errorf("needsPoolAnnotation = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFailureReason(t *testing.T) {
	// The metric label names the allocator's sentinel, wrapped or not; anything else is "other".
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("allocate from pool %q: %w", "p", allocator.ErrPoolExhausted), "exhausted"},
		{allocator.ErrInUse, "in_use"},
		{allocator.ErrNotInPool, "not_in_pool"},
		{allocator.ErrFamilyUnavailable, "family_unavailable"},
		{allocator.ErrSharingRefused, "sharing_refused"},
		{allocator.ErrNoSuchPool, "no_such_pool"},
		{allocator.ErrPoolNotEligible, "pool_not_eligible"},
		{errors.New("boom"), "other"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := failureReason(tc.err); got != tc.want {
				t.Errorf("failureReason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
