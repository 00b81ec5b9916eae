package layer2

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/ipv6"

	"github.com/metalgate/metalgate/speaker"
)

var (
	otherMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}
	vip4     = netip.MustParseAddr("198.51.100.10")
	vip6     = netip.MustParseAddr("2001:db8::10")
)

// arpFrame builds an ARP frame; mutate may change the packet bytes (after marshalling) and the
// frame before it is marshalled.
func arpFrame(t testing.TB, op arp.Operation, target netip.Addr, mutate func(f *ethernet.Frame)) []byte {
	t.Helper()
	p, err := arp.NewPacket(op, clientMAC, clientIP, ethernet.Broadcast, target)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := p.MarshalBinary()
	f := &ethernet.Frame{Destination: ethernet.Broadcast, Source: clientMAC, EtherType: ethernet.EtherTypeARP, Payload: pb}
	if mutate != nil {
		mutate(f)
	}
	fb, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

// arpCases are frames and what the responder must do with them; vip4 is announced.
func arpCases(t testing.TB) []struct {
	name  string
	frame []byte
	want  Outcome
} {
	setSender := func(ip netip.Addr) func(*ethernet.Frame) {
		return func(f *ethernet.Frame) { copy(f.Payload[14:18], ip.AsSlice()) }
	}
	return []struct {
		name  string
		frame []byte
		want  Outcome
	}{
		{"request for an announced address", arpFrame(t, arp.OperationRequest, vip4, nil), Answered},
		{"unicast to us (cache revalidation)", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Destination = ourMAC }), Answered},
		{"ARP probe from 0.0.0.0 (RFC 5227)", arpFrame(t, arp.OperationRequest, vip4, setSender(netip.IPv4Unspecified())), Answered},
		{"request for another address", arpFrame(t, arp.OperationRequest, netip.MustParseAddr("198.51.100.11"), nil), DropNotOurs},
		{"a reply for our address", arpFrame(t, arp.OperationReply, vip4, nil), DropNotRequest},
		{"unicast to another host's MAC", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Destination = otherMAC }), DropEthernetDestination},
		{"ARP sender MAC is not the frame's source", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Source = otherMAC }), DropSenderMismatch},
		{"our own frame", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Source = ourMAC }), DropOwn},
		{"sender IP multicast", arpFrame(t, arp.OperationRequest, vip4, setSender(netip.MustParseAddr("224.0.0.1"))), DropSenderAddress},
		{"sender IP broadcast", arpFrame(t, arp.OperationRequest, vip4, setSender(netip.MustParseAddr("255.255.255.255"))), DropSenderAddress},
		{"hardware type not Ethernet", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Payload[1] = 6 }), DropNotEthernetIPv4},
		{"protocol type not IPv4", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Payload[2] = 0x86 }), DropNotEthernetIPv4},
		{"IP length 16", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.Payload[5] = 16 }), DropNotEthernetIPv4},
		{"truncated ARP payload", arpFrame(t, arp.OperationRequest, vip4, nil)[:14+7], DropMalformed},
		{"ARP payload cut inside the addresses", arpFrame(t, arp.OperationRequest, vip4, nil)[:14+20], DropMalformed},
		{"not ARP", arpFrame(t, arp.OperationRequest, vip4, func(f *ethernet.Frame) { f.EtherType = ethernet.EtherTypeIPv4 }), DropMalformed},
		{"runt frame", []byte{0xff, 0xff, 0xff}, DropMalformed},
		{"empty frame", nil, DropMalformed},
	}
}

// TestARPOutcomes feeds every case to the real responder, in a row, over an in-memory socket:
// it answers exactly the valid requests for an announced address, counts each drop with its
// reason, and a bad frame never stops it (each valid request after bad ones is answered).
func TestARPOutcomes(t *testing.T) {
	conn := newPipeConn()
	a := testAnnouncer(t, conn)
	if err := a.Announce(t.Context(), nil, []speaker.Announcement{{VIP: vip4}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		readARP(t, conn) // the gratuitous burst
	}
	want := map[Outcome]float64{}
	for _, tc := range arpCases(t) {
		conn.in <- tc.frame
		if tc.want == Answered {
			p, f := readARP(t, conn)
			if p.Operation != arp.OperationReply || p.SenderIP != vip4 || f.Destination.String() != clientMAC.String() {
				t.Errorf("%s: reply %+v to %s", tc.name, p, f.Destination)
			}
			continue
		}
		want[tc.want]++
		// Followed by a valid request: answered, and nothing for the bad frame before it.
		conn.in <- arpFrame(t, arp.OperationRequest, vip4, nil)
		if p, _ := readARP(t, conn); p.TargetIP != clientIP || p.SenderIP != vip4 {
			t.Errorf("%s: sent %+v, want only the answer to the next valid request", tc.name, p)
		}
	}
	conn.expectNothing(t, 50*time.Millisecond)
	for out, n := range want {
		if got := testutil.ToFloat64(a.m.Dropped.WithLabelValues("arp", string(out))); got != n {
			t.Errorf("dropped{arp,%s} = %v, want %v", out, got, n)
		}
	}
}

func TestParseARP(t *testing.T) {
	for _, tc := range arpCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			req, got := parseARP(tc.frame, ourMAC)
			if tc.want == Answered || tc.want == DropNotOurs {
				if got != "" {
					t.Fatalf("outcome %q, want a request", got)
				}
				if req.SenderMAC.String() != clientMAC.String() {
					t.Errorf("sender %s", req.SenderMAC)
				}
				return
			}
			if got != tc.want {
				t.Errorf("outcome %q, want %q", got, tc.want)
			}
		})
	}
}

