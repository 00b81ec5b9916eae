package speaker

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/metalgate/metalgate/speaker/claims"
	"github.com/metalgate/metalgate/speaker/election"
)

// State is what the decision remembers from one sync to the next (layer 2; BGP needs none).
type State struct {
	// Elected is the layer-2 owner of each address at the last decision ("" when nobody is a
	// candidate).
	Elected map[netip.Addr]string
	// Announcing are the layer-2 addresses this node announces.
	Announcing map[netip.Addr]bool
	// Pending are the layer-2 addresses elected to this node and held down, since when.
	Pending map[netip.Addr]time.Time
}

// Input is everything a decision depends on.
type Input struct {
	// Node is this node's name.
	Node  string
	World *World
	// Live are the members alive or suspected (the election's candidates).
	Live map[string]bool
	// Quorum: this node may announce at layer 2 (membership.Quorum).
	Quorum bool
	// Previous is the State of the last decision (zero value at the start).
	Previous State
	Now      time.Time
	// HoldDown is Options.HoldDown.
	HoldDown time.Duration
	// Claims are the layer-2 addresses each other node announces, by node, as it gossips them
	// (membership.Membership.Claims): every live member that sends claims has an entry, empty
	// until its claims arrive; a member without one is a speaker that does not send claims (an
	// older version). This node's own claims are Previous.Announcing; an entry in its name is
	// ignored. Nil: no claims at all (plain rendezvous, the owner does not keep an address).
	Claims map[string][]netip.Addr
	// Holds are the claims of members that left with a hold (membership.Membership.Holds: their
	// speaker is replaced on the same node). While a hold is valid at Now (claims.Held.Valid:
	// at most claims.MaxHold), its node keeps the addresses it lists although it is not live,
	// as long as it would be a candidate for them if it were; nobody announces them. Ignored:
	// holds of live nodes (their own claims count), holds in this node's name, and all of them
	// when Claims is nil.
	Holds []claims.Held
	// Resume is the hold this node's previous speaker left for it (claims.ReadHoldFile): while
	// it is valid this node claims the addresses it lists that it is elected for, and starts
	// announcing them without a hold-down when no other live node claims them. Ignored unless
	// Resume.Node is this node.
	Resume claims.Held
}

// Start is a layer-2 address this node starts announcing.
type Start struct {
	VIP VIP
	// Previous is the owner in this node's view before, "" if none or this node.
	Previous string
}

// Stop is a layer-2 address this node stops announcing.
type Stop struct {
	VIP netip.Addr
	// Owner is the owner elected now, "" if none.
	Owner string
}

// Decision is what this node announces now, per mode, and what changed.
type Decision struct {
	// Desired is the complete set to hand to each mode's Announcer.
	Desired map[Mode][]Announcement
	// Started and Stopped are the layer-2 changes against Previous, sorted by address.
	Started []Start
	Stopped []Stop
	// Next is the State to pass as Previous to the next decision.
	Next State
	// Wake is when the next decision is due even without a change (a hold-down ends); 0: none.
	Wake time.Duration
	// WithoutAnnouncer counts, per mode, the addresses whose Service has a ready endpoint but
	// that no live node may announce (no candidate): unreachable although the Service is up.
	WithoutAnnouncer map[Mode]int
	// Claims are the layer-2 addresses this node claims (to publish, sorted): those it
	// announces, and those of Input.Resume elected to it that it cannot announce yet (no
	// quorum), so that nobody else takes them while the resume is valid.
	Claims []netip.Addr
	// Held counts the layer-2 addresses that stay with a node that left with a hold.
	Held int
}

