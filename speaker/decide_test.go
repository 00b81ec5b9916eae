package speaker_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/election"
)

// decideWorld has speakers n1..n3 (and n4 when four), one layer-2 VIP and one BGP VIP; local
// makes the layer-2 VIP externalTrafficPolicy Local with ready endpoints on those nodes.
func decideWorld(nodes []string, local ...string) *speaker.World {
	return decideWorldFor(dvip, nodes, local...)
}

func decideWorldFor(vip netip.Addr, nodes []string, local ...string) *speaker.World {
	w := &speaker.World{Speakers: nodes}
	for _, n := range nodes {
		w.Nodes = append(w.Nodes, election.Node{Name: n})
	}
	l2 := speaker.VIP{Request: election.Request{VIP: vip, AnyReady: true}, Mode: speaker.ModeLayer2, Service: "ns/web"}
	if len(local) > 0 {
		l2.Local, l2.ReadyNodes = true, map[string]bool{}
		for _, n := range local {
			l2.ReadyNodes[n] = true
		}
	}
	w.VIPs = []speaker.VIP{l2, {Request: election.Request{VIP: dbgp, AnyReady: true}, Mode: speaker.ModeBGP, Service: "ns/bgp"}}
	return w
}

var (
	dvip = netip.MustParseAddr("198.51.100.100")
	dbgp = netip.MustParseAddr("100.64.0.1")
	t0   = time.Unix(1_700_000_000, 0)
)

