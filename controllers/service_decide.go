package controllers

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// The decisions of a Service reconcile, apart from the API calls that carry them out
// (service_controller.go). Each is a pure function of what was read.

// serviceAction is what a reconcile does with a Service before any allocation.
type serviceAction int

const (
	// serviceAllocate: the Service is ours; assign, claim and publish its addresses.
	serviceAllocate serviceAction = iota
	// serviceRelease: forget the Service's addresses and drop its claims; write nothing on it.
	serviceRelease
	// serviceReleaseAndClear: release, and also clear the addresses from its status.
	serviceReleaseAndClear
)

func (a serviceAction) String() string {
	switch a {
	case serviceAllocate:
		return "allocate"
	case serviceRelease:
		return "release"
	case serviceReleaseAndClear:
		return "releaseAndClear"
	}
	return "unknown"
}

// decideService says what to do with svc (nil: it is gone) for the controller serving
// lbClass; held is whether the allocator holds addresses for it.
//
//	gone or being deleted                          → release
//	not ours, still a LoadBalancer (other class)    → release; its status is the other class's
//	not ours, no longer a LoadBalancer, was held    → release and clear the status we wrote
//	not ours, no longer a LoadBalancer, not held    → release (nothing of ours to clear)
//	ours                                            → allocate
func decideService(svc *corev1.Service, lbClass string, held bool) serviceAction {
	switch {
	case svc == nil || !svc.DeletionTimestamp.IsZero():
		return serviceRelease
	case servedBy(svc, lbClass):
		return serviceAllocate
	case held && svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		return serviceReleaseAndClear
	default:
		return serviceRelease
	}
}

// servedBy reports whether svc is a Service the controller of lbClass allocates for: a
// LoadBalancer of that class or of none.
func servedBy(svc *corev1.Service, lbClass string) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == lbClass
}

// adoptable is what the allocator should restore for svc before assigning: the addresses its
// status shows, when the allocator holds others for it (or none: assigned before a restart and
// not yet learned, or by another controller). The status is where every controller's view
// meets — its writes are ordered by the API server and each was checked against the claims —
// so two controllers that chose differently for one Service converge on what it shows rather
// than taking the address from each other in turn. The claim step then confirms the addresses
// against the API server; if they no longer fit the Service's request, Assign replaces them.
func adoptable(svc *corev1.Service, held []netip.Addr) []netip.Addr {
	shown := statusAddresses(svc)
	if len(shown) == 0 || sameAddrs(shown, held) {
		return nil
	}
	return shown
}

// sameAddrs reports whether a and b hold the same addresses, in any order.
func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// newlyAssigned reports whether publishing after was an assignment worth an Event and a
// count: the addresses differ from before, and the write was not deferred (a deferred write
// was made, and announced, by an earlier reconcile).
func newlyAssigned(before, after []netip.Addr, deferred bool) bool {
	return !deferred && !slices.Equal(before, after)
}

// needsPoolAnnotation reports whether svc must be patched to name pool in
// metalgate.io/ip-allocated-from-pool.
func needsPoolAnnotation(svc *corev1.Service, pool string) bool {
	return svc.Annotations[contract.AnnotationAllocatedFromPool] != pool
}
