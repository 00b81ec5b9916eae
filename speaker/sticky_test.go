package speaker_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/election"
	"github.com/metalgate/metalgate/speaker/membership"
)

// l2log is a layer-2 announcer that records what a speaker announces and every start.
type l2log struct {
	mu     sync.Mutex
	now    map[netip.Addr]bool
	starts map[netip.Addr]int
	last   time.Time // of the last Announce
}

func newL2Log() *l2log {
	return &l2log{now: map[netip.Addr]bool{}, starts: map[netip.Addr]int{}}
}

func (l *l2log) Announce(_ context.Context, _ any, d []speaker.Announcement) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := map[netip.Addr]bool{}
	for _, a := range d {
		next[a.VIP] = true
		if !l.now[a.VIP] {
			l.starts[a.VIP]++
		}
	}
	l.now, l.last = next, time.Now()
	return nil
}
func (l *l2log) Where(netip.Addr) []string { return nil }
func (l *l2log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = map[netip.Addr]bool{}
	return nil
}

// realNode is a speaker over a real memberlist on a loopback address.
type realNode struct {
	name   string
	addr   string
	port   int
	mem    *membership.Membership
	memM   *membership.Metrics
	log    *l2log
	cancel context.CancelFunc
	done   chan error
}

// stickyCluster runs speakers over real memberlists on 127.0.0.41.. (loopback).
type stickyCluster struct {
	t     *testing.T
	hold  time.Duration
	names []string
	vips  []netip.Addr
	nodes map[string]*realNode
	// holdDirs, if set, gives each node a hold directory that outlives its speaker
	// (speaker.Options.HoldDir), and leaveHold is the hold a stopping speaker leaves with
	// (speaker.Options.HoldOnStop; 0: a plain leave).
	holdDirs  map[string]string
	leaveHold atomic.Int64
}

func (c *stickyCluster) world() speaker.World {
	w := speaker.World{Speakers: c.names, SpeakerAddrs: map[string][]netip.Addr{}}
	for i, n := range c.names {
		w.Nodes = append(w.Nodes, election.Node{Name: n})
		w.SpeakerAddrs[n] = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("127.0.0.%d", 41+i))}
		if rn := c.nodes[n]; rn != nil && rn.mem != nil {
			w.Peers = append(w.Peers, rn.addr+":"+strconv.Itoa(rn.port))
		}
	}
	for _, v := range c.vips {
		w.VIPs = append(w.VIPs, speaker.VIP{Request: election.Request{VIP: v, AnyReady: true}, Mode: speaker.ModeLayer2, Service: "ns/" + v.String()})
	}
	return w
}

// start runs the speaker of node i (again, on the same address and port, if it ran before).
func (c *stickyCluster) start(i int) *realNode {
	c.t.Helper()
	name := c.names[i]
	rn := &realNode{name: name, addr: fmt.Sprintf("127.0.0.%d", 41+i), port: -1, log: newL2Log(), done: make(chan error, 1)}
	if old := c.nodes[name]; old != nil {
		rn.port = old.port
	}
	var sp atomic.Pointer[speaker.Speaker]
	rn.memM = membership.NewMetrics(prometheus.NewRegistry())
	// Fencing and failure detection are not under test here, and on a loaded machine under
	// -race the quorum pings every 50 ms queue up and miss their window: slower timers keep
	// quorum and liveness steady, so that every move the test sees is a decision's.
	mem, err := membership.New(membership.Options{Name: name, BindAddr: rn.addr, BindPort: rn.port, Metrics: rn.memM,
		PingInterval: 250 * time.Millisecond, FenceWindow: 2 * time.Second, Tune: func(mc *memberlist.Config) {
			mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult = 500*time.Millisecond, 400*time.Millisecond, 6
		},
		Keys: membership.Keys{Primary: []byte("metalgate test key, 32 bytes....")},
		OnChange: func() {
			if s := sp.Load(); s != nil {
				s.MembershipChanged()
			}
		}})
	if err != nil {
		c.t.Fatal(err)
	}
	rn.mem, rn.port = mem, mem.Port()
	opts := speaker.Options{Node: name, Membership: mem, Claims: mem, HoldDown: c.hold,
		Resync: 100 * time.Millisecond, JoinInterval: 200 * time.Millisecond, Logger: testr.New(c.t).WithName(name),
		Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: rn.log}}
	if c.holdDirs != nil {
		if c.holdDirs[name] == "" {
			c.holdDirs[name] = c.t.TempDir()
		}
		opts.HoldDir = c.holdDirs[name]
		opts.HoldOnStop = func(context.Context) time.Duration { return time.Duration(c.leaveHold.Load()) }
	}
	s, err := speaker.New(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	sp.Store(s)
	c.nodes[name] = rn
	ctx, cancel := context.WithCancel(context.Background())
	rn.cancel = cancel
	go func() { rn.done <- s.Run(ctx) }()
	s.SetWorld(c.world()) // the running nodes learn of it through its join

	c.t.Cleanup(func() { c.stop(name) })
	return rn
}

// stop makes node name leave (Run returns after Leave, as on SIGTERM).
func (c *stickyCluster) stop(name string) {
	rn := c.nodes[name]
	if rn == nil || rn.cancel == nil {
		return
	}
	rn.cancel()
	<-rn.done
	rn.cancel, rn.mem = nil, nil
}

