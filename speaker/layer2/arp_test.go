package layer2

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"

	"github.com/metalgate/metalgate/speaker"
)

// pipeConn is an in-memory net.PacketConn carrying Ethernet frames: the test writes frames to in
// and reads what the responder sends from out.
type pipeConn struct {
	in, out chan []byte
	closed  chan struct{}
}

func newPipeConn() *pipeConn {
	return &pipeConn{in: make(chan []byte, 16), out: make(chan []byte, 64), closed: make(chan struct{})}
}

func (p *pipeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case f := <-p.in:
		return copy(b, f), &packet.Addr{}, nil
	case <-p.closed:
		return 0, nil, net.ErrClosed
	}
}

func (p *pipeConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	p.out <- append([]byte(nil), b...)
	return len(b), nil
}

func (p *pipeConn) Close() error {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	return nil
}
func (p *pipeConn) LocalAddr() net.Addr              { return &packet.Addr{} }
func (p *pipeConn) SetDeadline(time.Time) error      { return nil }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }
func (p *pipeConn) SyscallConn() (any, error)        { return nil, nil }
func (p *pipeConn) expectNothing(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f := <-p.out:
		t.Fatalf("unexpected frame sent: %x", f)
	case <-time.After(d):
	}
}

var (
	ourMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	clientIP  = netip.MustParseAddr("198.51.100.99")
)

// testAnnouncer runs a real Announcer whose only interface is a fake "eth0" backed by conn (the
// ARP client needs an interface with an IPv4 address: loopback's index stands in for it).
func testAnnouncer(t *testing.T, conn *pipeConn) *Announcer {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	fake := *lo
	fake.Name, fake.HardwareAddr = "eth0", ourMAC
	a := New(Options{
		Interfaces: func() ([]Interface, error) {
			return []Interface{{Name: "eth0", Up: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.5/24")}}}, nil
		},
		GratuitousInterval: 10 * time.Millisecond,
		lookupIface:        func(string) (*net.Interface, error) { return &fake, nil },
		dialARP:            func(*net.Interface) (net.PacketConn, error) { return conn, nil },
	})
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func readARP(t *testing.T, conn *pipeConn) (*arp.Packet, *ethernet.Frame) {
	t.Helper()
	select {
	case b := <-conn.out:
		var f ethernet.Frame
		if err := f.UnmarshalBinary(b); err != nil {
			t.Fatalf("bad frame: %v", err)
		}
		var p arp.Packet
		if err := p.UnmarshalBinary(f.Payload); err != nil {
			t.Fatalf("bad ARP packet: %v", err)
		}
		return &p, &f
	case <-time.After(2 * time.Second):
		t.Fatal("no frame sent within 2s")
		return nil, nil
	}
}

func request(t *testing.T, target netip.Addr) []byte {
	t.Helper()
	p, err := arp.NewPacket(arp.OperationRequest, clientMAC, clientIP, ethernet.Broadcast, target)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := p.MarshalBinary()
	f := &ethernet.Frame{Destination: ethernet.Broadcast, Source: clientMAC, EtherType: ethernet.EtherTypeARP, Payload: pb}
	fb, _ := f.MarshalBinary()
	return fb
}

func TestARPAnswersOwnedAddressesOnly(t *testing.T) {
	conn := newPipeConn()
	a := testAnnouncer(t, conn)
	vip := netip.MustParseAddr("198.51.100.10")
	if err := a.Announce(t.Context(), nil, []speaker.Announcement{{VIP: vip}}); err != nil {
		t.Fatal(err)
	}
	// Takeover: a burst of GratuitousCount gratuitous replies, sender = target = vip, target
	// hardware address = sender's (else Linux clients ignore it within their ARP locktime),
	// broadcast.
	for range 3 {
		p, f := readARP(t, conn)
		if p.Operation != arp.OperationReply || p.SenderIP != vip || p.TargetIP != vip ||
			p.SenderHardwareAddr.String() != ourMAC.String() || p.TargetHardwareAddr.String() != ourMAC.String() ||
			f.Destination.String() != ethernet.Broadcast.String() {
			t.Fatalf("gratuitous ARP = %+v to %s", p, f.Destination)
		}
	}
	conn.expectNothing(t, 50*time.Millisecond)
	if got := a.Where(vip); len(got) != 1 || got[0] != "eth0" {
		t.Errorf("Where = %v, want [eth0]", got)
	}

	conn.in <- request(t, vip)
	p, f := readARP(t, conn)
	if p.Operation != arp.OperationReply || p.SenderIP != vip || p.SenderHardwareAddr.String() != ourMAC.String() ||
		p.TargetIP != clientIP || f.Destination.String() != clientMAC.String() {
		t.Fatalf("reply = %+v to %s", p, f.Destination)
	}

	conn.in <- request(t, netip.MustParseAddr("198.51.100.11"))
	conn.expectNothing(t, 100*time.Millisecond)

	// Fencing relies on this: once Announce returns without vip, vip is not answered.
	if err := a.Announce(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	conn.in <- request(t, vip)
	conn.expectNothing(t, 100*time.Millisecond)
}

func TestARPNoGratuitousForUnchangedSet(t *testing.T) {
	conn := newPipeConn()
	a := testAnnouncer(t, conn)
	d := []speaker.Announcement{{VIP: netip.MustParseAddr("198.51.100.10")}}
	if err := a.Announce(t.Context(), nil, d); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		readARP(t, conn)
	}
	if err := a.Announce(t.Context(), nil, d); err != nil {
		t.Fatal(err)
	}
	conn.expectNothing(t, 100*time.Millisecond)
}

func TestARPGateSuppressesAnswers(t *testing.T) {
	conn := newPipeConn()
	a := testAnnouncer(t, conn)
	var open atomic.Bool
	a.opts.Gate = open.Load // closed: e.g. quorum lost since the last Announce
	vip := netip.MustParseAddr("198.51.100.10")
	if err := a.Announce(t.Context(), nil, []speaker.Announcement{{VIP: vip}}); err != nil {
		t.Fatal(err)
	}
	conn.in <- request(t, vip)
	conn.expectNothing(t, 100*time.Millisecond) // neither gratuitous nor a reply
	open.Store(true)
	conn.in <- request(t, vip)
	if p, _ := readARP(t, conn); p.SenderIP != vip {
		t.Fatalf("got %+v", p)
	}
}
