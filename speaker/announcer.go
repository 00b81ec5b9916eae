package speaker

import (
	"context"
	"net/netip"

	"github.com/metalgate/metalgate/speaker/bgp"
)

// Announcement is one address this node must make reachable.
type Announcement struct {
	// VIP is the address announced.
	VIP netip.Addr
	// Service is the "namespace/name" of a Service that holds VIP (the first by name when the
	// address is shared); used for events and metrics only.
	Service string
	// Interfaces restricts a layer-2 announcement to these interfaces; empty means the announcer
	// picks (see layer2.SelectInterfaces). A BGP announcer ignores it.
	Interfaces []string
	// BGP are the advertisements of a ModeBGP address (see VIP.BGP).
	BGP []bgp.Advertisement
}

// Announcer makes a set of addresses reachable through one announcement mode (layer 2, BGP).
//
// Announce is level-based: desired is the complete set this node must announce now, and
// everything not in it must stop being announced before Announce returns (that is what fencing
// relies on). Implementations diff against their previous call, so calling Announce with the same
// set is cheap and must not re-send gratuitous traffic. Announce must be safe to call from one
// goroutine at a time; the Speaker never calls it concurrently.
//
// A BGP announcer implements Announce by turning desired into advertisements for
// bgp.Speaker.SetAdvertisements; layer 2 by switching its ARP/NDP responders.
type Announcer interface {
	Announce(ctx context.Context, desired []Announcement) error
	// Close stops announcing everything and releases sockets.
	Close() error
}

// CloseOnly is implemented by an Announcer for which Close alone is the way to stop: the BGP
// announcer. Closing its sessions withdraws its routes at the routers (a NOTIFICATION), or,
// with graceful restart, deliberately leaves them in place while the speaker restarts (RFC
// 4724); withdrawing everything first, as the Speaker does for the others on shutdown, would
// defeat graceful restart. The Speaker's shutdown calls only Close on it.
type CloseOnly interface {
	Announcer
	CloseOnly()
}

// AnnouncerFunc adapts a function to Announcer (Close does nothing); handy in tests.
type AnnouncerFunc func(ctx context.Context, desired []Announcement) error

// Announce calls f.
func (f AnnouncerFunc) Announce(ctx context.Context, desired []Announcement) error {
	return f(ctx, desired)
}

// Close does nothing.
func (f AnnouncerFunc) Close() error { return nil }