func liveSet(names ...string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// decideStep is one decision of one node, fed the previous step's State.
type decideStep struct {
	desc     string
	world    *speaker.World
	live     []string
	quorum   bool
	at       time.Duration // since t0
	wantL2   bool          // dvip announced at layer 2
	wantBGP  bool          // dbgp advertised
	started  string        // "" none; else the Previous of the one Start ("-" for none)
	stopped  string        // "" none; else the new owner of the one Stop ("-" for none)
	wantWake time.Duration
}

func TestDecide(t *testing.T) {
	all := []string{"n1", "n2", "n3"}
	owner := election.Owner(dvip, all) // the owner among n1..n3
	var rest []string
	for _, n := range all {
		if n != owner {
			rest = append(rest, n)
		}
	}
	next := election.Owner(dvip, rest) // takes over when owner dies
	var other string                   // neither
	for _, n := range rest {
		if n != next {
			other = n
		}
	}
	four := append(slices.Clone(all), "n4")
	w3 := decideWorld(all)
	// An address that n4 wins once it joins, and who owned it before.
	joinVIP := netip.MustParseAddr("198.51.100.101")
	for election.Owner(joinVIP, four) != "n4" {
		joinVIP = joinVIP.Next()
	}
	before := election.Owner(joinVIP, all)
	wj3, wj4 := decideWorldFor(joinVIP, all), decideWorldFor(joinVIP, four)
	hold := time.Second

	for _, sc := range []struct {
		name  string
		node  string
		vip   netip.Addr // the layer-2 VIP; default dvip
		steps []decideStep
	}{
		{name: "election, hold-down, quorum loss (the owner)", node: owner, steps: []decideStep{
			{desc: "no World yet: nothing", world: nil, live: all, quorum: true},
			{desc: "elected: held down first", world: w3, live: all, quorum: true, wantBGP: true, wantWake: hold},
			{desc: "half way: still held down", world: w3, live: all, quorum: true, at: hold / 2, wantBGP: true, wantWake: hold / 2},
			{desc: "hold-down over: announces", world: w3, live: all, quorum: true, at: hold, wantL2: true, wantBGP: true, started: "-"},
			{desc: "unchanged: no new start", world: w3, live: all, quorum: true, at: 2 * hold, wantL2: true, wantBGP: true},
			{desc: "quorum lost: stops at once, BGP is not fenced", world: w3, live: all, quorum: false, at: 3 * hold, wantBGP: true, stopped: owner},
			{desc: "quorum back: held down again", world: w3, live: all, quorum: true, at: 4 * hold, wantBGP: true, wantWake: hold},
			{desc: "announces again", world: w3, live: all, quorum: true, at: 5 * hold, wantL2: true, wantBGP: true, started: "-"},
		}},
		{name: "failover and give-back (the next owner)", node: next, steps: []decideStep{
			{desc: "the owner is live: not ours", world: w3, live: all, quorum: true, wantBGP: true},
			{desc: "the owner dies: failover at once, no hold-down", world: w3, live: rest, quorum: true, at: hold / 10, wantL2: true, wantBGP: true, started: owner},
			{desc: "the owner is back: released at once", world: w3, live: all, quorum: true, at: hold, wantBGP: true, stopped: owner},
		}},
		{name: "a partition heals: the owner waits for the hold-down before taking back", node: owner, steps: []decideStep{
			{desc: "cut off, no quorum: nothing at layer 2, BGP is not fenced", world: w3, live: []string{owner}, quorum: false, wantBGP: true},
			{desc: "healed: elected again, held down (the others may still announce)", world: w3, live: all, quorum: true, at: hold, wantBGP: true, wantWake: hold},
			{desc: "then announces", world: w3, live: all, quorum: true, at: 2 * hold, wantL2: true, wantBGP: true, started: "-"},
		}},
		{name: "a bystander never announces at layer 2", node: other, steps: []decideStep{
			{desc: "all live", world: w3, live: all, quorum: true, wantBGP: true},
			{desc: "the owner dies", world: w3, live: rest, quorum: true, wantBGP: true},
		}},
		{name: "ETP Local: only a node with a ready endpoint", node: other, steps: []decideStep{
			{desc: "endpoint here: elected, held down", world: decideWorld(all, other), live: all, quorum: true, wantBGP: true, wantWake: hold},
			{desc: "announces", world: decideWorld(all, other), live: all, quorum: true, at: hold, wantL2: true, wantBGP: true, started: "-"},
			{desc: "endpoint moves away: released at once", world: decideWorld(all, owner), live: all, quorum: true, at: 2 * hold, wantBGP: true, stopped: owner},
			{desc: "no ready endpoint anywhere: nobody", world: decideWorld(all, "nowhere"), live: all, quorum: true, at: 3 * hold, wantBGP: true},
		}},
		{name: "a node joins and wins: it waits for the hold-down", node: "n4", vip: joinVIP, steps: []decideStep{
			{desc: "before it is known: the old owner's (and not a BGP candidate: not a node of the World)", world: wj3, live: four, quorum: true},
			{desc: "joins: held down", world: wj4, live: four, quorum: true, at: hold, wantBGP: true, wantWake: hold},
			// A rebalance, not a failover: the owner in its own view was itself since it joined.
			{desc: "then announces (no failover counted)", world: wj4, live: four, quorum: true, at: 2 * hold, wantL2: true, wantBGP: true, started: "-"},
		}},
		{name: "a node joins and wins: the old owner releases at once", node: before, vip: joinVIP, steps: []decideStep{
			{desc: "owner", world: wj3, live: all, quorum: true, wantBGP: true, wantWake: hold},
			{desc: "announcing", world: wj3, live: all, quorum: true, at: hold, wantL2: true, wantBGP: true, started: "-"},
			{desc: "n4 joins: released at once", world: wj4, live: four, quorum: true, at: 2 * hold, wantBGP: true, stopped: "n4"},
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			var prev speaker.State
			vip := sc.vip
			if !vip.IsValid() {
				vip = dvip
			}
			for _, st := range sc.steps {
				d := speaker.Decide(speaker.Input{Node: sc.node, World: st.world, Live: liveSet(st.live...), Quorum: st.quorum,
					Previous: prev, Now: t0.Add(st.at), HoldDown: hold})
				got := decideStep{desc: st.desc, world: st.world, live: st.live, quorum: st.quorum, at: st.at, wantWake: d.Wake}
				for _, a := range d.Desired[speaker.ModeLayer2] {
					got.wantL2 = got.wantL2 || a.VIP == vip
				}
				for _, a := range d.Desired[speaker.ModeBGP] {
					got.wantBGP = got.wantBGP || a.VIP == dbgp
				}
				if len(d.Started) > 1 || len(d.Stopped) > 1 {
					t.Fatalf("%s: started %v stopped %v", st.desc, d.Started, d.Stopped)
				}
				if len(d.Started) == 1 {
					got.started = or(d.Started[0].Previous, "-")
				}
				if len(d.Stopped) == 1 {
					got.stopped = or(d.Stopped[0].Owner, "-")
				}
				if diff := cmp.Diff(st, got, cmp.AllowUnexported(decideStep{}), cmp.Comparer(func(a, b *speaker.World) bool { return a == b })); diff != "" {
					t.Errorf("%s (node %s, owner %s, next %s): (-want +got)\n%s", st.desc, sc.node, owner, next, diff)
				}
				prev = d.Next
			}
		})
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
