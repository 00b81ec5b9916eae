package netnslab

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"

	"github.com/metalgate/metalgate/internal/nsexec"
)

// Sighting is one ARP reply or neighbour advertisement seen by the client.
type Sighting struct {
	At  time.Time
	IP  netip.Addr
	MAC string
}

// Observer listens in the client namespace for ARP replies and neighbour advertisements about
// the VIPs and, like a client with traffic to send, asks for them every Probe interval.
type Observer struct {
	mu   sync.Mutex
	seen []Sighting
	arp  *arp.Client
	ndp  *ndp.Conn
	stop chan struct{}
	wg   sync.WaitGroup
}

// Observe starts an Observer on eth0 of namespace ns.
func Observe(ns string, vip4, vip6 netip.Addr, probe time.Duration) (*Observer, error) {
	o := &Observer{stop: make(chan struct{})}
	var ifi *net.Interface
	err := nsexec.InNS(ns, func() error {
		var err error
		if ifi, err = net.InterfaceByName("eth0"); err != nil {
			return err
		}
		if o.arp, err = arp.Dial(ifi); err != nil {
			return err
		}
		if o.ndp, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
			_ = o.arp.Close()
			return err
		}
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeNeighborAdvertisement)
		return o.ndp.SetICMPFilter(&f)
	})
	if err != nil {
		return nil, err
	}
	o.wg.Add(3)
	go func() {
		defer o.wg.Done()
		for {
			p, _, err := o.arp.Read()
			if err != nil {
				if isClosed(err) {
					return
				}
				continue
			}
			if p.Operation == arp.OperationReply && p.SenderIP == vip4 {
				o.add(Sighting{At: time.Now(), IP: vip4, MAC: p.SenderHardwareAddr.String()})
			}
		}
	}()
	go func() {
		defer o.wg.Done()
		for {
			m, _, _, err := o.ndp.ReadFrom()
			if err != nil {
				if isClosed(err) {
					return
				}
				continue
			}
			na, ok := m.(*ndp.NeighborAdvertisement)
			if !ok || na.TargetAddress != vip6 {
				continue
			}
			for _, opt := range na.Options {
				if lla, ok := opt.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
					o.add(Sighting{At: time.Now(), IP: vip6, MAC: lla.Addr.String()})
				}
			}
		}
	}()
	snm, _ := ndp.SolicitedNodeMulticast(vip6)
	ns6 := &ndp.NeighborSolicitation{TargetAddress: vip6, Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr}}}
	// The probe loop runs on a thread inside ns: Go resolves the IPv6 zone ("eth0") of the
	// destination in the calling thread's namespace at every write.
	go func() {
		defer o.wg.Done()
		_ = nsexec.InNS(ns, func() error {
			t := time.NewTicker(probe)
			defer t.Stop()
			for {
				select {
				case <-o.stop:
					return nil
				case <-t.C:
					_ = o.arp.Request(vip4)
					_ = o.ndp.WriteTo(ns6, nil, snm)
				}
			}
		})
	}()
	return o, nil
}

func (o *Observer) add(s Sighting) {
	o.mu.Lock()
	o.seen = append(o.seen, s)
	o.mu.Unlock()
}

// Since returns the sightings of ip at or after t.
func (o *Observer) Since(ip netip.Addr, t time.Time) []Sighting {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Sighting
	for _, s := range o.seen {
		if s.IP == ip && !s.At.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// WaitMAC waits until a sighting of ip after t carries a MAC accepted by ok and returns it.
func (o *Observer) WaitMAC(ip netip.Addr, t time.Time, limit time.Duration, ok func(mac string) bool) (Sighting, bool) {
	deadline := time.Now().Add(limit)
	for {
		for _, s := range o.Since(ip, t) {
			if ok(s.MAC) {
				return s, true
			}
		}
		if time.Now().After(deadline) {
			return Sighting{}, false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Close stops the observer.
func (o *Observer) Close() {
	close(o.stop)
	_ = o.arp.Close()
	_ = o.ndp.Close()
	o.wg.Wait()
}

// isClosed reports a socket error, as opposed to a packet the library could not parse.
func isClosed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, net.ErrClosed)
}
