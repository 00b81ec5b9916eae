package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker/bgp"
)

// BFD defaults from the BFDProfile CRD documentation.
const (
	defaultBFDInterval   = 300 * time.Millisecond
	defaultBFDMultiplier = 3
)

// bgpPeerFromCRD converts a BGPPeer into a Peer. bfd holds the BFDProfiles of
// the peer's namespace by name; password is the resolved password from
// spec.passwordSecret, which wins over spec.password when not empty. Errors
// name the offending field.
func bgpPeerFromCRD(p *v1alpha1.BGPPeer, bfd map[string]*v1alpha1.BFDProfile, password string) (bgp.Peer, error) {
	if p == nil {
		return bgp.Peer{}, errors.New("nil BGPPeer")
	}
	s := &p.Spec
	out := bgp.Peer{
		Name:            p.Name,
		MyASN:           s.MyASN,
		PeerASN:         s.ASN,
		Port:            179,
		Password:        s.Password,
		EBGPMultiHop:    s.EBGPMultiHop,
		GracefulRestart: s.EnableGracefulRestart,
	}
	if password != "" {
		out.Password = password
	}
	if s.MyASN == 0 {
		return bgp.Peer{}, errors.New("spec.myASN: must be set")
	}
	if s.ASN == 0 {
		return bgp.Peer{}, errors.New("spec.peerASN: must be set")
	}
	if err := peerAddresses(s, &out); err != nil {
		return bgp.Peer{}, err
	}
	if s.VRFName != "" {
		return bgp.Peer{}, errors.New("spec.vrf: VRFs are not supported by the BGP speaker")
	}
	if err := peerTimers(s, &out); err != nil {
		return bgp.Peer{}, err
	}
	if s.BFDProfile != "" {
		b, err := peerBFD(s, bfd)
		if err != nil {
			return bgp.Peer{}, err
		}
		out.BFD = b
	}
	return out, nil
}

// peerAddresses sets the peer's address and port, the source address and the router ID.
func peerAddresses(s *v1alpha1.BGPPeerSpec, out *bgp.Peer) error {
	addr, err := netip.ParseAddr(s.Address)
	if err != nil {
		return fmt.Errorf("spec.peerAddress: %w", err)
	}
	out.Address = addr.Unmap()
	if s.Port != nil {
		if *s.Port == 0 {
			return errors.New("spec.peerPort: must be between 1 and 65535")
		}
		out.Port = *s.Port
	}
	if s.SrcAddress != "" {
		a, err := netip.ParseAddr(s.SrcAddress)
		if err != nil {
			return fmt.Errorf("spec.sourceAddress: %w", err)
		}
		out.SourceAddress = a.Unmap()
	}
	if s.RouterID != "" {
		a, err := netip.ParseAddr(s.RouterID)
		if err != nil || !a.Is4() {
			return fmt.Errorf("spec.routerID: %q is not an IPv4 address", s.RouterID)
		}
		out.RouterID = a
	}
	return nil
}

// peerTimers sets the hold, keepalive and connect times: none negative, a hold time of 0 or
// at least 3 s (RFC 4271 4.2), a keepalive shorter than the hold time.
func peerTimers(s *v1alpha1.BGPPeerSpec, out *bgp.Peer) error {
	for _, d := range []struct {
		field string
		in    *metav1.Duration
		out   *time.Duration
	}{
		{"spec.holdTime", s.HoldTime, &out.HoldTime},
		{"spec.keepaliveTime", s.KeepaliveTime, &out.KeepaliveTime},
		{"spec.connectTime", s.ConnectTime, &out.ConnectTime},
	} {
		if d.in == nil {
			continue
		}
		if d.in.Duration < 0 {
			return fmt.Errorf("%s: must not be negative", d.field)
		}
		*d.out = d.in.Duration
	}
	if out.HoldTime != 0 && out.HoldTime < 3*time.Second {
		return errors.New("spec.holdTime: must be 0 or at least 3s")
	}
	if out.HoldTime != 0 && out.KeepaliveTime >= out.HoldTime {
		return errors.New("spec.keepaliveTime: must be less than holdTime")
	}
	return nil
}

// peerBFD is the BFD profile the peer names, from bfd (the namespace's BFDProfiles by name).
func peerBFD(s *v1alpha1.BGPPeerSpec, bfd map[string]*v1alpha1.BFDProfile) (*bgp.BFDProfile, error) {
	prof, ok := bfd[s.BFDProfile]
	if !ok || prof == nil {
		return nil, fmt.Errorf("spec.bfdProfile: BFDProfile %q not found", s.BFDProfile)
	}
	b, err := bfdFromCRD(prof)
	if err != nil {
		return nil, fmt.Errorf("spec.bfdProfile: BFDProfile %q: %w", s.BFDProfile, err)
	}
	if s.EBGPMultiHop {
		return nil, errors.New("spec.bfdProfile: BFD on a multi-hop session is not supported (the embedded BFD is single-hop only)")
	}
	return b, nil
}

