package speaker_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/election"
)

// claimStep is one decision of one node with the others' claims.
type claimStep struct {
	desc    string
	world   *speaker.World
	live    []string
	claims  map[string][]netip.Addr // nil: no claims in use
	at      time.Duration
	wantL2  bool   // the scenario's VIP announced by this node
	owner   string // Next.Elected of the VIP
	started bool
	stopped bool
}

// TestDecideSticky: with claims, the node announcing a layer-2 address keeps it while it is a
// candidate, whoever joins or returns; claims of non-candidates do not count; a member that
// sends no claims (an older speaker) is not bound by them.
func TestDecideSticky(t *testing.T) {
	const hold = time.Second
	all := []string{"n1", "n2", "n3"}
	four := append(slices.Clone(all), "n4")
	// joinVIP: n4 wins it by rendezvous once it joins; before owns it among n1..n3.
	joinVIP := netip.MustParseAddr("198.51.100.101")
	for election.Owner(joinVIP, four) != "n4" {
		joinVIP = joinVIP.Next()
	}
	before := election.Owner(joinVIP, all)
	wj3, wj4 := decideWorldFor(joinVIP, all), decideWorldFor(joinVIP, four)
	owner := election.Owner(dvip, all)
	var rest []string
	for _, n := range all {
		if n != owner {
			rest = append(rest, n)
		}
	}
	next := election.Owner(dvip, rest)
	other := rest[0]
	if other == next {
		other = rest[1]
	}
	w3 := decideWorld(all)
	none := func(nodes ...string) map[string][]netip.Addr { // these nodes send claims, of nothing
		m := map[string][]netip.Addr{}
		for _, n := range nodes {
			m[n] = []netip.Addr{}
		}
		return m
	}
	with := func(m map[string][]netip.Addr, node string, vip netip.Addr) map[string][]netip.Addr {
		m[node] = []netip.Addr{vip}
		return m
	}
	others := func(me string, nodes []string) []string {
		return slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == me })
	}

	for _, sc := range []struct {
		name  string
		node  string
		vip   netip.Addr
		steps []claimStep
	}{
		{name: "the owner keeps the address when a node that would win it joins", node: before, vip: joinVIP, steps: []claimStep{
			{desc: "elected, held down", world: wj3, live: all, claims: none(others(before, all)...), owner: before},
			{desc: "announces", world: wj3, live: all, claims: none(others(before, all)...), at: hold, wantL2: true, owner: before, started: true},
			{desc: "n4 joins (it sends claims, none arrived yet): kept", world: wj4, live: four, claims: none(others(before, four)...), at: 2 * hold, wantL2: true, owner: before},
			{desc: "n4's claims arrive: kept", world: wj4, live: four, claims: none(others(before, four)...), at: 3 * hold, wantL2: true, owner: before},
		}},
		{name: "the node that would win it defers to the claim", node: "n4", vip: joinVIP, steps: []claimStep{
			{desc: "joins before the claims arrive: rendezvous, held down", world: wj4, live: four, claims: map[string][]netip.Addr{}, owner: "n4"},
			{desc: "the owner's claim arrives within HoldDown: not ours, nothing pending", world: wj4, live: four, claims: with(none(others("n4", four)...), before, joinVIP), at: hold / 2, owner: before},
			{desc: "still not ours after the hold-down", world: wj4, live: four, claims: with(none(others("n4", four)...), before, joinVIP), at: 3 * hold, owner: before},
		}},
		{name: "a restarted owner returns after failover: the address stays (the new owner)", node: next, steps: []claimStep{
			{desc: "the owner announces: not ours", world: w3, live: all, claims: with(none(other), owner, dvip), owner: owner},
			{desc: "the owner dies: failover at once", world: w3, live: rest, claims: none(other), wantL2: true, owner: next, started: true},
			{desc: "the owner is back (it sends claims, none arrived yet): kept", world: w3, live: all, claims: none(other, owner), at: hold / 10, wantL2: true, owner: next},
			{desc: "its (empty) claims arrive: kept", world: w3, live: all, claims: none(other, owner), at: hold, wantL2: true, owner: next},
		}},
		{name: "a restarted owner returns after failover: it does not take back (the returning owner)", node: owner, steps: []claimStep{
			{desc: "restarted, nobody's claims yet: rendezvous, held down", world: w3, live: all, claims: none(next, other), owner: owner},
			{desc: "the new owner's claim arrives: not ours", world: w3, live: all, claims: with(none(other), next, dvip), at: hold / 2, owner: next},
			{desc: "after the hold-down: still not ours", world: w3, live: all, claims: with(none(other), next, dvip), at: 2 * hold, owner: next},
		}},
		{name: "a claim of a non-candidate is ignored (ETP Local, no endpoint on the claimant)", node: other, steps: []claimStep{
			{desc: "elected, held down", world: decideWorld(all, other), live: all, claims: with(none(next), owner, dvip), owner: other},
			{desc: "announces", world: decideWorld(all, other), live: all, claims: with(none(next), owner, dvip), at: hold, wantL2: true, owner: other, started: true},
		}},
		{name: "a claim of a node that is not live is ignored", node: next, steps: []claimStep{
			{desc: "the owner announces: not ours", world: w3, live: all, claims: with(none(other), owner, dvip), owner: owner},
			{desc: "the owner dies, its claim not yet dropped: failover at once", world: w3, live: rest, claims: with(none(other), owner, dvip), wantL2: true, owner: next, started: true},
		}},
		{name: "a claim in this node's own name is ignored", node: next, steps: []claimStep{
			{desc: "not ours", world: w3, live: all, claims: with(none(owner, other), next, dvip), owner: owner},
			{desc: "still not ours", world: w3, live: all, claims: with(none(owner, other), next, dvip), at: 2 * hold, owner: owner},
		}},
		{name: "the owner stops being a candidate: its claim no longer counts", node: other, steps: []claimStep{
			{desc: "the owner claims, endpoints everywhere", world: decideWorld(all, all...), live: all, claims: with(none(next), owner, dvip), owner: owner},
			{desc: "the owner loses its endpoint: elected, held down", world: decideWorld(all, other, next), live: all, claims: with(none(next), owner, dvip), at: hold, owner: election.Owner(dvip, []string{other, next})},
		}},
		{name: "a member that sends no claims (an older speaker) wins: the claimant releases at once", node: before, vip: joinVIP, steps: []claimStep{
			{desc: "elected, held down", world: wj3, live: all, claims: none(others(before, all)...), owner: before},
			{desc: "announces", world: wj3, live: all, claims: none(others(before, all)...), at: hold, wantL2: true, owner: before, started: true},
			{desc: "n4 joins without claims: released at once (n4 takes it after its hold-down)", world: wj4, live: four, claims: none(others(before, all)...), at: 2 * hold, owner: "n4", stopped: true},
		}},
		{name: "a member that sends no claims and does not win: the claimant keeps", node: owner, steps: []claimStep{
			{desc: "announces", world: w3, live: all, claims: map[string][]netip.Addr{}, wantL2: false, owner: owner},
			{desc: "announces after the hold-down", world: w3, live: all, claims: map[string][]netip.Addr{}, at: hold, wantL2: true, owner: owner, started: true},
			{desc: "still", world: w3, live: all, claims: map[string][]netip.Addr{}, at: 2 * hold, wantL2: true, owner: owner},
		}},
		{name: "no claims in use: the owner releases at once (plain rendezvous)", node: before, vip: joinVIP, steps: []claimStep{
			{desc: "elected, held down", world: wj3, live: all, owner: before},
			{desc: "announces", world: wj3, live: all, at: hold, wantL2: true, owner: before, started: true},
			{desc: "n4 joins: released at once", world: wj4, live: four, at: 2 * hold, owner: "n4", stopped: true},
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			vip := sc.vip
			if !vip.IsValid() {
				vip = dvip
			}
			var prev speaker.State
			for _, st := range sc.steps {
				d := speaker.Decide(speaker.Input{Node: sc.node, World: st.world, Live: liveSet(st.live...), Quorum: true,
					Previous: prev, Now: t0.Add(st.at), HoldDown: hold, Claims: st.claims})
				got := claimStep{owner: d.Next.Elected[vip]}
				for _, a := range d.Desired[speaker.ModeLayer2] {
					got.wantL2 = got.wantL2 || a.VIP == vip
				}
				got.started = slices.ContainsFunc(d.Started, func(s speaker.Start) bool { return s.VIP.VIP == vip })
				got.stopped = slices.ContainsFunc(d.Stopped, func(s speaker.Stop) bool { return s.VIP == vip })
				if got.wantL2 != st.wantL2 || got.owner != st.owner || got.started != st.started || got.stopped != st.stopped {
					t.Errorf("%s (node %s): announces %v owner %q started %v stopped %v; want %v %q %v %v",
						st.desc, sc.node, got.wantL2, got.owner, got.started, got.stopped, st.wantL2, st.owner, st.started, st.stopped)
				}
				if _, held := d.Next.Pending[vip]; held && st.owner != sc.node {
					t.Errorf("%s: held down for an address owned by %s", st.desc, st.owner)
				}
				prev = d.Next
			}
		})
	}
}

