package layer2

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/metalgate/metalgate/speaker"
)

// Options configure an Announcer. The zero value works.
type Options struct {
	// NodeIPs are the node's own addresses (InternalIPs); an address off every local subnet is
	// announced on the interfaces holding them.
	NodeIPs []netip.Addr
	// Interfaces lists the host's interfaces. Defaults to SystemInterfaces.
	Interfaces func() ([]Interface, error)
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// Metrics defaults to unregistered metrics.
	Metrics *Metrics
	// GratuitousCount is how many gratuitous ARP / unsolicited NA are sent per address and
	// interface on takeover. Defaults to 3.
	GratuitousCount int
	// GratuitousInterval separates them. Defaults to 100ms (so 3 sends span 200ms).
	GratuitousInterval time.Duration
	// Gate, if set, is asked before every answer and gratuitous send; false suppresses it.
	// The speaker passes its live quorum check, so a speaker that was frozen (or whose sync is
	// late) does not answer from a stale table after losing quorum.
	Gate func() bool

	dialARP     func(*net.Interface) (net.PacketConn, error)      // tests
	listenNDP   func(*net.Interface) (ndpConn, netip.Addr, error) // tests
	lookupIface func(name string) (*net.Interface, error)
}

// Params are the speaker.VIP.Params of a ModeLayer2 address.
type Params struct {
	// Interfaces restricts the announcement to these interfaces (L2Advertisement
	// spec.interfaces); empty: automatic (SelectInterfaces).
	Interfaces []string
}

// table is what the responders consult: interface name → addresses answered there.
type table map[string]map[netip.Addr]bool

