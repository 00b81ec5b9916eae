package speaker

import (
	"maps"
	"net/netip"
	"slices"
	"time"

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
}

// Decide is the speaker's whole policy, without effects: from the World, the members, quorum,
// the previous State and the time, what each mode announces now.
//
// Layer 2: the node elected for an address (election.Owner over the live candidates) announces
// it while it has quorum. It starts at once when it takes the address from a node that is no
// longer live (failover) and after HoldDown otherwise (rebalancing: a node joins or a
// partition heals; see Options.HoldDown). It stops at once when it is no longer elected or
// loses quorum.
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
	layer2 := map[netip.Addr]VIP{}    // the layer-2 addresses announced from now on
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
			d.Next.Elected[v.VIP] = owner
			if owner != me || !in.Quorum {
				break
			}
			was := prev.Elected[v.VIP]
			switch {
			case prev.Announcing[v.VIP]:
				mine = true
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
