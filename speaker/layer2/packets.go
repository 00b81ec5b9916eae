package layer2

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// Outcome is what a responder did with one received packet: Answered, or why it dropped it
// (the reason label of metalgate_speaker_l2_requests_dropped_total). Every packet has one, so
// that tests can say why a frame was ignored (as MetalLB's responders return a dropReason).
type Outcome string

// Outcomes.
const (
	Answered Outcome = "answered"

	// Both protocols.
	DropMalformed Outcome = "malformed" // does not parse
	DropOwn       Outcome = "own"       // sent by this interface
	DropNotOurs   Outcome = "not-ours"  // the target is not announced on this interface
	DropFenced    Outcome = "fenced"    // announced, but the speaker lost quorum since (Options.Gate)

	// ARP.
	DropNotEthernetIPv4     Outcome = "not-ethernet-ipv4"    // hardware type/length or protocol type/length is not Ethernet/IPv4
	DropNotRequest          Outcome = "not-request"          // a reply (or another operation): nothing to answer
	DropEthernetDestination Outcome = "ethernet-destination" // unicast to another host's MAC
	DropSenderMismatch      Outcome = "sender-mismatch"      // ARP sender MAC ≠ Ethernet source: the answer would go elsewhere
	DropSenderAddress       Outcome = "sender-address"       // sender IP multicast, broadcast or loopback

	// NDP: the validity checks of RFC 4861 §7.1.1 for a neighbour solicitation.
	DropHopLimit        Outcome = "hop-limit"         // IP hop limit not 255: the message crossed a router
	DropICMPCode        Outcome = "icmp-code"         // ICMP code not 0
	DropLength          Outcome = "length"            // ICMP length under 24 octets
	DropTargetMulticast Outcome = "target-multicast"  // target address is multicast
	DropOptionLength    Outcome = "option-length"     // an option of length 0, or running past the end
	DropDADDestination  Outcome = "dad-destination"   // source :: but destination not a solicited-node group
	DropDADSourceLLAddr Outcome = "dad-source-lladdr" // source :: with a source link-layer address option
	DropNotSolicitation Outcome = "not-solicitation"  // another ICMPv6 type (the socket filter lets only NS through)
)

// arpRequest is an ARP request worth answering, if its target is ours.
type arpRequest struct {
	SenderMAC net.HardwareAddr
	SenderIP  netip.Addr
	Target    netip.Addr
}

var (
	arpHardwareEthernet uint16 = 1
	arpProtocolIPv4     uint16 = uint16(ethernet.EtherTypeIPv4)
)

// parseARP checks one Ethernet frame received on the interface with MAC ours. It returns the
// request, or why the frame is not one to answer: only an Ethernet/IPv4 ARP request, sent to
// broadcast or to us, by someone else, whose ARP sender MAC is the frame's source (the answer
// goes there) and whose sender IP is unspecified (an RFC 5227 probe) or a unicast address.
func parseARP(frame []byte, ours net.HardwareAddr) (arpRequest, Outcome) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return arpRequest{}, DropMalformed
	}
	if bytes.Equal(f.Source, ours) {
		return arpRequest{}, DropOwn
	}
	b := f.Payload
	if len(b) < 8 {
		return arpRequest{}, DropMalformed
	}
	if binary.BigEndian.Uint16(b[0:2]) != arpHardwareEthernet || binary.BigEndian.Uint16(b[2:4]) != arpProtocolIPv4 ||
		b[4] != 6 || b[5] != 4 {
		return arpRequest{}, DropNotEthernetIPv4
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(b); err != nil {
		return arpRequest{}, DropMalformed
	}
	switch {
	case p.Operation != arp.OperationRequest:
		return arpRequest{}, DropNotRequest
	case bytes.Equal(p.SenderHardwareAddr, ours):
		return arpRequest{}, DropOwn
	case !bytes.Equal(f.Destination, ethernet.Broadcast) && !bytes.Equal(f.Destination, ours):
		return arpRequest{}, DropEthernetDestination
	case !bytes.Equal(p.SenderHardwareAddr, f.Source):
		return arpRequest{}, DropSenderMismatch
	case !p.SenderIP.IsUnspecified() && (p.SenderIP.IsMulticast() || p.SenderIP.IsLoopback() || p.SenderIP == netip.AddrFrom4([4]byte{255, 255, 255, 255})):
		return arpRequest{}, DropSenderAddress
	}
	return arpRequest{SenderMAC: p.SenderHardwareAddr, SenderIP: p.SenderIP, Target: p.TargetIP.Unmap()}, ""
}

// nsLen is the fixed part of a neighbour solicitation: ICMPv6 header (4) + reserved (4) +
// target (16).
const nsLen = 24

// parseNS checks one ICMPv6 message received with IP hop limit hops (-1: unknown), from src to
// dst, as RFC 4861 §7.1.1 requires of a neighbour solicitation (the kernel has verified the
// ICMPv6 checksum of a raw ICMPv6 socket; no IP Authentication Header is used). It returns the
// solicitation, or why it is dropped.
func parseNS(b []byte, hops int, src, dst netip.Addr) (*ndp.NeighborSolicitation, Outcome) {
	switch {
	case len(b) < 4:
		return nil, DropMalformed
	case ipv6.ICMPType(b[0]) != ipv6.ICMPTypeNeighborSolicitation:
		return nil, DropNotSolicitation
	case hops != ndp.HopLimit:
		return nil, DropHopLimit
	case b[1] != 0:
		return nil, DropICMPCode
	case len(b) < nsLen:
		return nil, DropLength
	}
	target := netip.AddrFrom16([16]byte(b[8:nsLen]))
	if target.IsMulticast() {
		return nil, DropTargetMulticast
	}
	srcLL := false
	for opts := b[nsLen:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return nil, DropOptionLength
		}
		if opts[0] == 1 { // Source Link-Layer Address
			srcLL = true
		}
		opts = opts[int(opts[1])*8:]
	}
	if src.WithZone("").IsUnspecified() {
		if !isSolicitedNode(dst) {
			return nil, DropDADDestination
		}
		if srcLL {
			return nil, DropDADSourceLLAddr
		}
	}
	m, err := ndp.ParseMessage(b)
	if err != nil {
		return nil, DropMalformed
	}
	ns, ok := m.(*ndp.NeighborSolicitation)
	if !ok {
		return nil, DropNotSolicitation
	}
	return ns, ""
}

// solicitedNodePrefix is ff02::1:ff00:0/104 (RFC 4291 §2.7.1).
var solicitedNodePrefix = netip.MustParsePrefix("ff02::1:ff00:0/104")

func isSolicitedNode(a netip.Addr) bool { return solicitedNodePrefix.Contains(a.WithZone("")) }
