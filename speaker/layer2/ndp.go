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
	ifi      *net.Interface
	announce func(netip.Addr) bool
	log      logr.Logger
	m        *Metrics

	mu     sync.Mutex
	conn   *ndp.Conn
	groups map[netip.Addr]bool // solicited-node groups wanted
	joined map[netip.Addr]bool // groups joined on conn
	closed bool
	done   chan struct{}
}

func newNDPResponder(ifi *net.Interface, announce func(netip.Addr) bool, log logr.Logger, m *Metrics) *ndpResponder {
	r := &ndpResponder{ifi: ifi, announce: announce, log: log, m: m, groups: map[netip.Addr]bool{}, done: make(chan struct{})}
	// Open once synchronously so that a gratuitous burst right after creation has a socket.
	first, err := listenNDP(ifi)
	if err != nil {
		r.m.Errors.WithLabelValues("ndp", "open").Inc()
		r.log.Info("open NDP socket failed; retrying", "interface", ifi.Name, "error", err.Error())
	}
	r.conn, r.joined = first, map[netip.Addr]bool{}
	go r.run(first)
	return r
}

// listenNDP opens an ICMPv6 socket bound to the link-local address of ifi that only receives
// neighbour solicitations. The bind fails with "cannot assign requested address" while that
// address is tentative (DAD), hence the retries in run.
func listenNDP(ifi *net.Interface) (*ndp.Conn, error) {
	c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	if err := c.SetICMPFilter(&f); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (r *ndpResponder) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *ndpResponder) run(c *ndp.Conn) {
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
			var err error
			if c, err = listenNDP(r.ifi); err != nil {
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
			r.conn, r.joined = c, map[netip.Addr]bool{}
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

func (r *ndpResponder) serve(c *ndp.Conn) error {
	for {
		msg, _, from, err := c.ReadFrom()
		if err != nil {
			if socketFailed(err) {
				return err
			}
			continue
		}
		ns, ok := msg.(*ndp.NeighborSolicitation)
		if !ok || !r.announce(ns.TargetAddress) {
			continue
		}
		dst, solicited := from, true
		if !from.IsValid() || from.IsUnspecified() {
			// A DAD probe (RFC 4862 §5.4.3) comes from ::; the answer goes to all-nodes.
			dst, solicited = netip.IPv6LinkLocalAllNodes(), false
		}
		if err := r.send(c, ns.TargetAddress, dst, solicited); err != nil {
			r.m.Errors.WithLabelValues("ndp", "write").Inc()
			continue
		}
		r.m.Answered.WithLabelValues("ndp", r.ifi.Name).Inc()
	}
}

// send writes a neighbour advertisement for target with the Override flag. It uses target as
// the IPv6 source, which strict clients such as ndisc6 require (the kernel needs the address to
// be local or net.ipv6.ip_nonlocal_bind=1 for that); if the kernel refuses, it falls back to the
// link-local source, which the Linux neighbour code accepts.
func (r *ndpResponder) send(c *ndp.Conn, target, dst netip.Addr, solicited bool) error {
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