// Announcer implements speaker.Announcer at layer 2.
type Announcer struct {
	opts  Options
	log   logr.Logger
	m     *Metrics
	table atomic.Pointer[table]

	mu   sync.Mutex // serialises Announce and Close
	arp  map[string]*arpResponder
	ndp  map[string]*ndpResponder
	ifis map[string]net.Interface // "arp/eth0", "ndp/eth0": the interface each responder was opened on

	ctx    context.Context // cancelled by Close: ends bursts
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ speaker.Announcer = (*Announcer)(nil)

// New returns an Announcer that announces nothing yet.
func New(opts Options) *Announcer {
	if opts.Interfaces == nil {
		opts.Interfaces = SystemInterfaces
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.GratuitousCount == 0 {
		opts.GratuitousCount = 3
	}
	if opts.GratuitousInterval == 0 {
		opts.GratuitousInterval = 100 * time.Millisecond
	}
	if opts.dialARP == nil {
		opts.dialARP = dialARP
	}
	if opts.listenNDP == nil {
		opts.listenNDP = listenNDP
	}
	if opts.lookupIface == nil {
		opts.lookupIface = net.InterfaceByName
	}
	a := &Announcer{
		opts: opts, log: opts.Logger, m: opts.Metrics,
		arp: map[string]*arpResponder{}, ndp: map[string]*ndpResponder{}, ifis: map[string]net.Interface{},
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.table.Store(&table{})
	return a
}

// answers reports whether ip is announced on the interface named name now.
func (a *Announcer) answers(name string, ip netip.Addr) bool { return a.verdict(name, ip) == "" }

// verdict says whether a request for ip on the interface named name is answered now (""), or
// why not: DropNotOurs, or DropFenced while the gate is closed.
func (a *Announcer) verdict(name string, ip netip.Addr) Outcome {
	switch {
	case !(*a.table.Load())[name][ip]:
		return DropNotOurs
	case a.opts.Gate != nil && !a.opts.Gate():
		return DropFenced
	default:
		return ""
	}
}

// Where returns the interfaces vip is announced on, sorted.
func (a *Announcer) Where(vip netip.Addr) []string {
	var out []string
	for name, vips := range *a.table.Load() {
		if vips[vip] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Announce makes the responders answer for exactly desired, each address on the interfaces its
// Params name (or SelectInterfaces picks); layer 2 has no configuration besides (config is
// ignored). Addresses that are no longer desired are not answered once Announce returns; new
// (address, interface) pairs get a gratuitous burst.
func (a *Announcer) Announce(_ context.Context, _ any, desired []speaker.Announcement) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ifaces, listErr := a.opts.Interfaces()
	next, paramErr := desiredTable(desired, ifaces, a.opts.NodeIPs)
	prev := *a.table.Load()
	if listErr != nil {
		// Without the interface list we cannot add anything, but we must still stop.
		next = keptTable(prev, desired)
	}
	a.table.Store(&next) // from here on, dropped addresses are not answered
	errs := a.syncResponders(next)
	if fresh := freshPairs(prev, next); len(fresh) > 0 {
		a.wg.Add(1)
		go a.gratuitousBursts(fresh)
	}
	if listErr != nil {
		return fmt.Errorf("list interfaces: %w", listErr)
	}
	if errs != nil {
		return errs
	}
	return paramErr
}

// desiredTable is where each desired address is answered: on the interfaces its Params name,
// or that SelectInterfaces picks among ifaces. Params that are not a layer2.Params are a
// programming error, reported in paramErr; that address is announced with automatic
// interfaces rather than not at all.
func desiredTable(desired []speaker.Announcement, ifaces []Interface, nodeIPs []netip.Addr) (next table, paramErr error) {
	next = table{}
	for _, d := range desired {
		vip := d.VIP.Unmap()
		p, ok := d.Params.(Params)
		if !ok && d.Params != nil && paramErr == nil {
			paramErr = fmt.Errorf("parameters of %s are a %T, not a layer2.Params", d.VIP, d.Params)
		}
		for _, name := range SelectInterfaces(ifaces, vip, p.Interfaces, nodeIPs) {
			next.add(name, vip)
		}
	}
	return next, paramErr
}

// keptTable is prev without the addresses that are no longer desired: what may still be
// answered when the interfaces cannot be listed.
func keptTable(prev table, desired []speaker.Announcement) table {
	next := table{}
	want := map[netip.Addr]bool{}
	for _, d := range desired {
		want[d.VIP.Unmap()] = true
	}
	for name, vips := range prev {
		for vip := range vips {
			if want[vip] {
				next.add(name, vip)
			}
		}
	}
	return next
}

// add makes name answer for vip.
func (t table) add(name string, vip netip.Addr) {
	if t[name] == nil {
		t[name] = map[netip.Addr]bool{}
	}
	t[name][vip] = true
}

// ifacePair is one address on one interface.
type ifacePair struct {
	name string
	vip  netip.Addr
}

// freshPairs are the (interface, address) pairs of next that prev did not have: the ones
// that get a gratuitous burst.
func freshPairs(prev, next table) []ifacePair {
	var fresh []ifacePair
	for name, vips := range next {
		for vip := range vips {
			if !prev[name][vip] {
				fresh = append(fresh, ifacePair{name, vip})
			}
		}
	}
	return fresh
}

// gratuitousBursts sends GratuitousCount gratuitous ARPs or unsolicited NAs for each fresh
// pair, GratuitousInterval apart, skipping pairs no longer answered; it calls a.wg.Done.
func (a *Announcer) gratuitousBursts(fresh []ifacePair) {
	defer a.wg.Done()
	for i := range a.opts.GratuitousCount {
		if i > 0 {
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(a.opts.GratuitousInterval):
			}
		}
		for _, p := range fresh {
			if !a.answers(p.name, p.vip) {
				continue // lost it meanwhile: never advertise what we do not answer
			}
			a.sendGratuitous(p.name, p.vip)
		}
	}
}

func (a *Announcer) sendGratuitous(name string, vip netip.Addr) {
	a.mu.Lock()
	ar, nr := a.arp[name], a.ndp[name]
	a.mu.Unlock()
	var err error
	switch {
	case vip.Is4() && ar != nil:
		err = ar.gratuitous(vip)
	case vip.Is6() && nr != nil:
		err = nr.gratuitous(vip)
	}
	if err != nil {
		a.log.V(1).Info("gratuitous announcement failed", "interface", name, "vip", vip.String(), "error", err.Error())
	}
}

// syncResponders opens the responders next needs, closes the others and updates NDP groups.
// Called with a.mu held.
func (a *Announcer) syncResponders(next table) error {
	wantARP, wantNDP := map[string]bool{}, map[string][]netip.Addr{}
	for name, vips := range next {
		for vip := range vips {
			if vip.Is4() {
				wantARP[name] = true
			} else {
				wantNDP[name] = append(wantNDP[name], vip)
			}
		}
	}
	var firstErr error
	ifi := func(name string) (*net.Interface, bool) {
		cur, err := a.opts.lookupIface(name)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("interface %s: %w", name, err)
			}
			return nil, false
		}
		return cur, true
	}
	// Close responders not wanted, or whose interface was recreated (new index or MAC).
	for name, r := range a.arp {
		cur, ok := ifi(name)
		if !wantARP[name] || !ok || !sameIface(cur, a.ifis["arp/"+name]) {
			r.close()
			delete(a.arp, name)
		}
	}
	for name, r := range a.ndp {
		cur, ok := ifi(name)
		if wantNDP[name] == nil || !ok || !sameIface(cur, a.ifis["ndp/"+name]) {
			r.close()
			delete(a.ndp, name)
		}
	}
	for name := range wantARP {
		if a.arp[name] != nil {
			continue
		}
		cur, ok := ifi(name)
		if !ok {
			continue
		}
		a.ifis["arp/"+name] = *cur
		a.arp[name] = newARPResponder(cur, func(ip netip.Addr) Outcome { return a.verdict(name, ip) }, a.opts.dialARP, a.log, a.m)
	}
	for name, vips := range wantNDP {
		r := a.ndp[name]
		if r == nil {
			cur, ok := ifi(name)
			if !ok {
				continue
			}
			a.ifis["ndp/"+name] = *cur
			r = newNDPResponder(cur, func(ip netip.Addr) Outcome { return a.verdict(name, ip) }, a.opts.listenNDP, a.log, a.m)
			a.ndp[name] = r
		}
		r.setAddrs(vips)
	}
	return firstErr
}

func sameIface(a *net.Interface, b net.Interface) bool {
	return a.Index == b.Index && a.HardwareAddr.String() == b.HardwareAddr.String()
}

// Close stops every responder; nothing is answered afterwards.
func (a *Announcer) Close() error {
	a.table.Store(&table{})
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, r := range a.arp {
		r.close()
		delete(a.arp, name)
	}
	for name, r := range a.ndp {
		r.close()
		delete(a.ndp, name)
	}
	return nil
}
