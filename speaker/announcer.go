package speaker

import (
	"context"
	"net/netip"
)

// Announcement is one address this node must make reachable.
type Announcement struct {
	// VIP is the address announced.
	VIP netip.Addr
	// Service is the "namespace/name" of a Service that holds VIP (the first by name when the
	// address is shared); used for events and metrics only.
	Service string
	// Params are VIP.Params: the mode's parameters for this address.
	Params any
}

// Announcer makes a set of addresses reachable through one announcement mode. Each mode is one
// implementation in its own package: layer2.Announcer (ARP/NDP responders), bgp.Announcer
// (BGP sessions and advertisements). The core knows none of their types: it hands each its
// part of the World (config, World.Modes) and of the decision (desired), and asks where an
// address is announced.
type Announcer interface {
	// Announce is level-based: desired is the complete set this node must announce now, and
	// everything not in it must stop being announced before Announce returns (that is what
	// fencing relies on). config is the mode's World.Modes entry (nil if none). Implementations
	// diff against their previous call, so calling Announce with the same input is cheap and
	// must not re-send gratuitous traffic. The Speaker never calls it concurrently.
	Announce(ctx context.Context, config any, desired []Announcement) error
	// Where returns where vip is announced now, sorted (layer 2: the interfaces answering for
	// it; BGP: the peers it is advertised to); for logs, events, metrics and
	// Speaker.Announcements.
	Where(vip netip.Addr) []string
	// Close stops the mode when the speaker stops, after it left the membership, and releases
	// its sockets. Each mode decides how it stops: layer 2 stops answering at once (the peers
	// have taken over); BGP closes its sessions, which withdraws the routes, or with graceful
	// restart deliberately leaves them at the routers while the speaker restarts (RFC 4724).
	Close() error
}

// AnnouncerFunc adapts a function to Announcer (it ignores config, Where returns nothing and
// Close does nothing); handy in tests.
type AnnouncerFunc func(ctx context.Context, desired []Announcement) error

// Announce calls f.
func (f AnnouncerFunc) Announce(ctx context.Context, _ any, desired []Announcement) error {
	return f(ctx, desired)
}

// Where returns nil.
func (f AnnouncerFunc) Where(netip.Addr) []string { return nil }

// Close does nothing.
func (f AnnouncerFunc) Close() error { return nil }
