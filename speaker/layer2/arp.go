package layer2

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// arpConn is the part of *arp.Client the responder uses.
type arpConn interface {
	Read() (*arp.Packet, *ethernet.Frame, error)
	WriteTo(p *arp.Packet, addr net.HardwareAddr) error
	Close() error
}

func dialARP(ifi *net.Interface) (arpConn, error) {
	c, err := arp.Dial(ifi)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// reopenDelay is how long a responder waits before reopening a socket that failed.
const reopenDelay = 200 * time.Millisecond

// arpResponder answers ARP requests on one interface for the addresses announce accepts.
type arpResponder struct {
	ifi      *net.Interface
	announce func(netip.Addr) bool
	dial     func(*net.Interface) (arpConn, error)
	log      logr.Logger
	m        *Metrics

	mu     sync.Mutex
	conn   arpConn // nil while (re)opening
	closed bool
	done   chan struct{}
}

func newARPResponder(ifi *net.Interface, announce func(netip.Addr) bool, dial func(*net.Interface) (arpConn, error), log logr.Logger, m *Metrics) *arpResponder {
	r := &arpResponder{ifi: ifi, announce: announce, dial: dial, log: log, m: m, done: make(chan struct{})}
	// Open once synchronously so that a gratuitous burst right after creation has a socket.
	first, err := dial(ifi)
	if err != nil {
		r.m.Errors.WithLabelValues("arp", "open").Inc()
		r.log.Info("open ARP socket failed; retrying", "interface", ifi.Name, "error", err.Error())
	}
	r.conn = first
	go r.run(first)
	return r
}

// run reads requests until close, reopening the socket after any error: mdlayher/arp returns
// "network is down" once the link goes down and never recovers on the same socket.
func (r *arpResponder) run(c arpConn) {
	defer close(r.done)
	for {
		if c == nil {
			var err error
			if c, err = r.dial(r.ifi); err != nil {
				r.m.Errors.WithLabelValues("arp", "open").Inc()
				r.log.V(1).Info("open ARP socket failed; retrying", "interface", r.ifi.Name, "error", err.Error())
				if r.sleep(reopenDelay) {
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
			r.conn = c
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
		r.m.Errors.WithLabelValues("arp", "read").Inc()
		r.log.Info("ARP socket failed; reopening", "interface", r.ifi.Name, "error", err.Error())
		if r.sleep(reopenDelay) {
			return
		}
	}
}

// sleep waits d and reports whether the responder was closed meanwhile.
func (r *arpResponder) sleep(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		sleepShort()
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return true
		}
	}
	return false
}

func (r *arpResponder) serve(c arpConn) error {
	for {
		p, _, err := c.Read()
		if err != nil {
			if socketFailed(err) {
				return err
			}
			continue
		}
		if p.Operation != arp.OperationRequest || bytes.Equal(p.SenderHardwareAddr, r.ifi.HardwareAddr) {
			continue
		}
		ip := p.TargetIP.Unmap()
		if !r.announce(ip) {
			continue
		}
		reply, err := arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, p.SenderHardwareAddr, p.SenderIP)
		if err != nil {
			continue
		}
		if err := c.WriteTo(reply, p.SenderHardwareAddr); err != nil {
			r.m.Errors.WithLabelValues("arp", "write").Inc()
			continue
		}
		r.m.Answered.WithLabelValues("arp", r.ifi.Name).Inc()
	}
}

// gratuitous broadcasts an ARP reply "ip is at <our MAC>" (sender = target = ip, RFC 5227 §3
// "ARP Announcement" style), which updates the neighbour caches of hosts that already know ip.
func (r *arpResponder) gratuitous(ip netip.Addr) error {
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	if c == nil {
		return errNotOpen
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	p, err := arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, bcast, ip)
	if err != nil {
		return err
	}
	if err := c.WriteTo(p, bcast); err != nil {
		r.m.Errors.WithLabelValues("arp", "write").Inc()
		return err
	}
	r.m.Gratuitous.WithLabelValues("arp").Inc()
	return nil
}

// close stops the responder and waits for its goroutine.
func (r *arpResponder) close() {
	r.mu.Lock()
	r.closed = true
	if r.conn != nil {
		_ = r.conn.Close() // unblocks Read
	}
	r.mu.Unlock()
	<-r.done
}

// sleepShort is the polling step of the reopen back-off.
func sleepShort() { time.Sleep(20 * time.Millisecond) }