// ns builds a neighbour solicitation for target with the given options (raw, already padded).
func ns(target netip.Addr, code byte, opts ...byte) []byte {
	b := make([]byte, nsLen, nsLen+len(opts))
	b[0], b[1] = byte(ipv6.ICMPTypeNeighborSolicitation), code
	copy(b[8:], target.AsSlice())
	return append(b, opts...)
}

// srcLL is a Source Link-Layer Address option with the client's MAC.
var srcLL = append([]byte{1, 1}, clientMAC...)

var (
	clientLL   = netip.MustParseAddr("fe80::99")
	solicited6 = netip.MustParseAddr("ff02::1:ff00:10")
)

type nsCase struct {
	name     string
	msg      []byte
	hops     int
	src, dst netip.Addr
	want     Outcome
}

// nsCases: RFC 4861 §7.1.1, one case per rule, and the valid forms; vip6 is announced.
func nsCases() []nsCase {
	return []nsCase{
		{"valid, with source link-layer address", ns(vip6, 0, srcLL...), 255, clientLL, solicited6, Answered},
		{"valid, unicast to the target (NUD)", ns(vip6, 0), 255, clientLL, vip6, Answered},
		{"DAD probe from :: to the solicited-node group", ns(vip6, 0), 255, netip.IPv6Unspecified(), solicited6, Answered},
		{"another address", ns(netip.MustParseAddr("2001:db8::11"), 0, srcLL...), 255, clientLL, solicited6, DropNotOurs},
		{"hop limit 254: crossed a router", ns(vip6, 0, srcLL...), 254, clientLL, solicited6, DropHopLimit},
		{"hop limit unknown", ns(vip6, 0, srcLL...), -1, clientLL, solicited6, DropHopLimit},
		{"ICMP code 1", ns(vip6, 1, srcLL...), 255, clientLL, solicited6, DropICMPCode},
		{"23 octets", ns(vip6, 0)[:23], 255, clientLL, solicited6, DropLength},
		{"target multicast", ns(netip.MustParseAddr("ff02::1"), 0, srcLL...), 255, clientLL, solicited6, DropTargetMulticast},
		{"option of length 0", ns(vip6, 0, 1, 0, 0, 0, 0, 0, 0, 0), 255, clientLL, solicited6, DropOptionLength},
		{"option running past the end", ns(vip6, 0, 1, 2, 0, 0, 0, 0, 0, 0), 255, clientLL, solicited6, DropOptionLength},
		{"a lone option byte", ns(vip6, 0, 1), 255, clientLL, solicited6, DropOptionLength},
		{"DAD probe to another group", ns(vip6, 0), 255, netip.IPv6Unspecified(), netip.IPv6LinkLocalAllNodes(), DropDADDestination},
		{"DAD probe with a source link-layer address", ns(vip6, 0, srcLL...), 255, netip.IPv6Unspecified(), solicited6, DropDADSourceLLAddr},
		{"a neighbour advertisement", append([]byte{byte(ipv6.ICMPTypeNeighborAdvertisement)}, ns(vip6, 0)[1:]...), 255, clientLL, solicited6, DropNotSolicitation},
		{"3 octets", []byte{135, 0, 0}, 255, clientLL, solicited6, DropMalformed},
	}
}

func TestParseNS(t *testing.T) {
	for _, tc := range nsCases() {
		t.Run(tc.name, func(t *testing.T) {
			m, got := parseNS(tc.msg, tc.hops, tc.src, tc.dst)
			if tc.want == Answered || tc.want == DropNotOurs {
				if got != "" || m == nil {
					t.Fatalf("outcome %q, want a solicitation", got)
				}
				return
			}
			if got != tc.want || m != nil {
				t.Errorf("outcome %q (%v), want %q", got, m, tc.want)
			}
		})
	}
}

// fakeNDP is an in-memory ndpConn: the test queues received messages, the responder's
// advertisements come out of sent.
type fakeNDP struct {
	in     chan rawNDP
	sent   chan netip.Addr // destination of each advertisement
	closed chan struct{}
}

type rawNDP struct {
	b        []byte
	hops     int
	src, dst netip.Addr
}

