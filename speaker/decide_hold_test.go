package speaker_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/claims"
	"github.com/metalgate/metalgate/speaker/election"
)

// holdStep is one decision of one node with the others' claims and holds.
type holdStep struct {
	desc    string
	world   *speaker.World
	live    []string
	quorum  bool
	claims  map[string][]netip.Addr // nil: no claims in use
	holds   []claims.Held
	resume  claims.Held
	at      time.Duration
	wantL2  bool   // dvip announced by this node
	owner   string // Next.Elected of dvip
	started bool
	claimed bool          // dvip in Decision.Claims
	wake    time.Duration // Decision.Wake, when not 0
}

// TestDecideHold: a node whose speaker left with a hold keeps its layer-2 addresses while the
// hold is valid and it would still be a candidate: nobody takes them over before the hold
// ends, and the rendezvous owner fails them over at once when it ends (at most
// claims.MaxHold). The replacement speaker resumes them (Input.Resume) at once, unless another
// live node claims them. Holds of live nodes, resumes in another node's name and holds without
// claims in use do not count.
func TestDecideHold(t *testing.T) {
	const (
		hd = time.Second      // HoldDown
		h  = 10 * time.Second // the hold
	)
	all := []string{"n1", "n2", "n3"}
	owner := election.Owner(dvip, all)
	rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == owner })
	next := election.Owner(dvip, rest) // takes dvip over when owner is gone
	other := rest[0]
	if other == next {
		other = rest[1]
	}
	w3 := decideWorld(all)
	excluded := decideWorld(all)
	for i := range excluded.Nodes {
		excluded.Nodes[i].Excluded = excluded.Nodes[i].Name == owner
	}
	noEndpoint := decideWorld(all, rest...) // ETP Local: owner has no ready endpoint
	claimsOf := func(vipOf map[string]bool, nodes ...string) map[string][]netip.Addr {
		m := map[string][]netip.Addr{}
		for _, n := range nodes {
			m[n] = []netip.Addr{}
			if vipOf[n] {
				m[n] = []netip.Addr{dvip}
			}
		}
		return m
	}
	ownerClaims := claimsOf(map[string]bool{owner: true}, rest...)
	ownerClaims[owner] = []netip.Addr{dvip}
	gone := claimsOf(nil, rest...) // owner left: the others' claims, of nothing
	left := t0.Add(time.Second)    // when owner's hold arrived
	held := func(node string, d time.Duration, vips ...netip.Addr) []claims.Held {
		return []claims.Held{{Node: node, VIPs: vips, Since: left, For: d}}
	}
	after := func(d time.Duration) time.Duration { return time.Second + d } // since t0, d after left

	for _, sc := range []struct {
		name  string
		node  string
		steps []holdStep
	}{
		{name: "the held owner is not live: nobody takes over before the hold ends, then failover at once", node: next, steps: []holdStep{
			{desc: "owner announces", world: w3, live: all, quorum: true, claims: ownerClaims, owner: owner},
			{desc: "owner left with a hold: still its", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(0), owner: owner, wake: h},
			{desc: "just before the hold ends: still its", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(h - time.Millisecond), owner: owner, wake: time.Millisecond},
			{desc: "the hold ended: failover at once", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(h), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "a third node does not take it either", node: other, steps: []holdStep{
			{desc: "owner left with a hold", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(0), owner: owner},
			{desc: "after hold-downs, still its", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(3 * hd), owner: owner},
			{desc: "the hold ended: the rendezvous owner's", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(h), owner: next},
		}},
		{name: "a hold of a huge length counts as claims.MaxHold", node: next, steps: []holdStep{
			{desc: "owner left with a hold of 1000 hours", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, 1000*time.Hour, dvip), at: after(0), owner: owner, wake: claims.MaxHold},
			{desc: "claims.MaxHold later: failover at once", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, 1000*time.Hour, dvip), at: after(claims.MaxHold), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "the held node loses its endpoint (ETP Local): failover at once", node: next, steps: []holdStep{
			{desc: "owner left with a hold", world: decideWorld(all, all...), live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(0), owner: owner},
			{desc: "its endpoint is gone", world: noEndpoint, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(time.Second), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "the held node is excluded: failover at once", node: next, steps: []holdStep{
			{desc: "owner left with a hold", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(0), owner: owner},
			{desc: "owner excluded", world: excluded, live: rest, quorum: true, claims: gone, holds: held(owner, h, dvip), at: after(time.Second), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "a hold that does not list the address holds nothing", node: next, steps: []holdStep{
			{desc: "owner announces", world: w3, live: all, quorum: true, claims: ownerClaims, owner: owner},
			{desc: "owner left holding another address: failover at once", world: w3, live: rest, quorum: true, claims: gone, holds: held(owner, h, dbgp), at: after(0), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "a hold in the name of a live node does not count (its own claims do)", node: owner, steps: []holdStep{
			{desc: "nobody claims; other is live and 'held': rendezvous, held down", world: w3, live: all, quorum: true, claims: claimsOf(nil, rest...), holds: held(other, h, dvip), owner: owner},
			{desc: "announces after the hold-down", world: w3, live: all, quorum: true, claims: claimsOf(nil, rest...), holds: held(other, h, dvip), at: hd, wantL2: true, owner: owner, started: true, claimed: true},
		}},
		{name: "without claims in use, holds do not count", node: next, steps: []holdStep{
			{desc: "owner announces", world: w3, live: all, quorum: true, owner: owner},
			{desc: "owner left with a hold: failover at once", world: w3, live: rest, quorum: true, holds: held(owner, h, dvip), at: after(0), wantL2: true, owner: next, started: true, claimed: true},
		}},
		{name: "the replacement resumes its predecessor's hold: at once", node: owner, steps: []holdStep{
			{desc: "rejoins, resumes", world: w3, live: all, quorum: true, claims: gone, resume: held(owner, h, dvip)[0], at: after(2 * time.Second), wantL2: true, owner: owner, started: true, claimed: true},
			{desc: "keeps it after the resume ended", world: w3, live: all, quorum: true, claims: gone, resume: held(owner, h, dvip)[0], at: after(2 * h), wantL2: true, owner: owner, claimed: true},
		}},
		{name: "the replacement resumes without quorum yet: claims, announces once it has quorum", node: owner, steps: []holdStep{
			{desc: "no quorum: claims, silent", world: w3, live: all, claims: gone, resume: held(owner, h, dvip)[0], at: after(time.Second), owner: owner, claimed: true, wake: h - time.Second},
			{desc: "quorum: at once", world: w3, live: all, quorum: true, claims: gone, resume: held(owner, h, dvip)[0], at: after(2 * time.Second), wantL2: true, owner: owner, started: true, claimed: true},
		}},
		{name: "a resume that ended counts for nothing: rendezvous, held down", node: owner, steps: []holdStep{
			{desc: "resume ended", world: w3, live: all, quorum: true, claims: gone, resume: held(owner, h, dvip)[0], at: after(h), owner: owner},
		}},
		{name: "a resume in another node's name counts for nothing", node: other, steps: []holdStep{
			{desc: "owner announces", world: w3, live: all, quorum: true, claims: ownerClaims, resume: held(owner, h, dvip)[0], owner: owner},
			{desc: "owner gone without a hold, a resume in owner's name: next's, other claims nothing", world: w3, live: rest, quorum: true, claims: gone, resume: held(owner, h, dvip)[0], at: after(0), owner: next},
		}},
		{name: "the replacement resumes an address another node took meanwhile: not at once", node: owner, steps: []holdStep{
			{desc: "next claims it: elected by weight, held down", world: w3, live: all, quorum: true, claims: claimsOf(map[string]bool{next: true}, rest...), resume: held(owner, h, dvip)[0], at: after(time.Second), owner: owner, claimed: true},
			{desc: "after the hold-down", world: w3, live: all, quorum: true, claims: claimsOf(map[string]bool{next: true}, rest...), resume: held(owner, h, dvip)[0], at: after(time.Second + hd), wantL2: true, owner: owner, started: true, claimed: true},
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			var prev speaker.State
			for _, st := range sc.steps {
				d := speaker.Decide(speaker.Input{Node: sc.node, World: st.world, Live: liveSet(st.live...), Quorum: st.quorum,
					Previous: prev, Now: t0.Add(st.at), HoldDown: hd, Claims: st.claims, Holds: st.holds, Resume: st.resume})
				got := holdStep{owner: d.Next.Elected[dvip], claimed: slices.Contains(d.Claims, dvip)}
				got.wantL2 = slices.ContainsFunc(d.Desired[speaker.ModeLayer2], func(a speaker.Announcement) bool { return a.VIP == dvip })
				got.started = slices.ContainsFunc(d.Started, func(s speaker.Start) bool { return s.VIP.VIP == dvip })
				if got.wantL2 != st.wantL2 || got.owner != st.owner || got.started != st.started || got.claimed != st.claimed {
					t.Errorf("%s (node %s): announces %v owner %q started %v claimed %v; want %v %q %v %v",
						st.desc, sc.node, got.wantL2, got.owner, got.started, got.claimed, st.wantL2, st.owner, st.started, st.claimed)
				}
				if st.wake != 0 && d.Wake != st.wake {
					t.Errorf("%s: wake in %v, want %v", st.desc, d.Wake, st.wake)
				}
				prev = d.Next
			}
		})
	}
}
