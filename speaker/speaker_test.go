package speaker_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/election"
)

// fakeMembership is a shared view: live is what every speaker sees unless cut.
type fakeMembership struct {
	mu   *sync.Mutex
	live map[string]bool // shared
	self string
	cut  bool // this node sees only itself
}

func (f *fakeMembership) Live() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return map[string]bool{f.self: true}
	}
	out := map[string]bool{}
	for k, v := range f.live {
		if v {
			out[k] = true
		}
	}
	return out
}
func (f *fakeMembership) Reachable() map[string]bool    { return f.Live() }
func (f *fakeMembership) Join([]string) (int, error)    { return 0, nil }
func (f *fakeMembership) Leave(time.Duration) error     { return nil }
func (f *fakeMembership) Admit(map[string][]netip.Addr) {}

// clock is a manual clock shared by the test cluster.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var testClock = &clock{t: time.Unix(1_700_000_000, 0)}

type node struct {
	sp        *speaker.Speaker
	m         *speaker.Metrics
	mem       *fakeMembership
	announced []netip.Addr
	takeovers []speaker.Takeover
}

func world(vips ...string) speaker.World {
	w := speaker.World{Speakers: []string{"n1", "n2", "n3"}}
	for _, n := range w.Speakers {
		w.Nodes = append(w.Nodes, election.Node{Name: n})
	}
	for _, v := range vips {
		w.VIPs = append(w.VIPs, speaker.VIP{Request: election.Request{VIP: netip.MustParseAddr(v), AnyReady: true}, Mode: speaker.ModeLayer2, Service: "ns/" + v})
	}
	return w
}

func cluster(t *testing.T, w speaker.World) (map[string]*node, map[string]bool, *sync.Mutex) {
	t.Helper()
	mu := &sync.Mutex{}
	live := map[string]bool{"n1": true, "n2": true, "n3": true}
	nodes := map[string]*node{}
	for _, name := range []string{"n1", "n2", "n3"} {
		n := &node{mem: &fakeMembership{mu: mu, live: live, self: name}, m: speaker.NewMetrics(prometheus.NewRegistry())}
		sp, err := speaker.New(speaker.Options{
			Node:       name,
			Metrics:    n.m,
			Membership: n.mem,
			Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: speaker.AnnouncerFunc(func(_ context.Context, d []speaker.Announcement) error {
				n.announced = n.announced[:0]
				for _, a := range d {
					n.announced = append(n.announced, a.VIP)
				}
				return nil
			})},
			OnTakeover: func(tk speaker.Takeover) { n.takeovers = append(n.takeovers, tk) },
			Now:        testClock.now,
		})
		if err != nil {
			t.Fatal(err)
		}
		sp.SetWorld(w)
		n.sp = sp
		nodes[name] = n
	}
	return nodes, live, mu
}

// syncAll syncs every node, lets the hold-down pass, and syncs again.
func syncAll(t *testing.T, nodes map[string]*node) {
	t.Helper()
	syncOnce(t, nodes)
	testClock.t = testClock.t.Add(time.Second)
	syncOnce(t, nodes)
}