func bfdFromCRD(p *v1alpha1.BFDProfile) (*bgp.BFDProfile, error) {
	s := &p.Spec
	if s.EchoMode {
		return nil, errors.New("spec.echoMode: echo mode is not supported by the embedded BFD")
	}
	if s.PassiveMode {
		return nil, errors.New("spec.passiveMode: passive mode is not supported by the embedded BFD")
	}
	b := &bgp.BFDProfile{
		ReceiveInterval:  defaultBFDInterval,
		TransmitInterval: defaultBFDInterval,
		DetectMultiplier: defaultBFDMultiplier,
	}
	if v := s.ReceiveInterval; v != nil {
		if *v < 10 || *v > 60000 {
			return nil, errors.New("spec.receiveInterval: must be between 10 and 60000")
		}
		b.ReceiveInterval = time.Duration(*v) * time.Millisecond
	}
	if v := s.TransmitInterval; v != nil {
		if *v < 10 || *v > 60000 {
			return nil, errors.New("spec.transmitInterval: must be between 10 and 60000")
		}
		b.TransmitInterval = time.Duration(*v) * time.Millisecond
	}
	if v := s.DetectMultiplier; v != nil {
		if *v < 2 || *v > 255 {
			return nil, errors.New("spec.detectMultiplier: must be between 2 and 255")
		}
		b.DetectMultiplier = *v
	}
	return b, nil
}

// community is a parsed community: a standard one (RFC 1997) or, when
// IsLarge, a large one (RFC 8092).
type community struct {
	IsLarge  bool
	Standard uint32
	Large    bgp.LargeCommunity
}

// String formats c the way parseCommunity reads it.
func (c community) String() string {
	if c.IsLarge {
		return fmt.Sprintf("large:%d:%d:%d", c.Large.GlobalAdmin, c.Large.LocalData1, c.Large.LocalData2)
	}
	return fmt.Sprintf("%d:%d", c.Standard>>16, c.Standard&0xffff)
}

// parseCommunity parses a BGPAdvertisement community: "65000:100" (two
// numbers 0-65535), "large:1:2:3" (three numbers 0-4294967295), or the name
// of an alias from a Community object (aliases maps names to values in one
// of the first two forms; an alias cannot point to another alias).
func parseCommunity(s string, aliases map[string]string) (community, error) {
	if c, err := parseCommunityValue(s); err == nil {
		return c, nil
	} else if !isAliasName(s) {
		return community{}, err
	}
	v, ok := aliases[s]
	if !ok {
		return community{}, fmt.Errorf("community %q: no Community alias with this name", s)
	}
	c, err := parseCommunityValue(v)
	if err != nil {
		return community{}, fmt.Errorf("community alias %q: %w", s, err)
	}
	return c, nil
}

func isAliasName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return !strings.HasPrefix(s, "large:")
}

func parseCommunityValue(s string) (community, error) {
	if rest, ok := strings.CutPrefix(s, "large:"); ok {
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			return community{}, fmt.Errorf("large community %q: want large:N:N:N", s)
		}
		var n [3]uint32
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return community{}, fmt.Errorf("large community %q: %q is not a number from 0 to 4294967295", s, p)
			}
			n[i] = uint32(v)
		}
		return community{IsLarge: true, Large: bgp.LargeCommunity{GlobalAdmin: n[0], LocalData1: n[1], LocalData2: n[2]}}, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(lo, ":") {
		return community{}, fmt.Errorf("community %q: want N:N, large:N:N:N or an alias name", s)
	}
	a, err1 := strconv.ParseUint(hi, 10, 16)
	b, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return community{}, fmt.Errorf("community %q: both numbers must be from 0 to 65535", s)
	}
	return community{Standard: uint32(a)<<16 | uint32(b)}, nil
}

// addCommunity appends c to the standard or large communities of a.
func addCommunity(a *bgp.Advertisement, c community) {
	if c.IsLarge {
		a.LargeCommunities = append(a.LargeCommunities, c.Large)
		return
	}
	a.Communities = append(a.Communities, c.Standard)
}

// aggregate returns the prefix announced for addr under a BGPAdvertisement
// aggregation length: addr masked to aggregationLength bits. A negative or
// too long length means the default, the full address (/32 or /128).
// IPv4-mapped IPv6 addresses are treated as IPv4.
func aggregate(addr netip.Addr, aggregationLength int) netip.Prefix {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	if aggregationLength < 0 || aggregationLength > addr.BitLen() {
		aggregationLength = addr.BitLen()
	}
	p, _ := addr.WithZone("").Prefix(aggregationLength)
	return p
}
