package controllers

// Service annotations that metalgate reads and writes.
const (
	// AnnotationLoadBalancerIPs requests exact addresses: a comma-separated list, at most one
	// per IP family. It takes precedence over spec.loadBalancerIP.
	AnnotationLoadBalancerIPs = "metalgate.io/loadBalancerIPs"
	// AnnotationAddressPool requests the pool to allocate from, by name.
	AnnotationAddressPool = "metalgate.io/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same key may share an
	// address when their ports do not overlap.
	AnnotationAllowSharedIP = "metalgate.io/allow-shared-ip"
	// AnnotationAllocatedFromPool is written by the controller: the pool the addresses came from.
	AnnotationAllocatedFromPool = "metalgate.io/ip-allocated-from-pool"
)

// MetalLB's names for the three requests above, read as aliases so that Services move from
// MetalLB unchanged: metallb.io/… (current MetalLB) and metallb.universe.tf/… (older
// releases; MetalLB still reads them).
const (
	AnnotationMetalLBLoadBalancerIPs       = "metallb.io/loadBalancerIPs"
	AnnotationMetalLBAddressPool           = "metallb.io/address-pool"
	AnnotationMetalLBAllowSharedIP         = "metallb.io/allow-shared-ip"
	AnnotationMetalLBLegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	AnnotationMetalLBLegacyAddressPool     = "metallb.universe.tf/address-pool"
	AnnotationMetalLBLegacyAllowSharedIP   = "metallb.universe.tf/allow-shared-ip"
)

// AnnotationKeys returns the keys read for one of the metalgate.io request annotations, in
// order of precedence: the metalgate.io name, then metallb.io, then metallb.universe.tf. The
// first one present on a Service is used; any other present with a different value is
// reported in an InvalidRequest Warning event. Other names return only themselves.
func AnnotationKeys(name string) []string {
	switch name {
	case AnnotationLoadBalancerIPs:
		return []string{name, AnnotationMetalLBLoadBalancerIPs, AnnotationMetalLBLegacyLoadBalancerIPs}
	case AnnotationAddressPool:
		return []string{name, AnnotationMetalLBAddressPool, AnnotationMetalLBLegacyAddressPool}
	case AnnotationAllowSharedIP:
		return []string{name, AnnotationMetalLBAllowSharedIP, AnnotationMetalLBLegacyAllowSharedIP}
	}
	return []string{name}
}

// Event reasons on Services and pools.
const (
	ReasonAllocated        = "IPAllocated"
	ReasonAllocationFailed = "AllocationFailed"
	ReasonInvalidRequest   = "InvalidRequest"
	ReasonReleased         = "IPReleased"
	ReasonPoolOverlap      = "PoolOverlap"
)