func syncOnce(t *testing.T, nodes map[string]*node) {
	t.Helper()
	for _, n := range nodes {
		if n.sp == nil {
			continue
		}
		if err := n.sp.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// owners maps each address to the nodes announcing it.
func owners(nodes map[string]*node) map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for _, name := range []string{"n1", "n2", "n3"} {
		for _, v := range nodes[name].announced {
			out[v] = append(out[v], name)
		}
	}
	return out
}

func TestSpeakersAgreeAndFailOver(t *testing.T) {
	vips := []string{"198.51.100.10", "198.51.100.11", "198.51.100.12", "198.51.100.13", "198.51.100.14", "2001:db8::10"}
	w := world(vips...)
	nodes, live, mu := cluster(t, w)
	syncAll(t, nodes)
	before := owners(nodes)
	for _, v := range vips {
		if got := before[netip.MustParseAddr(v)]; len(got) != 1 {
			t.Fatalf("%s announced by %v, want exactly one node", v, got)
		}
	}

	// n1 dies: its addresses move, the others stay.
	mu.Lock()
	live["n1"] = false
	mu.Unlock()
	nodes["n1"] = &node{} // a dead node announces nothing
	// Failover is immediate: no hold-down, the clock does not move.
	syncOnce(t, nodes)
	after := owners(nodes)
	moved := 0
	for _, v := range vips {
		a := netip.MustParseAddr(v)
		if len(after[a]) != 1 {
			t.Fatalf("%s announced by %v after n1 died", v, after[a])
		}
		if before[a][0] == "n1" {
			moved++
		} else if diff := cmp.Diff(before[a], after[a]); diff != "" {
			t.Errorf("%s moved although its owner lives (-before +after):\n%s", v, diff)
		}
	}
	if moved == 0 {
		t.Fatal("n1 owned nothing; pick other addresses")
	}
	var tk int
	for _, name := range []string{"n2", "n3"} {
		for _, x := range nodes[name].takeovers {
			if x.Previous == "n1" {
				tk++
			}
		}
	}
	if tk != moved {
		t.Errorf("%d takeovers from n1 reported, want %d", tk, moved)
	}
}

func TestCutOffSpeakerStopsAnnouncing(t *testing.T) {
	vips := []string{"198.51.100.10", "198.51.100.11", "198.51.100.12", "198.51.100.13"}
	nodes, _, _ := cluster(t, world(vips...))
	syncAll(t, nodes)
	var victim string
	for name, n := range nodes {
		if len(n.announced) > 0 {
			victim = name
			break
		}
	}
	nodes[victim].mem.cut = true
	syncAll(t, nodes)
	if got := nodes[victim].announced; len(got) != 0 {
		t.Errorf("cut-off %s still announces %v", victim, got)
	}
	// The majority side does not see the victim either once memberlist declares it dead; here
	// it still does (shared live map), so the victim's addresses are simply unannounced by the
	// majority until that happens — never announced twice.
	for v, who := range owners(nodes) {
		if len(who) > 1 {
			t.Errorf("%s announced by %v", v, who)
		}
	}
	// Healing brings the addresses back, with a takeover (gratuitous burst) on the victim, but
	// only after the hold-down: the victim's view may be ahead of the others'.
	nodes[victim].mem.cut = false
	n := len(nodes[victim].takeovers)
	syncOnce(t, nodes)
	if got := nodes[victim].announced; len(got) != 0 {
		t.Errorf("healed %s announces %v before the hold-down", victim, got)
	}
	testClock.t = testClock.t.Add(time.Second)
	syncOnce(t, nodes)
	if len(nodes[victim].announced) == 0 || len(nodes[victim].takeovers) == n {
		t.Errorf("healed %s: announced %v, takeovers %d → %d", victim, nodes[victim].announced, n, len(nodes[victim].takeovers))
	}
}

// TestSpeakerHealthMetrics: every speaker exports the members it expects, the addresses that
// no live speaker may announce although their Service has ready endpoints (not those without
// any: nobody should announce them), and, per address, each time it started announcing one —
// what an alert on a missing announcer or a flapping layer-2 owner reads.
func TestSpeakerHealthMetrics(t *testing.T) {
	const vip = "198.51.100.20"
	w := world(vip)
	w.VIPs = append(w.VIPs,
		// Local, its only ready endpoint on a node without a live speaker: nobody may announce.
		speaker.VIP{Request: election.Request{VIP: netip.MustParseAddr("198.51.100.21"), Local: true, ReadyNodes: map[string]bool{"n9": true}}, Mode: speaker.ModeLayer2, Service: "ns/stranded"},
		speaker.VIP{Request: election.Request{VIP: netip.MustParseAddr("198.51.100.22"), Local: true, ReadyNodes: map[string]bool{"n9": true}}, Mode: speaker.ModeBGP, Service: "ns/stranded-bgp"},
		// No ready endpoint anywhere: not announced, and not counted either.
		speaker.VIP{Request: election.Request{VIP: netip.MustParseAddr("198.51.100.23")}, Mode: speaker.ModeLayer2, Service: "ns/down"},
	)
	nodes, live, mu := cluster(t, w)
	takeovers := func(step string, want map[string]float64) {
		t.Helper()
		for _, name := range []string{"n1", "n2", "n3"} {
			m := nodes[name].m
			if got := testutil.ToFloat64(m.Takeovers.WithLabelValues(vip)); got != want[name] {
				t.Errorf("%s: %s takeovers of %s = %v, want %v", step, name, vip, got, want[name])
			}
			if got := testutil.ToFloat64(m.Expected); got != 3 {
				t.Errorf("%s: %s expected members = %v, want 3", step, name, got)
			}
			for mode, want := range map[speaker.Mode]float64{speaker.ModeLayer2: 1, speaker.ModeBGP: 1} {
				if got := testutil.ToFloat64(m.WithoutAnnouncer.WithLabelValues(string(mode))); got != want {
					t.Errorf("%s: %s addresses without announcer (%s) = %v, want %v", step, name, mode, got, want)
				}
			}
		}
	}
	syncAll(t, nodes)
	first := owners(nodes)[netip.MustParseAddr(vip)]
	if len(first) != 1 {
		t.Fatalf("%s announced by %v, want one node", vip, first)
	}
	o := first[0]
	takeovers("first owner", map[string]float64{o: 1})

	// The owner is cut off: the others see it gone and one takes over at once.
	mu.Lock()
	live[o] = false
	nodes[o].mem.cut = true
	mu.Unlock()
	syncOnce(t, nodes)
	second := owners(nodes)[netip.MustParseAddr(vip)]
	if len(second) != 1 || second[0] == o {
		t.Fatalf("after %s was cut off, %s announced by %v", o, vip, second)
	}
	p := second[0]
	takeovers("failover", map[string]float64{o: 1, p: 1})

	// It comes back and takes the address back after the hold-down: a second start for it.
	mu.Lock()
	live[o] = true
	nodes[o].mem.cut = false
	mu.Unlock()
	syncAll(t, nodes)
	if got := owners(nodes)[netip.MustParseAddr(vip)]; len(got) != 1 || got[0] != o {
		t.Fatalf("after %s came back, %s announced by %v, want %s", o, vip, got, o)
	}
	takeovers("owner back", map[string]float64{o: 2, p: 1})
}
