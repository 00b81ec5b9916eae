package speaker

import (
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
	// BGPPeers are the BGP sessions this node opens (BGPPeers whose node selectors match it).
	BGPPeers []bgp.Peer
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