func (c *stickyCluster) running() []string {
	var out []string
	for _, n := range c.names {
		if rn := c.nodes[n]; rn != nil && rn.mem != nil {
			out = append(out, n)
		}
	}
	return out
}

// owners returns who announces each address now, by address; an error unless exactly one
// running node announces each.
func (c *stickyCluster) owners() (map[netip.Addr]string, error) {
	out := map[netip.Addr]string{}
	for _, v := range c.vips {
		var who []string
		for _, n := range c.running() {
			l := c.nodes[n].log
			l.mu.Lock()
			if l.now[v] {
				who = append(who, n)
			}
			l.mu.Unlock()
		}
		if len(who) != 1 {
			return nil, fmt.Errorf("%s announced by %v, want one node", v, who)
		}
		out[v] = who[0]
	}
	return out, nil
}

// converged: every running node sees all the running ones live and has the claims of each.
func (c *stickyCluster) converged() error {
	run := c.running()
	for _, n := range run {
		live, cl := c.nodes[n].mem.Live(), c.nodes[n].mem.Claims()
		for _, o := range run {
			if !live[o] {
				return fmt.Errorf("%s does not see %s live", n, o)
			}
			if _, ok := cl[o]; o != n && !ok {
				return fmt.Errorf("%s has no claims of %s", n, o)
			}
		}
	}
	return nil
}

// settle waits until the cluster converged, then until every running node has decided again
// after three hold-downs (whatever a rebalance would do has been done by then), and returns the
// owners once each address has exactly one.
func (c *stickyCluster) settle(what string) map[netip.Addr]string {
	c.t.Helper()
	testenv.Eventually(c.t, 20*time.Second, what+": views converge", c.converged)
	after := time.Now().Add(3 * c.hold)
	var o map[netip.Addr]string
	testenv.Eventually(c.t, 20*time.Second, what+": every node decides after three hold-downs, one owner each", func() error {
		for _, n := range c.running() {
			l := c.nodes[n].log
			l.mu.Lock()
			last := l.last
			l.mu.Unlock()
			if !last.After(after) {
				return fmt.Errorf("%s last announced at %v", n, last)
			}
		}
		var err error
		o, err = c.owners()
		return err
	})
	return o
}

// movedFrom returns the starts since the last call (then forgets them) of nodes other than
// the owner in want: each is an address that moved. A start by the owner itself is not a move
// (a quorum blip on a loaded machine makes an owner stop and start again).
func (c *stickyCluster) movedFrom(want map[netip.Addr]string) []string {
	var out []string
	for _, n := range c.running() {
		l := c.nodes[n].log
		l.mu.Lock()
		for v := range l.starts {
			if want[v] != n {
				out = append(out, fmt.Sprintf("%s started %s (owner %s)", n, v, want[v]))
			}
		}
		l.starts = map[netip.Addr]int{}
		l.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// TestStickyOwnership runs real speakers over real memberlists on loopback: a fourth speaker
// joins and no layer-2 address moves (although it wins some by rendezvous); the owner of an
// address leaves, another node takes it over at once, and when the old owner returns the
// address stays where it is.
func TestStickyOwnership(t *testing.T) {
	c := &stickyCluster{t: t, hold: time.Second, names: []string{"n1", "n2", "n3", "n4"}, nodes: map[string]*realNode{}}
	n4wins := 0
	for v := netip.MustParseAddr("198.51.100.1"); len(c.vips) < 12; v = v.Next() {
		c.vips = append(c.vips, v)
		if election.Owner(v, c.names) == "n4" {
			n4wins++
		}
	}
	if n4wins == 0 {
		t.Fatal("n4 wins none of the addresses; pick others")
	}
	for i := range 3 {
		c.start(i)
	}
	first := c.settle("n1..n3")

	c.movedFrom(first)
	c.start(3)
	if got := c.settle("n4 joined"); !maps.Equal(first, got) {
		t.Fatalf("addresses moved when n4 joined: before %v, after %v", first, got)
	}
	if moved := c.movedFrom(first); len(moved) > 0 {
		t.Errorf("addresses moved when n4 joined: %v", moved)
	}

	// The owner of the first address leaves: one node takes it over (failover), and when the
	// old owner is back, nothing moves back.
	vip := c.vips[0]
	old := first[vip]
	c.stop(old)
	var taker string
	testenv.Eventually(t, 10*time.Second, "failover", func() error {
		o, err := c.owners()
		if err != nil {
			return err
		}
		taker = o[vip]
		return nil
	})
	afterFailover := c.settle(old + " left")
	if afterFailover[vip] != taker {
		t.Fatalf("%s moved again after the failover: %s, then %s", vip, taker, afterFailover[vip])
	}
	c.movedFrom(afterFailover)
	c.start(slices.Index(c.names, old))
	back := c.settle(old + " returned")
	if !maps.Equal(afterFailover, back) {
		t.Errorf("addresses moved when %s returned: before %v, after %v", old, afterFailover, back)
	}
	if moved := c.movedFrom(afterFailover); len(moved) > 0 {
		t.Errorf("addresses moved when %s returned: %v", old, moved)
	}
	for _, n := range c.running() {
		if r := testutil.ToFloat64(c.nodes[n].memM.Refused.WithLabelValues(string(membership.RefusedClaimsMalformed))); r != 0 {
			t.Errorf("%s refused %v claims as malformed", n, r)
		}
	}
}