func (f *fakeNDP) ReadRaw(b []byte) (int, *ipv6.ControlMessage, netip.Addr, error) {
	select {
	case m := <-f.in:
		cm := &ipv6.ControlMessage{HopLimit: m.hops, Dst: m.dst.AsSlice()}
		if m.hops < 0 {
			cm = nil
		}
		return copy(b, m.b), cm, m.src, nil
	case <-f.closed:
		return 0, nil, netip.Addr{}, net.ErrClosed
	}
}
func (f *fakeNDP) WriteTo(m ndp.Message, _ *ipv6.ControlMessage, dst netip.Addr) error {
	if na, ok := m.(*ndp.NeighborAdvertisement); ok && na.TargetAddress == vip6 {
		f.sent <- dst
	}
	return nil
}
func (f *fakeNDP) JoinGroup(netip.Addr) error  { return nil }
func (f *fakeNDP) LeaveGroup(netip.Addr) error { return nil }
func (f *fakeNDP) Close() error {
	select {
	case <-f.closed:
	default:
		close(f.closed)
	}
	return nil
}

// TestNDPOutcomes feeds every case to the real responder in a row: it answers exactly the
// valid solicitations for an announced address (DAD probes to all-nodes), counts each drop
// with its reason, and keeps answering after every bad message.
func TestNDPOutcomes(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	fake := *lo
	fake.Name, fake.HardwareAddr = "eth0", ourMAC
	conn := &fakeNDP{in: make(chan rawNDP, 4), sent: make(chan netip.Addr, 64), closed: make(chan struct{})}
	a := New(Options{
		Interfaces: func() ([]Interface, error) {
			return []Interface{{Name: "eth0", Up: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8::5/64")}}}, nil
		},
		GratuitousInterval: time.Millisecond,
		lookupIface:        func(string) (*net.Interface, error) { return &fake, nil },
		listenNDP: func(*net.Interface) (ndpConn, netip.Addr, error) {
			return conn, netip.MustParseAddr("fe80::1"), nil
		},
	})
	t.Cleanup(func() { _ = a.Close() })
	if err := a.Announce(t.Context(), nil, []speaker.Announcement{{VIP: vip6}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if dst := <-conn.sent; dst != netip.IPv6LinkLocalAllNodes() {
			t.Fatalf("unsolicited NA to %s", dst)
		}
	}
	valid := rawNDP{ns(vip6, 0, srcLL...), 255, clientLL, solicited6}
	next := func(what string, want netip.Addr) {
		t.Helper()
		select {
		case dst := <-conn.sent:
			if dst != want {
				t.Errorf("%s: advertisement to %s, want %s", what, dst, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: no advertisement within 2s", what)
		}
	}
	want := map[Outcome]float64{}
	for _, tc := range append(nsCases(), nsCase{"from our own address", ns(vip6, 0, srcLL...), 255, netip.MustParseAddr("fe80::1"), solicited6, DropOwn}) {
		conn.in <- rawNDP{tc.msg, tc.hops, tc.src, tc.dst}
		if tc.want == Answered {
			to := tc.src
			if to.IsUnspecified() {
				to = netip.IPv6LinkLocalAllNodes()
			}
			next(tc.name, to)
			continue
		}
		want[tc.want]++
		conn.in <- valid
		next(tc.name+", then a valid solicitation", clientLL)
	}
	select {
	case dst := <-conn.sent:
		t.Errorf("unexpected advertisement to %s", dst)
	case <-time.After(50 * time.Millisecond):
	}
	for out, n := range want {
		if got := testutil.ToFloat64(a.m.Dropped.WithLabelValues("ndp", string(out))); got != n {
			t.Errorf("dropped{ndp,%s} = %v, want %v", out, got, n)
		}
	}
}

// FuzzParseARP: parseARP never panics, and what it accepts is an Ethernet/IPv4 request from
// someone else whose sender MAC is the frame's source.
func FuzzParseARP(f *testing.F) {
	for _, tc := range arpCases(f) {
		f.Add(tc.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, out := parseARP(frame, ourMAC)
		if out != "" {
			return
		}
		var fr ethernet.Frame
		if err := fr.UnmarshalBinary(frame); err != nil || fr.EtherType != ethernet.EtherTypeARP {
			t.Fatalf("accepted a frame that is not ARP: %x", frame)
		}
		if binary.BigEndian.Uint16(fr.Payload[6:8]) != uint16(arp.OperationRequest) || req.SenderMAC.String() != fr.Source.String() ||
			req.SenderMAC.String() == ourMAC.String() || !req.Target.Is4() {
			t.Fatalf("accepted %+v from %x", req, frame)
		}
	})
}

// FuzzParseNS: parseNS never panics, and what it accepts satisfies RFC 4861 §7.1.1.
func FuzzParseNS(f *testing.F) {
	for _, tc := range nsCases() {
		f.Add(tc.msg, tc.hops, tc.src.AsSlice(), tc.dst.AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte, hops int, src, dst []byte) {
		s, _ := netip.AddrFromSlice(src)
		d, _ := netip.AddrFromSlice(dst)
		m, out := parseNS(b, hops, s, d)
		if out != "" {
			return
		}
		if m == nil || hops != 255 || b[1] != 0 || len(b) < nsLen || m.TargetAddress.IsMulticast() ||
			(s.IsUnspecified() && !isSolicitedNode(d)) {
			t.Fatalf("accepted %x hops %d from %s to %s", b, hops, s, d)
		}
	})
}
