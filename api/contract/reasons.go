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
