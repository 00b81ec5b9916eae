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

// Event reasons on Services and pools.
const (
	ReasonAllocated        = "IPAllocated"
	ReasonAllocationFailed = "AllocationFailed"
	ReasonInvalidRequest   = "InvalidRequest"
	ReasonReleased         = "IPReleased"
	ReasonPoolOverlap      = "PoolOverlap"
)
