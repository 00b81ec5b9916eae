package layer2

import (
	"net"
	"net/netip"

	"github.com/go-logr/logr"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// ndpResponder answers neighbour solicitations on one interface for the addresses announce
// accepts. It joins the solicited-node multicast group of every address it may answer for
// (RFC 4861 §7.2.2: solicitations go to that group, and the kernel drops multicast for groups
// nobody joined).
type ndpResponder struct {
	ifi     *net.Interface
	verdict func(netip.Addr) Outcome // "" to answer, else why not
	log     logr.Logger
	m       *Metrics
	sock    responderSocket[*ndpSocket]

	groups map[netip.Addr]bool // solicited-node groups wanted; guarded by sock.mu
}

// ndpSocket is one open NDP socket and what belongs to it.
type ndpSocket struct {
	ndpConn
	self   netip.Addr          // the link-local address it is bound to
	joined map[netip.Addr]bool // the groups joined on it; guarded by the responder's sock.mu
}

// ndpConn is the part of *ndp.Conn the responder uses: raw reads with their control
// messages (hop limit, destination), so that parseNS can check what RFC 4861 asks.
type ndpConn interface {
	ReadRaw(b []byte) (int, *ipv6.ControlMessage, netip.Addr, error)
	WriteTo(m ndp.Message, cm *ipv6.ControlMessage, dst netip.Addr) error
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
	Close() error
}

func newNDPResponder(ifi *net.Interface, verdict func(netip.Addr) Outcome, listen func(*net.Interface) (ndpConn, netip.Addr, error), log logr.Logger, m *Metrics) *ndpResponder {
	r := &ndpResponder{ifi: ifi, verdict: verdict, log: log, m: m, groups: map[netip.Addr]bool{}}
	r.sock = responderSocket[*ndpSocket]{family: "ndp", ifi: ifi, log: log, m: m,
		open: func() (*ndpSocket, error) {
			c, self, err := listen(ifi)
			if err != nil {
				return nil, err
			}
			return &ndpSocket{ndpConn: c, self: self, joined: map[netip.Addr]bool{}}, nil
		},
		opened: func(*ndpSocket) { r.syncGroupsLocked() },
		serve:  r.serve}
	r.sock.start()
	return r
}

// listenNDP opens an ICMPv6 socket bound to the link-local address of ifi that only receives
// neighbour solicitations, with their hop limit and destination. The bind fails with "cannot
// assign requested address" while that address is tentative (DAD), hence the retries in run.
func listenNDP(ifi *net.Interface) (ndpConn, netip.Addr, error) {
	c, self, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	if err := c.SetICMPFilter(&f); err != nil {
		_ = c.Close()
		return nil, netip.Addr{}, err
	}
	if err := c.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true); err != nil {
		_ = c.Close()
		return nil, netip.Addr{}, err
	}
	return c, self, nil
}

// setAddrs sets the addresses whose solicited-node groups the responder joins.
func (r *ndpResponder) setAddrs(addrs []netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		if g, err := ndp.SolicitedNodeMulticast(a); err == nil {
			want[g] = true
		}
	}
	r.sock.mu.Lock()
	defer r.sock.mu.Unlock()
	r.groups = want
	r.syncGroupsLocked()
}

// syncGroupsLocked joins and leaves groups on the open socket, if any, to match r.groups.
// Called with sock.mu held.
func (r *ndpResponder) syncGroupsLocked() {
	if !r.sock.live {
		return
	}
	c := r.sock.conn
	for g := range c.joined {
		if !r.groups[g] {
			_ = c.LeaveGroup(g)
			delete(c.joined, g)
		}
	}
	for g := range r.groups {
		if c.joined[g] {
			continue
		}
		if err := c.JoinGroup(g); err != nil {
			r.m.Errors.WithLabelValues("ndp", "join").Inc()
			r.log.Info("join solicited-node group failed", "interface", r.ifi.Name, "group", g.String(), "error", err.Error())
			continue
		}
		c.joined[g] = true
	}
}

// serve answers solicitations until the socket fails. A packet never stops it: each one gets
// an outcome (handle) and is counted.
func (r *ndpResponder) serve(c *ndpSocket) error {
	buf := make([]byte, max(r.ifi.MTU, 1280))
	for {
		n, cm, from, err := c.ReadRaw(buf)
		if err != nil {
			if socketFailed(err) {
				return err
			}
			r.m.Dropped.WithLabelValues("ndp", string(DropMalformed)).Inc()
			continue
		}
		if out := r.handle(c, buf[:n], cm, from, c.self); out != Answered {
			r.m.Dropped.WithLabelValues("ndp", string(out)).Inc()
		}
	}
}

// handle answers one ICMPv6 message if it is a valid solicitation for an address announced
// here, and says what it did.
func (r *ndpResponder) handle(c ndpConn, b []byte, cm *ipv6.ControlMessage, from, self netip.Addr) Outcome {
	if self.IsValid() && from.WithZone("") == self.WithZone("") {
		return DropOwn
	}
	hops, dst := -1, netip.Addr{}
	if cm != nil {
		hops = cm.HopLimit
		dst, _ = netip.AddrFromSlice(cm.Dst)
	}
	ns, out := parseNS(b, hops, from, dst)
	if out != "" {
		return out
	}
	if out := r.verdict(ns.TargetAddress); out != "" {
		return out
	}
	to, solicited := from, true
	if from.WithZone("").IsUnspecified() {
		// A DAD probe (RFC 4862 §5.4.3) comes from ::; the answer goes to all-nodes.
		to, solicited = netip.IPv6LinkLocalAllNodes(), false
	}
	if err := r.send(c, ns.TargetAddress, to, solicited); err != nil {
		r.m.Errors.WithLabelValues("ndp", "write").Inc()
		return Answered // counted as a write error; the solicitation itself was fine
	}
	r.m.Answered.WithLabelValues("ndp", r.ifi.Name).Inc()
	return Answered
}

// send writes a neighbour advertisement for target with the Override flag. It uses target as
// the IPv6 source, which strict clients such as ndisc6 require (the kernel needs the address to
// be local or net.ipv6.ip_nonlocal_bind=1 for that); if the kernel refuses, it falls back to the
// link-local source, which the Linux neighbour code accepts.
func (r *ndpResponder) send(c ndpConn, target, dst netip.Addr, solicited bool) error {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: r.ifi.HardwareAddr}},
	}
	cm := &ipv6.ControlMessage{HopLimit: ndp.HopLimit, Src: target.AsSlice(), IfIndex: r.ifi.Index}
	if err := c.WriteTo(na, cm, dst); err == nil {
		return nil
	}
	return c.WriteTo(na, nil, dst)
}

// gratuitous sends an unsolicited neighbour advertisement for ip to all-nodes (RFC 4861 §7.2.6).
func (r *ndpResponder) gratuitous(ip netip.Addr) error {
	c, ok := r.sock.current()
	if !ok {
		return errNotOpen
	}
	if err := r.send(c, ip, netip.IPv6LinkLocalAllNodes(), false); err != nil {
		r.m.Errors.WithLabelValues("ndp", "write").Inc()
		return err
	}
	r.m.Gratuitous.WithLabelValues("ndp").Inc()
	return nil
}

// close stops the responder and waits for its goroutine.
func (r *ndpResponder) close() { r.sock.close() }
