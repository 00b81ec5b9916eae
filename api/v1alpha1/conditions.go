package v1alpha1

// Reasons of the Valid condition (ConditionValid) that the controller writes on
// L2Advertisement, BGPAdvertisement, BGPPeer, BFDProfile and Community. The
// condition is True with ReasonValid when every reference resolves; False with
// the reason of the first problem otherwise, and a message that names each
// problem's field ("spec.ipAddressPools[1]: IPAddressPool \"x\" not found").
const (
	// ReasonValid: every reference of the object resolves.
	ReasonValid = "Valid"
	// ReasonPoolNotFound: spec.ipAddressPools names a pool that does not exist
	// in the namespace; the advertisement announces the other pools.
	ReasonPoolNotFound = "PoolNotFound"
	// ReasonPeerNotFound: spec.peers names a BGPPeer that does not exist in
	// the namespace; the routes go to the other peers named.
	ReasonPeerNotFound = "PeerNotFound"
	// ReasonCommunityNotFound: spec.communities holds a name that no Community
	// of the namespace defines; the speakers skip the whole advertisement.
	ReasonCommunityNotFound = "CommunityNotFound"
	// ReasonCommunityAmbiguous: a community name is defined by more than one
	// Community object with different values.
	ReasonCommunityAmbiguous = "CommunityAmbiguous"
	// ReasonBFDProfileNotFound: spec.bfdProfile names a BFDProfile that does
	// not exist in the namespace; the speakers do not open the session.
	ReasonBFDProfileNotFound = "BFDProfileNotFound"
	// ReasonBFDProfileInvalid: spec.bfdProfile names a BFDProfile that is
	// itself not Valid; the speakers do not open the session.
	ReasonBFDProfileInvalid = "BFDProfileInvalid"
	// ReasonBFDMultiHop: a bfdProfile on an ebgpMultiHop peer; the embedded
	// BFD is single-hop only, so the speakers do not open the session.
	ReasonBFDMultiHop = "BFDMultiHopUnsupported"
	// ReasonInvalidSelector: a label selector does not parse.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonUnsupported: the object asks for something the speakers do not do
	// (a BFDProfile with echoMode or passiveMode, stored before the API server
	// refused them).
	ReasonUnsupported = "Unsupported"
)
