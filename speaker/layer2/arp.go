package layer2

import (
	"net"
	"net/netip"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// arpConn reads raw Ethernet frames (parsed and checked by parseARP, so that every frame has
// an outcome) and writes ARP packets.
type arpConn struct {
	pc net.PacketConn
	c  *arp.Client
}

func (c *arpConn) Close() error { return c.pc.Close() }

// dialARP opens a raw packet socket for EtherType ARP on ifi.
func dialARP(ifi *net.Interface) (net.PacketConn, error) {
	c, err := packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeARP), nil)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// openARP dials and wraps the socket; the ARP client needs an IPv4 address on ifi.
func openARP(ifi *net.Interface, dial func(*net.Interface) (net.PacketConn, error)) (*arpConn, error) {
	pc, err := dial(ifi)
	if err != nil {
		return nil, err
	}
	c, err := arp.New(ifi, pc)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	return &arpConn{pc: pc, c: c}, nil
}

// arpResponder answers ARP requests on one interface for the addresses announce accepts.
type arpResponder struct {
	ifi     *net.Interface
	verdict func(netip.Addr) Outcome // "" to answer, else why not
	m       *Metrics
	sock    responderSocket[*arpConn]
}

func newARPResponder(ifi *net.Interface, verdict func(netip.Addr) Outcome, dial func(*net.Interface) (net.PacketConn, error), log logr.Logger, m *Metrics) *arpResponder {
	r := &arpResponder{ifi: ifi, verdict: verdict, m: m}
	r.sock = responderSocket[*arpConn]{family: "arp", ifi: ifi, log: log, m: m,
		open:  func() (*arpConn, error) { return openARP(ifi, dial) },
		serve: r.serve}
	r.sock.start()
	return r
}

// serve answers requests until the socket fails. A frame never stops it: each one gets an
// outcome (handle) and is counted.
func (r *arpResponder) serve(c *arpConn) error {
	buf := make([]byte, 1500)
	for {
		n, _, err := c.pc.ReadFrom(buf)
		if err != nil {
			return err // a raw socket returns no parse errors: reopen
		}
		if out := r.handle(c, buf[:n]); out != Answered {
			r.m.Dropped.WithLabelValues("arp", string(out)).Inc()
		}
	}
}

// handle answers one frame if it is a request for an address announced here, and says what
// it did.
func (r *arpResponder) handle(c *arpConn, frame []byte) Outcome {
	req, out := parseARP(frame, r.ifi.HardwareAddr)
	if out != "" {
		return out
	}
	if out := r.verdict(req.Target); out != "" {
		return out
	}
	reply, err := arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, req.Target, req.SenderMAC, req.SenderIP)
	if err != nil {
		return DropMalformed
	}
	if err := c.c.WriteTo(reply, req.SenderMAC); err != nil {
		r.m.Errors.WithLabelValues("arp", "write").Inc()
		return Answered // counted as a write error; the request itself was fine
	}
	r.m.Answered.WithLabelValues("arp", r.ifi.Name).Inc()
	return Answered
}

// gratuitous broadcasts an ARP reply "ip is at <our MAC>" (sender = target = ip, RFC 5227 §3
// "ARP Announcement" style), which updates the neighbour caches of hosts that already know ip.
// The target hardware address is ours too (RFC 5944 §4.6, as arping -A sends it): only then does
// Linux take the reply as gratuitous (arp_is_garp) and let it override an entry that changed
// within the last locktime (1s); a reply with any other target hardware address is ignored by a
// client that resolved ip less than a second before the takeover.
func (r *arpResponder) gratuitous(ip netip.Addr) error {
	c, ok := r.sock.current()
	if !ok {
		return errNotOpen
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	p, err := arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, r.ifi.HardwareAddr, ip)
	if err != nil {
		return err
	}
	if err := c.c.WriteTo(p, bcast); err != nil {
		r.m.Errors.WithLabelValues("arp", "write").Inc()
		return err
	}
	r.m.Gratuitous.WithLabelValues("arp").Inc()
	return nil
}

// close stops the responder and waits for its goroutine.
func (r *arpResponder) close() { r.sock.close() }