// Decide is the speaker's whole policy, without effects: from the World, the members, quorum,
// the previous State and the time, what each mode announces now.
//
// Layer 2: the node elected for an address announces it while it has quorum. The current owner
// keeps it while it is still a candidate: if live candidates claim the address (Input.Claims,
// and this node's Previous.Announcing), the owner is the claimant with the highest rendezvous
// weight (election.Owner over the claimants: the same on every node once the claims have
// spread, which also settles two claimants after a partition heals); if none does, it is
// election.Owner over all the live candidates (the rendezvous owner). The claims count only
// when the rendezvous owner defers to them: it is this node, or a member that sends claims
// (an entry in Input.Claims). A speaker that sends none (an older version) takes the address
// after its own HoldDown whatever the claims say, so the claimant releases it at once, as
// without claims. It starts at once when it takes the address from a node that is no
// longer live (failover) and after HoldDown otherwise (rebalancing: a node joins or a
// partition heals; see Options.HoldDown). It stops at once when it is no longer elected or
// loses quorum.
//
// Holds (Input.Holds): when no live candidate claims an address and a node that left with a
// valid hold lists it, that node stays its owner (Next.Elected) and nobody announces it, as
// long as the node would be a candidate if it were live; when the hold ends (Wake), the
// rendezvous owner takes it over at once (failover). A node that resumes its previous
// speaker's hold (Input.Resume) claims those addresses, and starts announcing each one it is
// elected for at once unless another live node claims it (then after HoldDown).
//
// BGP: no election and no fencing: every candidate advertises (ECMP), and a node cut off from
// its peers loses its BGP sessions, which withdraws its routes by itself.
func Decide(in Input) Decision {
	d := Decision{
		Desired:          map[Mode][]Announcement{},
		WithoutAnnouncer: map[Mode]int{},
		Next: State{
			Elected:    make(map[netip.Addr]string, len(in.Previous.Elected)),
			Announcing: map[netip.Addr]bool{},
			Pending:    map[netip.Addr]time.Time{},
		},
	}
	if in.World == nil {
		return d // no view of the cluster yet: announce nothing
	}
	me, prev := in.Node, in.Previous
	layer2 := map[netip.Addr]VIP{} // the layer-2 addresses announced from now on
	claimed := claimsByVIP(in.Claims, me)
	held := heldByVIP(in)
	resumed := map[netip.Addr]bool{}
	if in.Resume.Node == me && in.Resume.Valid(in.Now) {
		for _, v := range in.Resume.VIPs {
			resumed[v] = true
		}
	}
	wake := func(at time.Time) {
		if left := at.Sub(in.Now); left > 0 && (d.Wake == 0 || left < d.Wake) {
			d.Wake = left
		}
	}
	claiming := map[netip.Addr]bool{} // this node's claims: what it announces, and resumes
	ownClaims := func(v netip.Addr) bool { return prev.Announcing[v] || resumed[v] }
	prevOf := map[netip.Addr]string{} // previous owner of newly announced addresses
	for _, v := range in.World.VIPs {
		cands := election.Candidates(v.Request, in.World.Nodes, in.Live)
		if len(cands) == 0 && (v.Request.AnyReady || len(v.Request.ReadyNodes) > 0) {
			d.WithoutAnnouncer[v.Mode]++
		}
		var mine bool
		switch v.Mode {
		case ModeLayer2:
			owner := election.Owner(v.VIP, cands)
			if _, bound := in.Claims[owner]; in.Claims != nil && (owner == me || bound) {
				if c := election.Owner(v.VIP, claimants(v.VIP, cands, claimed, me, ownClaims)); c != "" {
					owner = c
				} else if h, until := heldOwner(v, in, held[v.VIP]); h != "" {
					owner = h
					d.Held++
					wake(until)
				}
			}
			d.Next.Elected[v.VIP] = owner
			if owner == me && resumed[v.VIP] {
				claiming[v.VIP] = true
				wake(in.Resume.Until())
			}
			if owner != me || !in.Quorum {
				break
			}
			was := prev.Elected[v.VIP]
			switch {
			case prev.Announcing[v.VIP]:
				mine = true
			case resumed[v.VIP] && !claimedByOther(claimed[v.VIP], in.Live):
				mine = true // the previous speaker on this node announced it: resume at once
			case was != "" && was != me && !in.Live[was]:
				mine, prevOf[v.VIP] = true, was // failover: the old owner is gone
			default:
				since, ok := prev.Pending[v.VIP]
				if !ok {
					since = in.Now
				}
				if left := in.HoldDown - in.Now.Sub(since); left > 0 {
					d.Next.Pending[v.VIP] = since
					if d.Wake == 0 || left < d.Wake {
						d.Wake = left
					}
				} else {
					mine, prevOf[v.VIP] = true, was
				}
			}
			if mine {
				layer2[v.VIP] = v
				d.Next.Announcing[v.VIP] = true
			}
		case ModeBGP:
			mine = slices.Contains(cands, me)
		}
		if mine {
			d.Desired[v.Mode] = append(d.Desired[v.Mode], Announcement{VIP: v.VIP, Service: v.Service, Params: v.Params})
		}
	}
	for v := range d.Next.Announcing {
		claiming[v] = true
	}
	d.Claims = slices.SortedFunc(maps.Keys(claiming), netip.Addr.Compare)
	for _, vip := range slices.SortedFunc(maps.Keys(layer2), netip.Addr.Compare) {
		if prev.Announcing[vip] {
			continue
		}
		p := prevOf[vip]
		if p == me {
			p = ""
		}
		d.Started = append(d.Started, Start{VIP: layer2[vip], Previous: p})
	}
	for _, vip := range slices.SortedFunc(maps.Keys(prev.Announcing), netip.Addr.Compare) {
		if !d.Next.Announcing[vip] {
			d.Stopped = append(d.Stopped, Stop{VIP: vip, Owner: d.Next.Elected[vip]})
		}
	}
	return d
}

