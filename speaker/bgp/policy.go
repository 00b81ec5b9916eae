package bgp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"
)

// Per-peer export rules. GoBGP applies per-neighbor export policies only to
// route-server clients (peer.TableID is "global" for the others, and
// AddPolicyAssignment refuses "non-rs-client peer ... doesn't have per peer
// policy"), and a route-server client gets no next-hop-self and no AS_PATH
// prepend. So each peer gets a policy named e.policy in the global export
// assignment, whose statements all match the peer's neighbor set first:
//
//	statement deny4: neighbor is the peer, prefix in <policy>-deny4 -> reject
//	statement deny6: neighbor is the peer, prefix in <policy>-deny6 -> reject
//	statement other: neighbor is the peer, family is not the session's ->
//	                 set next hop to the node's address of that family,
//	                 or reject when the node has none
//	default (after every peer's policy): accept
//
// The deny sets hold exactly the prefixes (mask length min = max = the
// prefix length, so a /24 in a set never catches a /32 inside it) whose
// Advertisements name other peers. GoBGP prefix sets are single-family,
// hence two. They are changed in place (AddDefinedSet appends,
// DeleteDefinedSet without All removes): replacing a set would swap the map
// entry but leave the policy's condition pointing to the old set.

const globalRIB = "global"

func (s *Speaker) createPolicy(ctx context.Context, e *peerEntry) error {
	var d4, d6 []*api.Prefix
	for pfx := range e.deny {
		if pfx.Addr().Is4() {
			d4 = append(d4, apiPrefix(pfx))
		} else {
			d6 = append(d6, apiPrefix(pfx))
		}
	}
	for _, set := range []struct {
		name     string
		prefixes []*api.Prefix
	}{{e.policy + "-deny4", d4}, {e.policy + "-deny6", d6}} {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX,
			Name:        set.name,
			Prefixes:    set.prefixes,
		}}); err != nil {
			return fmt.Errorf("create prefix set %s: %w", set.name, err)
		}
	}
	nbr := e.policy + "-neighbor"
	bits := 32
	if !e.cfg.Address.Is4() {
		bits = 128
	}
	if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR,
		Name:        nbr,
		List:        []string{netip.PrefixFrom(e.cfg.Address, bits).String()},
	}}); err != nil {
		return fmt.Errorf("create neighbor set %s: %w", nbr, err)
	}
	neighbor := &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nbr}
	deny := func(set string) *api.Statement {
		return &api.Statement{
			Name:       set,
			Conditions: &api.Conditions{NeighborSet: neighbor, PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set}},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		}
	}
	other := &api.Statement{Name: e.policy + "-other-family", Actions: &api.Actions{}}
	nh := e.nh6
	otherAfi := api.Family_AFI_IP6
	if !e.cfg.Address.Is4() {
		nh, otherAfi = e.nh4, api.Family_AFI_IP
	}
	other.Conditions = &api.Conditions{NeighborSet: neighbor, AfiSafiIn: []*api.Family{{Afi: otherAfi, Safi: api.Family_SAFI_UNICAST}}}
	if nh.IsValid() {
		other.Actions.Nexthop = &api.NexthopAction{Address: nh.String()}
	} else {
		other.Actions.RouteAction = api.RouteAction_ROUTE_ACTION_REJECT
	}
	err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name:       e.policy,
		Statements: []*api.Statement{deny(e.policy + "-deny4"), deny(e.policy + "-deny6"), other},
	}})
	if err != nil {
		return fmt.Errorf("create export policy %s: %w", e.policy, err)
	}
	err = s.srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          globalRIB,
		Direction:     api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:      []*api.Policy{{Name: e.policy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}})
	if err != nil {
		return fmt.Errorf("assign export policy %s: %w", e.policy, err)
	}
	return nil
}

