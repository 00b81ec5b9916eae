// Package layer2 announces addresses on the local network: it answers ARP requests (IPv4) and
// NDP neighbour solicitations (IPv6) for the addresses this node owns, and sends gratuitous ARP /
// unsolicited neighbour advertisements when it takes an address over.
//
// The responders (arp.go, ndp.go) never decide anything: each asks a func(netip.Addr) Outcome
// built from the table the Announcer (announcer.go) swaps atomically on every Announce call.
// Both share one socket life (socket.go: open, serve, reopen after a failure, close); each
// family gives only its open, its per-socket setup and its packet handling. Interface
// choice is the pure SelectInterfaces (iface.go). The Announcer is the speaker's ModeLayer2
// speaker.Announcer; a VIP's Params are a layer2.Params.
package layer2