// TestDecideDoubleClaim: two nodes both announce an address (a healed partition, or a race):
// every node elects the same one, the claimant of the highest weight, and the other stops at
// once.
func TestDecideDoubleClaim(t *testing.T) {
	const hold = time.Second
	all := []string{"n1", "n2", "n3"}
	w := decideWorld(all)
	for _, pair := range [][2]string{{"n1", "n2"}, {"n1", "n3"}, {"n2", "n3"}} {
		winner := election.Owner(dvip, pair[:])
		for _, me := range all {
			var prev speaker.State
			cl := map[string][]netip.Addr{}
			for _, n := range all {
				if n == me {
					continue
				}
				cl[n] = []netip.Addr{}
				if slices.Contains(pair[:], n) {
					cl[n] = []netip.Addr{dvip}
				}
			}
			if slices.Contains(pair[:], me) { // it announces the address now
				prev = speaker.State{Elected: map[netip.Addr]string{dvip: me}, Announcing: map[netip.Addr]bool{dvip: true}}
			}
			d := speaker.Decide(speaker.Input{Node: me, World: w, Live: liveSet(all...), Quorum: true, Previous: prev,
				Now: t0, HoldDown: hold, Claims: cl})
			if got := d.Next.Elected[dvip]; got != winner {
				t.Errorf("claims by %v: %s elects %q, want %q", pair, me, got, winner)
			}
			announces := slices.ContainsFunc(d.Desired[speaker.ModeLayer2], func(a speaker.Announcement) bool { return a.VIP == dvip })
			if announces != (me == winner) {
				t.Errorf("claims by %v: %s announces %v, want %v", pair, me, announces, me == winner)
			}
			stopped := slices.ContainsFunc(d.Stopped, func(s speaker.Stop) bool { return s.VIP == dvip })
			if wantStop := slices.Contains(pair[:], me) && me != winner; stopped != wantStop {
				t.Errorf("claims by %v: %s stopped %v, want %v", pair, me, stopped, wantStop)
			}
		}
	}
}
