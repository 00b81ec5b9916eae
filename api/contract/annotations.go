package contract

// Service annotations that the controller reads (requests) and writes (the pool).
const (
	// AnnotationLoadBalancerIPs requests exact addresses: a comma-separated list, at most one
	// per IP family. It takes precedence over spec.loadBalancerIP.
	AnnotationLoadBalancerIPs = "metalgate.io/loadBalancerIPs"
	// AnnotationAddressPool requests the pool to allocate from, by name.
	AnnotationAddressPool = "metalgate.io/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same key may share an
	// address when their ports do not overlap.
	AnnotationAllowSharedIP = "metalgate.io/allow-shared-ip"
	// AnnotationAllocatedFromPool is written by the controller: the pool the addresses came
	// from. The speaker and kubectl metalgate read it.
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

// LabelExcludeFromLB excludes a node from announcing (a Kubernetes well-known label the
// speaker honours).
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// What an ingress proxy says about itself on its publish Service, so that other metalgate
// proxies (and kubectl metalgate check) can arbitrate with it. The proxy's leader writes them
// with a server-side apply of its own field manager; they follow its flags (a removed flag
// removes its value). Reading them needs nothing new: every proxy already reads the Services of
// the namespaces it watches. Writing them needs `patch` on the publish Service only
// (config/proxy: a Role rule with resourceNames: [metalgate-proxy]).
const (
	// LabelProxy ("true") marks a metalgate proxy's publish Service:
	// kubectl get svc -A -l metalgate.io/ingress-proxy.
	LabelProxy = "metalgate.io/ingress-proxy"
	// AnnotationProxyController is the IngressClass spec.controller the proxy serves
	// (--controller-name). Its presence is the announcement.
	AnnotationProxyController = "metalgate.io/proxy-controller"
	// AnnotationProxyWatchNamespaces lists the namespaces it watches, comma-separated
	// (--watch-namespace), or "*" for all.
	AnnotationProxyWatchNamespaces = "metalgate.io/proxy-watch-namespaces"
	// AnnotationProxyWithoutClass is "true" when it also serves Ingresses without a class
	// (--watch-ingress-without-class), else "false".
	AnnotationProxyWithoutClass = "metalgate.io/proxy-watch-ingress-without-class"
	// AnnotationProxyFieldManager is the field manager of its status writes, as
	// managedFields and Events name it.
	AnnotationProxyFieldManager = "metalgate.io/proxy-field-manager"
)

// AnnotationStatusOwner, on an Ingress, names the one writer of its status: a metalgate
// proxy by its publish Service (namespace/name) or field manager, or any other controller's
// field manager. Every metalgate proxy but the one named leaves the status alone; the one
// named writes it whatever arbitration or conflicts say.
const AnnotationStatusOwner = "metalgate.io/status-owner"

// Labels and annotations on the objects the Gateway controller makes for a Gateway. The
// Gateway is in another namespace than they are, so they name it instead of holding an owner
// reference.
const (
	// LabelGatewayName is the label Gateway API implementations put on what they make for a
	// Gateway (GEP-1762): the Gateway's name, or a hashed form when it is no valid label value.
	LabelGatewayName = "gateway.networking.k8s.io/gateway-name"
	// LabelGatewayNamespace is the Gateway's namespace.
	LabelGatewayNamespace = "metalgate.io/gateway-namespace"
	// AnnotationGateway is the Gateway as namespace/name, exactly: which Gateway a Service
	// belongs to is decided by it, not by the labels (which may be shortened).
	AnnotationGateway = "metalgate.io/gateway"
	// AnnotationAllowUnmanagedEndpointSlices on a GatewayClass, "true": the proxies of its
	// Gateways also route to EndpointSlices the endpoint-slice controller does not manage
	// (metalgate proxy --allow-unmanaged-endpointslices). Any other value, or none: they do not.
	AnnotationAllowUnmanagedEndpointSlices = "metalgate.io/allow-unmanaged-endpointslices"
)
