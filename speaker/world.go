package speaker

import (
	"net/netip"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/speaker/election"
)

// Mode is an announcement mode; each has one Announcer.
type Mode string

// Announcement modes. The core knows them by name only: Decide elects one owner per address in
// ModeLayer2 and lets every candidate announce in ModeBGP; what announcing means, and the types
// it needs, belong to the mode's package (speaker/layer2, speaker/bgp).
const (
	// ModeLayer2: exactly one node (the elected owner) answers ARP/NDP for the address.
	ModeLayer2 Mode = contract.ModeLayer2
	// ModeBGP: every candidate node advertises the address to its BGP peers (ECMP).
	ModeBGP Mode = contract.ModeBGP
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
	// Modes is each mode's configuration on this node, opaque to the core: the Speaker hands
	// Modes[m] to the Announcer of mode m with every Announce (ModeBGP: a bgp.Config, the
	// sessions; ModeLayer2: none).
	Modes map[Mode]any
}

// VIP is one address and how it may be announced.
type VIP struct {
	election.Request
	Mode Mode
	// Service is "namespace/name" of the Service holding the address (first by name if shared).
	Service string
	// Pool is the IPAddressPool the address belongs to, if known.
	Pool string
	// Params are the mode's parameters for this address, opaque to the core and handed to the
	// mode's Announcer in Announcement.Params (ModeLayer2: a layer2.Params, the interfaces;
	// ModeBGP: a bgp.Params, the advertisements).
	Params any
}
