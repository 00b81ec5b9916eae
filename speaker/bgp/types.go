package bgp

import (
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Peer is one BGP session the node opens.
type Peer struct {
	// Name identifies the peer (the BGPPeer name); Advertisement.Peers refer
	// to it.
	Name string
	// MyASN is the local AS of the session, PeerASN the peer's. Equal
	// numbers make the session internal BGP.
	MyASN, PeerASN uint32
	// Address and Port of the peer. Port 0 means 179.
	Address netip.Addr
	Port    uint16
	// SourceAddress is the local address the session is opened from; the
	// zero value lets the routing table decide.
	SourceAddress netip.Addr
	// RouterID, when set, must equal Options.RouterID: GoBGP has one router
	// ID per server, and a peer asking for another one is refused.
	RouterID netip.Addr
	// HoldTime and KeepaliveTime are the BGP timers; zero means GoBGP's
	// defaults (90s, a third of the hold time). GoBGP cannot propose a hold
	// time of 0; a peer that proposes 0 still gets a session without one. ConnectTime is the delay
	// between connection attempts; zero means 5s. They are rounded down to
	// whole seconds (BGP carries seconds).
	HoldTime, KeepaliveTime, ConnectTime time.Duration
	// Password turns on TCP MD5 signatures (RFC 2385).
	Password string
	// EBGPMultiHop allows an external peer more than one hop away (TTL 255).
	EBGPMultiHop bool
	// GracefulRestart announces the graceful restart capability (RFC 4724).
	GracefulRestart bool
	// BFD runs a BFD session with the peer; nil turns BFD off.
	BFD *BFDProfile
	// NextHopV4 and NextHopV6 are the node's addresses used as next hop for
	// prefixes of the family other than the session's (for example IPv6
	// VIPs over an IPv4 session). When unset, SetPeers looks for a global
	// address of that family on the interface that holds the session's
	// source address.
	NextHopV4, NextHopV6 netip.Addr
}

// BFDProfile holds the BFD settings of a peer.
type BFDProfile struct {
	// ReceiveInterval is the required minimum receive interval,
	// TransmitInterval the desired minimum transmit interval.
	ReceiveInterval, TransmitInterval time.Duration
	// DetectMultiplier is the number of missed packets that declare the
	// session down.
	DetectMultiplier uint32
}

// LargeCommunity is a BGP large community (RFC 8092).
type LargeCommunity struct {
	GlobalAdmin, LocalData1, LocalData2 uint32
}

// Advertisement is one prefix to announce and its attributes.
type Advertisement struct {
	Prefix netip.Prefix
	// LocalPref is the LOCAL_PREF attribute (sent to internal peers only);
	// 0 leaves it to the peer's default.
	LocalPref        uint32
	Communities      []uint32
	LargeCommunities []LargeCommunity
	// Peers names the peers that receive the prefix; empty means all.
	Peers []string
}

// PeerStatus is the state of one configured peer.
type PeerStatus struct {
	Name    string
	Address netip.Addr
	// SessionState is one of the v1alpha1.SessionState* strings.
	SessionState string
	// PrefixesAdvertised counts the prefixes the export policy lets through
	// to this peer (whether or not the session is up).
	PrefixesAdvertised int
	// LastError is the last error seen for the peer: a configuration error
	// or the reason the session last went down.
	LastError string
	// Since is when SessionState last changed.
	Since time.Time
	// EstablishedCount counts the transitions into Established.
	EstablishedCount int
}

// Options configure a Speaker.
type Options struct {
	// RouterID is the BGP identifier, an IPv4 address. Required.
	RouterID netip.Addr
	// ASN is GoBGP's global AS. Every peer sets its own local AS, so this
	// only matters for peers without MyASN. Defaults to 64512.
	ASN uint32
	// ListenPort is the TCP port to accept sessions on; 0 means 179 and -1
	// (the usual choice: the speaker dials out) means do not listen.
	ListenPort int32
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// BindToDevice binds GoBGP's listener and BFD socket to an interface
	// (empty: none).
	BindToDevice string
	// OnStateChange, if set, is called after a peer's session state changed
	// (Status reports the new state). It runs on GoBGP's event goroutine: it
	// must not block and must not call the Speaker.
	OnStateChange func(peer string)
}
