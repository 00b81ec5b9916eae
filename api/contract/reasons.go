package contract

// Event reasons the controller records on Services and IPAddressPools.
const (
	ReasonAllocated        = "IPAllocated"
	ReasonAllocationFailed = "AllocationFailed"
	ReasonInvalidRequest   = "InvalidRequest"
	ReasonPoolOverlap      = "PoolOverlap"
)

// Event reasons on BGPPeers, recorded by each speaker for its own node.
const (
	// ReasonBGPPeerInvalid: the peer selects this node but cannot be configured (the note names
	// the field and why). Recorded once per distinct error.
	ReasonBGPPeerInvalid = "InvalidBGPPeer"
	// ReasonBGPPeerValid: a peer reported invalid on this node is configured again.
	ReasonBGPPeerValid = "BGPPeerConfigured"
)

// Event reasons of the ingress proxy's status publisher (on Ingresses, and on the proxy's own
// publish Service for ReasonAnnounceFailed). kubectl metalgate check reads them.
const (
	ReasonNoAddress      = "NoLoadBalancerAddress"
	ReasonStatusConflict = "StatusConflict"
	// ReasonYielded: another metalgate proxy publishes this Ingress's status (it wins the
	// arbitration), or annotation metalgate.io/status-owner names another writer.
	ReasonYielded = "StatusYielded"
	// ReasonForeignWriter: another writer kept replacing the status; this proxy stopped.
	ReasonForeignWriter = "ForeignStatusWriter"
	// ReasonAnnounceFailed, on the proxy's own Service: it could not announce itself there.
	ReasonAnnounceFailed = "AnnounceFailed"
)

// The condition the controller keeps in a Service's status.conditions when it takes address
// claims away from the Service. Its message names each claim withdrawn and the claim's
// resourceVersion at the moment it was marked releasing; writing it is the fence that makes
// any status write another controller prepared before the mark fail (docs/architecture.md,
// "Why two controllers cannot double-assign").
const (
	ConditionClaimsReleased = "metalgate.io/ClaimsReleased"
	ReasonClaimsReleased    = "ClaimsReleased"
)
