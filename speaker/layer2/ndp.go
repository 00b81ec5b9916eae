package layer2

import (
	"net"
	"net/netip"
	"sync"
	"time"

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
	listen  func(*net.Interface) (ndpConn, netip.Addr, error)
	log     logr.Logger
	m       *Metrics

	mu     sync.Mutex
	conn   ndpConn
	self   netip.Addr          // the link-local address conn is bound to
	groups map[netip.Addr]bool // solicited-node groups wanted
	joined map[netip.Addr]bool // groups joined on conn
	closed bool
	done   chan struct{}
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
	r := &ndpResponder{ifi: ifi, verdict: verdict, listen: listen, log: log, m: m, groups: map[netip.Addr]bool{}, done: make(chan struct{})}
	// Open once synchronously so that a gratuitous burst right after creation has a socket.
	first, self, err := listen(ifi)
	if err != nil {
		r.m.Errors.WithLabelValues("ndp", "open").Inc()
		r.log.Info("open NDP socket failed; retrying", "interface", ifi.Name, "error", err.Error())
	}
	r.conn, r.self, r.joined = first, self, map[netip.Addr]bool{}
	go r.run(first)
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

func (r *ndpResponder) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *ndpResponder) run(c ndpConn) {
	defer close(r.done)
	sleep := func() bool {
		for range reopenDelay / (20 * time.Millisecond) {
			if r.isClosed() {
				return true
			}
			sleepShort()
		}
		return r.isClosed()
	}
	for {
		if c == nil {
			var (
				err  error
				self netip.Addr
			)
			if c, self, err = r.listen(r.ifi); err != nil {
				r.m.Errors.WithLabelValues("ndp", "open").Inc()
				r.log.V(1).Info("open NDP socket failed; retrying", "interface", r.ifi.Name, "error", err.Error())
				if sleep() {
					return
				}
				continue
			}
			r.mu.Lock()
			if r.closed {
				r.mu.Unlock()
				_ = c.Close()
				return
			}
			r.conn, r.self, r.joined = c, self, map[netip.Addr]bool{}
			r.syncGroupsLocked()
			r.mu.Unlock()
		}
		err := r.serve(c)
		r.mu.Lock()
		r.conn = nil
		closed := r.closed
		r.mu.Unlock()
		_ = c.Close()
		c = nil
		if closed {
			return
		}
		r.m.Errors.WithLabelValues("ndp", "read").Inc()
		r.log.Info("NDP socket failed; reopening", "interface", r.ifi.Name, "error", err.Error())
		if sleep() {
			return
		}
	}
}

// setAddrs sets the addresses whose solicited-node groups the responder joins.
func (r *ndpResponder) setAddrs(addrs []netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		if g, err := ndp.SolicitedNodeMulticast(a); err == nil {
			want[g] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = want
	r.syncGroupsLocked()
}

func (r *ndpResponder) syncGroupsLocked() {
	if r.conn == nil {
		return
	}
	for g := range r.joined {
		if !r.groups[g] {
			_ = r.conn.LeaveGroup(g)
			delete(r.joined, g)
		}
	}
	for g := range r.groups {
		if r.joined[g] {
			continue
		}
		if err := r.conn.JoinGroup(g); err != nil {
			r.m.Errors.WithLabelValues("ndp", "join").Inc()
			r.log.Info("join solicited-node group failed", "interface", r.ifi.Name, "group", g.String(), "error", err.Error())
			continue
		}
		r.joined[g] = true
	}
}

// serve answers solicitations until the socket fails. A packet never stops it: each one gets
// an outcome (handle) and is counted.
func (r *ndpResponder) serve(c ndpConn) error {
	buf := make([]byte, max(r.ifi.MTU, 1280))
	r.mu.Lock()
	self := r.self
	r.mu.Unlock()
	for {
		n, cm, from, err := c.ReadRaw(buf)
		if err != nil {
			if socketFailed(err) {
				return err
			}
			r.m.Dropped.WithLabelValues("ndp", string(DropMalformed)).Inc()
			continue
		}
		if out := r.handle(c, buf[:n], cm, from, self); out != Answered {
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
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	if c == nil {
		return errNotOpen
	}
	if err := r.send(c, ip, netip.IPv6LinkLocalAllNodes(), false); err != nil {
		r.m.Errors.WithLabelValues("ndp", "write").Inc()
		return err
	}
	r.m.Gratuitous.WithLabelValues("ndp").Inc()
	return nil
}

func (r *ndpResponder) close() {
	r.mu.Lock()
	r.closed = true
	if r.conn != nil {
		_ = r.conn.Close()
	}
	r.mu.Unlock()
	<-r.done
}
