package speaker

import (
	"net/netip"

	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/election"
)

// Mode is an announcement mode; each has one Announcer.
type Mode string

// Announcement modes.
const (
	// ModeLayer2: exactly one node (the elected owner) answers ARP/NDP for the address.
	ModeLayer2 Mode = "layer2"
	// ModeBGP: every candidate node advertises the address to its BGP peers (ECMP). Reserved for
	// the BGP announcer (speaker/bgp); the Speaker already computes its desired set.
	ModeBGP Mode = "bgp"
)

// World is everything the speaker needs to know from the cluster, already translated from the
// API objects (speaker/config.Build) or read from a static file. It is immutable once handed
// to the Speaker.
type World struct {
	// Nodes are the nodes that may announce, with their labels and exclusions.
	Nodes []election.Node
	// VIPs are the addresses to announce, one entry per address and mode, sorted by address.
	VIPs []VIP
	// Speakers are the names of the nodes expected to run a speaker: the quorum base.
	Speakers []string
	// Peers are memberlist addresses ("host:port") of the other speakers, joined on change.
	Peers []string
	// SpeakerAddrs are the nodes that run a speaker Pod (terminating ones too: they still
	// announce their leave), by node name, with the addresses the API server gives the node
	// (InternalIPs, and the speaker Pod's host IPs). Only these may be memberlist members, and
	// only from these addresses (membership.Membership.Admit).
	SpeakerAddrs map[string][]netip.Addr
	// BGPPeers are the BGP sessions this node opens (BGPPeers whose node selectors match it).
	BGPPeers []bgp.Peer
	// InvalidBGPPeers are the BGPPeers that select this node (or whose node selectors do not
	// parse) but cannot be configured, sorted by name. They open no session; their errors are
	// reported in BGPPeer.status and Events.
	InvalidBGPPeers []InvalidBGPPeer
}

// InvalidBGPPeer is a BGPPeer that cannot be configured on this node.
type InvalidBGPPeer struct {
	// Name is the BGPPeer's name.
	Name string
	// Err names the offending field and why ("spec.passwordSecret: no Secret \"x\" in namespace …").
	Err error
}

// VIP is one address and how it may be announced.
type VIP struct {
	election.Request
	Mode Mode
	// Service is "namespace/name" of the Service holding the address (first by name if shared).
	Service string
	// Pool is the IPAddressPool the address belongs to, if known.
	Pool string
	// Interfaces restricts layer-2 announcements to these interfaces; empty: automatic.
	Interfaces []string
	// BGP are the advertisements of a ModeBGP address from this node (one per BGPAdvertisement
	// that selects its pool and this node): prefix, communities, local preference, peers.
	BGP []bgp.Advertisement
}