// claimsByVIP turns the other nodes' claims into the claimants of each address (entries in
// this node's name are ignored: its claims are what it announces).
func claimsByVIP(byNode map[string][]netip.Addr, me string) map[netip.Addr]map[string]bool {
	out := map[netip.Addr]map[string]bool{}
	for node, vips := range byNode {
		if node == me {
			continue
		}
		for _, v := range vips {
			if out[v] == nil {
				out[v] = map[string]bool{}
			}
			out[v][node] = true
		}
	}
	return out
}

// claimants returns the candidates that claim vip, in the order of cands: the others by their
// claims, this node when it announces or resumes vip now (own).
func claimants(vip netip.Addr, cands []string, claimed map[netip.Addr]map[string]bool, me string, own func(netip.Addr) bool) []string {
	var out []string
	for _, c := range cands {
		if claimed[vip][c] || (c == me && own(vip)) {
			out = append(out, c)
		}
	}
	return out
}

// claimedByOther reports whether a live node claims an address (claimants: the other nodes
// that claim it).
func claimedByOther(claimants map[string]bool, live map[string]bool) bool {
	for n := range claimants {
		if live[n] {
			return true
		}
	}
	return false
}

// heldByVIP turns the valid holds of nodes that are not live (and not this node) into the
// holds of each address.
func heldByVIP(in Input) map[netip.Addr][]claims.Held {
	out := map[netip.Addr][]claims.Held{}
	if in.Claims == nil {
		return out
	}
	for _, h := range in.Holds {
		if h.Node == in.Node || in.Live[h.Node] || !h.Valid(in.Now) {
			continue
		}
		for _, v := range h.VIPs {
			out[v] = append(out[v], h)
		}
	}
	return out
}

// heldOwner returns the node that holds v (the highest rendezvous weight if several) and when
// its hold ends; "" when none of the holds' nodes would be a candidate for v if it were live
// (excluded, not selected, or without a ready endpoint with externalTrafficPolicy Local).
func heldOwner(v VIP, in Input, holds []claims.Held) (string, time.Time) {
	if len(holds) == 0 {
		return "", time.Time{}
	}
	asLive := map[string]bool{}
	for _, h := range holds {
		asLive[h.Node] = true
	}
	cands := election.Candidates(v.Request, in.World.Nodes, asLive)
	owner := election.Owner(v.VIP, cands)
	for _, h := range holds {
		if h.Node == owner {
			return owner, h.Until()
		}
	}
	return "", time.Time{}
}