// deletePolicy removes what createPolicy made, best effort: after the peer
// is gone nothing refers to them, and a leftover is harmless.
func (s *Speaker) deletePolicy(ctx context.Context, e *peerEntry) {
	if err := s.srv.DeletePolicyAssignment(ctx, &api.DeletePolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:      globalRIB,
		Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:  []*api.Policy{{Name: e.policy}},
	}}); err != nil {
		s.log.V(1).Info("Could not unassign export policy", "policy", e.policy, "error", err.Error())
	}
	if err := s.srv.DeletePolicy(ctx, &api.DeletePolicyRequest{Policy: &api.Policy{Name: e.policy}, All: true}); err != nil {
		s.log.V(1).Info("Could not delete export policy", "policy", e.policy, "error", err.Error())
	}
	for _, set := range []struct {
		name string
		typ  api.DefinedType
	}{
		{e.policy + "-deny4", api.DefinedType_DEFINED_TYPE_PREFIX},
		{e.policy + "-deny6", api.DefinedType_DEFINED_TYPE_PREFIX},
		{e.policy + "-neighbor", api.DefinedType_DEFINED_TYPE_NEIGHBOR},
	} {
		err := s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{
			DefinedSet: &api.DefinedSet{DefinedType: set.typ, Name: set.name},
			All:        true,
		})
		if err != nil {
			s.log.V(1).Info("Could not delete defined set", "set", set.name, "error", err.Error())
		}
	}
}

// changeDenySets adds prefixes to, or removes them from, the peer's deny
// sets and records the change in e.deny.
func (s *Speaker) changeDenySets(ctx context.Context, e *peerEntry, prefixes []netip.Prefix, add bool) error {
	var d4, d6 []*api.Prefix
	for _, pfx := range prefixes {
		if pfx.Addr().Is4() {
			d4 = append(d4, apiPrefix(pfx))
		} else {
			d6 = append(d6, apiPrefix(pfx))
		}
	}
	var errs []error
	for _, set := range []struct {
		name     string
		prefixes []*api.Prefix
	}{{e.policy + "-deny4", d4}, {e.policy + "-deny6", d6}} {
		if len(set.prefixes) == 0 {
			continue
		}
		ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: set.name, Prefixes: set.prefixes}
		var err error
		if add {
			err = s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: ds})
		} else {
			err = s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: ds})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("update prefix set %s: %w", set.name, err))
			continue
		}
		for _, p := range set.prefixes {
			pfx := netip.MustParsePrefix(p.IpPrefix)
			if add {
				e.deny[pfx] = struct{}{}
			} else {
				delete(e.deny, pfx)
			}
		}
	}
	return errors.Join(errs...)
}

func apiPrefix(p netip.Prefix) *api.Prefix {
	return &api.Prefix{IpPrefix: p.String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: uint32(p.Bits())}
}

// resolveNextHops returns the node's addresses to use as next hop for
// prefixes of the family other than the session's: the configured ones, or
// global unicast addresses found on the interface that holds the session's
// source address. Without a configured source address the routing table is
// asked which one reaches the peer: connecting a UDP socket sends nothing.
func resolveNextHops(p Peer) (nh4, nh6 netip.Addr) {
	nh4, nh6 = p.NextHopV4, p.NextHopV6
	if nh4.IsValid() && nh6.IsValid() {
		return nh4, nh6
	}
	src := p.SourceAddress
	if !src.IsValid() {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.Address, p.Port)))
		if err != nil {
			return nh4, nh6
		}
		src = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nh4, nh6
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		var found bool
		var v4, v6 netip.Addr
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip == src {
				found = true
			}
			if !ip.IsGlobalUnicast() {
				continue
			}
			if ip.Is4() && !v4.IsValid() {
				v4 = ip
			}
			if ip.Is6() && !v6.IsValid() {
				v6 = ip
			}
		}
		if !found {
			continue
		}
		if !nh4.IsValid() {
			nh4 = v4
		}
		if !nh6.IsValid() {
			nh6 = v6
		}
		break
	}
	return nh4, nh6
}
