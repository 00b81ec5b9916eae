package membership

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// filterTransport is memberlist's UDP/TCP transport with one gate in front: packets and
// streams whose source address is not the address of a node running a speaker (admission)
// are dropped before memberlist decrypts or reads them. A pod elsewhere in the cluster — even
// one holding the key — then cannot gossip anything (suspect, dead, alive) into the speaker
// cluster. It also dials from the bind address, so that peers see this speaker's node address
// as the source of its streams on multi-homed nodes too.
type filterTransport struct {
	*memberlist.NetTransport
	bind    net.IP
	allow   func(netip.Addr) bool
	refuse  func(Refusal, string, netip.Addr)
	packets chan *memberlist.Packet
	streams chan net.Conn
	closing chan struct{} // forwarders stop delivering, keep draining
	done    chan struct{} // the inner listeners are gone: forwarders end
	wg      sync.WaitGroup
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = &filterTransport{}

func newFilterTransport(inner *memberlist.NetTransport, bind net.IP, allow func(netip.Addr) bool, refuse func(Refusal, string, netip.Addr)) *filterTransport {
	t := &filterTransport{
		NetTransport: inner, bind: bind, allow: allow, refuse: refuse,
		packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		closing: make(chan struct{}), done: make(chan struct{}),
	}
	t.wg.Add(2)
	go t.forwardPackets()
	go t.forwardStreams()
	return t
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (t *filterTransport) forwardPackets() {
	defer t.wg.Done()
	in := t.NetTransport.PacketCh()
	for {
		select {
		case p := <-in:
			if src := addrOf(p.From); !t.allow(src) {
				t.refuse(RefusedSourceAddress, "", src)
				continue
			}
			select {
			case t.packets <- p:
			case <-t.closing:
			}
		case <-t.done:
			return
		}
	}
}

func (t *filterTransport) forwardStreams() {
	defer t.wg.Done()
	in := t.NetTransport.StreamCh()
	for {
		select {
		case c := <-in:
			if src := addrOf(c.RemoteAddr()); !t.allow(src) {
				t.refuse(RefusedSourceAddress, "", src)
				_ = c.Close()
				continue
			}
			select {
			case t.streams <- c:
			case <-t.closing:
				_ = c.Close()
			}
		case <-t.done:
			return
		}
	}
}

// PacketCh implements memberlist.Transport: the admitted packets.
func (t *filterTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// StreamCh implements memberlist.Transport: the admitted streams.
func (t *filterTransport) StreamCh() <-chan net.Conn { return t.streams }

// DialTimeout implements memberlist.Transport, from the bind address.
func (t *filterTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: t.bind}}
	return d.Dial("tcp", addr)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport, from the bind address.
func (t *filterTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// IngestPacket and IngestStream would hand memberlist traffic past the gate; nothing calls
// them, but the embedded transport's would, so they are refused explicitly.
func (t *filterTransport) IngestPacket(net.Conn, net.Addr, time.Time, bool) error {
	return errIngest
}

// IngestStream: see IngestPacket.
func (t *filterTransport) IngestStream(net.Conn) error { return errIngest }

// Shutdown stops the listeners, then the forwarders. The inner listeners block on their
// unbuffered channels, so the forwarders keep draining until the listeners are gone.
func (t *filterTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		close(t.closing)
		err = t.NetTransport.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return err
}
