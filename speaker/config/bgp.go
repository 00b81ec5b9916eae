package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker/bgp"
)

// bgpPool is a pool selected by at least one BGPAdvertisement.
type bgpPool struct {
	addressPool
	// nodeSelectors are the ORed node selectors of all its advertisements (nil: every node).
	nodeSelectors []labels.Selector
	// ads are the advertisements that apply to this node.
	ads []bgpAd
}

// bgpAd is one BGPAdvertisement, resolved.
type bgpAd struct {
	len4, len6 int
	tmpl       bgp.Advertisement // without Prefix
}

// advertisements returns what this node advertises for vip: one per advertisement.
func (p *bgpPool) advertisements(vip netip.Addr) []bgp.Advertisement {
	var out []bgp.Advertisement
	for _, ad := range p.ads {
		a := ad.tmpl
		a.Communities = slices.Clone(a.Communities)
		a.LargeCommunities = slices.Clone(a.LargeCommunities)
		a.Peers = slices.Clone(a.Peers)
		if vip.Is4() {
			a.Prefix = aggregate(vip, ad.len4)
		} else {
			a.Prefix = aggregate(vip, ad.len6)
		}
		out = append(out, a)
	}
	return out
}

func selectors(kind, name, field string, ls []metav1.LabelSelector) ([]labels.Selector, error) {
	var out []labels.Selector
	for i := range ls {
		s, err := metav1.LabelSelectorAsSelector(&ls[i])
		if err != nil {
			return nil, fmt.Errorf("%s %s: %s[%d]: %w", kind, name, field, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func matches(sels []labels.Selector, l map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// bgpPoolsFor returns the pools selected by BGPAdvertisements, sorted by name, with the
// advertisements that apply to the node with labels myLabels. An advertisement with an error
// (bad selector, unknown community, bad aggregation length) is skipped and reported.
func bgpPoolsFor(s Snapshot, myLabels map[string]string) ([]*bgpPool, []error) {
	var errs []error
	aliases := map[string]string{}
	for _, c := range s.Communities {
		for _, a := range c.Spec.Communities {
			aliases[a.Name] = a.Value
		}
	}
	type parsed struct {
		ad    v1alpha1.BGPAdvertisement
		nodes []labels.Selector
		res   bgpAd
	}
	ads := slices.Clone(s.BGPAdvertisements)
	slices.SortFunc(ads, func(a, b v1alpha1.BGPAdvertisement) int { return cmp.Compare(a.Name, b.Name) })
	var good []parsed
	for _, ad := range ads {
		p, err := parseBGPAd(ad, aliases)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nodes, err := selectors("BGPAdvertisement", ad.Name, "nodeSelectors", ad.Spec.NodeSelectors)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := selectors("BGPAdvertisement", ad.Name, "ipAddressPoolSelectors", ad.Spec.IPAddressPoolSelectors); err != nil {
			errs = append(errs, err)
			continue
		}
		good = append(good, parsed{ad: ad, nodes: nodes, res: p})
	}
	pools := slices.Clone(s.Pools)
	slices.SortFunc(pools, func(a, b v1alpha1.IPAddressPool) int { return cmp.Compare(a.Name, b.Name) })
	var out []*bgpPool
	for _, pool := range pools {
		bp := &bgpPool{addressPool: addressPool{name: pool.Name}}
		allNodes, selected := false, false
		for _, g := range good {
			if ok, _ := selectsPool(g.ad.Spec.IPAddressPools, g.ad.Spec.IPAddressPoolSelectors, pool); !ok {
				continue
			}
			selected = true
			if len(g.nodes) == 0 {
				allNodes = true
			}
			bp.nodeSelectors = append(bp.nodeSelectors, g.nodes...)
			if matches(g.nodes, myLabels) {
				bp.ads = append(bp.ads, g.res)
			}
		}
		if !selected {
			continue
		}
		if allNodes {
			bp.nodeSelectors = nil
		}
		for _, a := range pool.Spec.Addresses {
			r, err := allocator.ParseRange(string(a))
			if err != nil {
				errs = append(errs, fmt.Errorf("IPAddressPool %s: %w", pool.Name, err))
				continue
			}
			bp.ranges = append(bp.ranges, r)
		}
		out = append(out, bp)
	}
	return out, errs
}

func parseBGPAd(ad v1alpha1.BGPAdvertisement, aliases map[string]string) (bgpAd, error) {
	r := bgpAd{len4: 32, len6: 128}
	if l := ad.Spec.AggregationLength; l != nil {
		if *l < 0 || *l > 32 {
			return r, fmt.Errorf("BGPAdvertisement %s: aggregationLength %d: want 0-32", ad.Name, *l)
		}
		r.len4 = int(*l)
	}
	if l := ad.Spec.AggregationLengthV6; l != nil {
		if *l < 0 || *l > 128 {
			return r, fmt.Errorf("BGPAdvertisement %s: aggregationLengthV6 %d: want 0-128", ad.Name, *l)
		}
		r.len6 = int(*l)
	}
	r.tmpl.LocalPref = ad.Spec.LocalPref
	for _, c := range ad.Spec.Communities {
		v, err := parseCommunity(c, aliases)
		if err != nil {
			return r, fmt.Errorf("BGPAdvertisement %s: communities: %w", ad.Name, err)
		}
		addCommunity(&r.tmpl, v)
	}
	r.tmpl.Peers = slices.Clone(ad.Spec.Peers)
	return r, nil
}

// bgpPeers returns the sessions of the node with labels myLabels, sorted by name, and the peers
// that select the node but cannot be configured (a peer whose node selectors do not parse is
// reported on every node). An invalid peer never stops the others.
func bgpPeers(s Snapshot, myLabels map[string]string) ([]bgp.Peer, []bgp.InvalidPeer) {
	var invalid []bgp.InvalidPeer
	bfd := map[string]*v1alpha1.BFDProfile{}
	for i := range s.BFDProfiles {
		bfd[s.BFDProfiles[i].Name] = &s.BFDProfiles[i]
	}
	peers := slices.Clone(s.BGPPeers)
	slices.SortFunc(peers, func(a, b v1alpha1.BGPPeer) int { return cmp.Compare(a.Name, b.Name) })
	var out []bgp.Peer
peers:
	for i := range peers {
		p := &peers[i]
		bad := func(err error) { invalid = append(invalid, bgp.InvalidPeer{Name: p.Name, Err: err}) }
		var sels []labels.Selector
		for j := range p.Spec.NodeSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelectors[j])
			if err != nil {
				bad(fmt.Errorf("spec.nodeSelectors[%d]: %w", j, err))
				continue peers
			}
			sels = append(sels, sel)
		}
		if !matches(sels, myLabels) {
			continue
		}
		var password string
		if ref := p.Spec.PasswordSecret.Name; ref != "" {
			pw, ok := s.Passwords[ref]
			if !ok {
				why := s.PasswordErrors[ref]
				if why == nil {
					why = fmt.Errorf("no password from Secret %q", ref)
				}
				bad(fmt.Errorf("spec.passwordSecret: %w", why))
				continue
			}
			password = pw
		}
		bp, err := bgpPeerFromCRD(p, bfd, password)
		if err != nil {
			bad(err)
			continue
		}
		out = append(out, bp)
	}
	return out, invalid
}
