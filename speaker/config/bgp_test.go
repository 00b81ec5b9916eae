package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/election"
)

func bgpAdv(name string, spec v1alpha1.BGPAdvertisementSpec) v1alpha1.BGPAdvertisement {
	return v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func peer(name, addr string, mutate func(*v1alpha1.BGPPeerSpec)) v1alpha1.BGPPeer {
	p := v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64500, Address: addr}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func node(name string, lbls map[string]string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func i32(v int32) *int32 { return &v }

// bgpSummary is the part of a BGP VIP the table compares.
type bgpSummary struct {
	VIP        string
	Pool       string
	Local      bool
	Ready      []string
	Candidates []string
	Ads        []bgp.Advertisement
}

func bgpSummaries(w speaker.World) []bgpSummary {
	live := map[string]bool{"n1": true, "n2": true, "n3": true}
	var out []bgpSummary
	for _, v := range w.VIPs {
		if v.Mode != speaker.ModeBGP {
			continue
		}
		s := bgpSummary{VIP: v.VIP.String(), Pool: v.Pool, Local: v.Local, Ads: v.Params.(bgp.Params).Advertisements,
			Candidates: election.Candidates(v.Request, w.Nodes, live)}
		for n := range v.ReadyNodes {
			s.Ready = append(s.Ready, n)
		}
		out = append(out, s)
	}
	return out
}

func TestBuildBGP(t *testing.T) {
	nodes := []corev1.Node{node("n1", map[string]string{"rack": "a"}), node("n2", map[string]string{"rack": "b"}), node("n3", nil)}
	pools := []v1alpha1.IPAddressPool{
		pool("bgp", map[string]string{"mode": "bgp"}, "100.64.10.0/24", "2001:db8:64::/120"),
		pool("other", nil, "100.64.20.0/24"),
	}
	comms := []v1alpha1.Community{{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: v1alpha1.CommunitySpec{Communities: []v1alpha1.CommunityAlias{{Name: "no-export", Value: "65535:65281"}}}}}
	everywhere := []discoveryv1.EndpointSlice{slice("s1", ep("n2", true))}
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	pfx := netip.MustParsePrefix
	tests := []struct {
		name     string
		me       string
		ads      []v1alpha1.BGPAdvertisement
		services []corev1.Service
		slices   []discoveryv1.EndpointSlice
		want     []bgpSummary
		wantErrs []string
	}{
		{
			name:     "empty advertisement: every pool, every node, /32 and /128",
			me:       "n1",
			ads:      []v1alpha1.BGPAdvertisement{bgpAdv("all", v1alpha1.BGPAdvertisementSpec{})},
			services: []corev1.Service{svc("s1", nil, "100.64.10.5", "2001:db8:64::5")},
			slices:   everywhere,
			want: []bgpSummary{
				{VIP: "100.64.10.5", Pool: "bgp", Candidates: []string{"n1", "n2", "n3"}, Ads: []bgp.Advertisement{{Prefix: pfx("100.64.10.5/32")}}},
				{VIP: "2001:db8:64::5", Pool: "bgp", Candidates: []string{"n1", "n2", "n3"}, Ads: []bgp.Advertisement{{Prefix: pfx("2001:db8:64::5/128")}}},
			},
		},
		{
			name:     "no ready endpoint anywhere: nobody advertises (Cluster)",
			me:       "n1",
			ads:      []v1alpha1.BGPAdvertisement{bgpAdv("all", v1alpha1.BGPAdvertisementSpec{})},
			services: []corev1.Service{svc("s1", nil, "100.64.10.5")},
			want: []bgpSummary{
				{VIP: "100.64.10.5", Pool: "bgp", Ads: []bgp.Advertisement{{Prefix: pfx("100.64.10.5/32")}}},
			},
		},
		{
			name:     "ETP Local: only nodes with a ready endpoint",
			me:       "n2",
			ads:      []v1alpha1.BGPAdvertisement{bgpAdv("all", v1alpha1.BGPAdvertisementSpec{})},
			services: []corev1.Service{svc("s1", local, "100.64.10.5")},
			slices:   []discoveryv1.EndpointSlice{slice("s1", ep("n2", true), ep("n3", false))},
			want: []bgpSummary{
				{VIP: "100.64.10.5", Pool: "bgp", Local: true, Ready: []string{"n2"}, Candidates: []string{"n2"}, Ads: []bgp.Advertisement{{Prefix: pfx("100.64.10.5/32")}}},
			},
		},
		{
			name: "pool selection by name and selector, attributes, aggregation, node selectors",
			me:   "n1",
			ads: []v1alpha1.BGPAdvertisement{
				bgpAdv("agg", v1alpha1.BGPAdvertisementSpec{
					IPAddressPoolSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"mode": "bgp"}}},
					AggregationLength:      i32(24), AggregationLengthV6: i32(64), LocalPref: 200,
					Communities: []string{"no-export", "64512:7", "large:1:2:3"}, Peers: []string{"r1"},
					NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "a"}}},
				}),
				bgpAdv("rack-b", v1alpha1.BGPAdvertisementSpec{
					IPAddressPools: []string{"bgp"},
					NodeSelectors:  []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "b"}}},
				}),
			},
			services: []corev1.Service{svc("s1", nil, "100.64.10.5", "2001:db8:64::5"), svc("s2", nil, "100.64.20.1")},
			slices:   everywhere,
			want: []bgpSummary{
				{VIP: "100.64.10.5", Pool: "bgp", Candidates: []string{"n1", "n2"}, Ads: []bgp.Advertisement{{
					Prefix: pfx("100.64.10.0/24"), LocalPref: 200, Communities: []uint32{65535<<16 | 65281, 64512<<16 | 7},
					LargeCommunities: []bgp.LargeCommunity{{GlobalAdmin: 1, LocalData1: 2, LocalData2: 3}}, Peers: []string{"r1"}}}},
				{VIP: "2001:db8:64::5", Pool: "bgp", Candidates: []string{"n1", "n2"}, Ads: []bgp.Advertisement{{
					Prefix: pfx("2001:db8:64::/64"), LocalPref: 200, Communities: []uint32{65535<<16 | 65281, 64512<<16 | 7},
					LargeCommunities: []bgp.LargeCommunity{{GlobalAdmin: 1, LocalData1: 2, LocalData2: 3}}, Peers: []string{"r1"}}}},
			},
		},
		{
			name: "bad advertisements are reported and skipped, the rest still works",
			me:   "n3",
			ads: []v1alpha1.BGPAdvertisement{
				bgpAdv("bad-comm", v1alpha1.BGPAdvertisementSpec{Communities: []string{"nosuch"}}),
				bgpAdv("bad-len", v1alpha1.BGPAdvertisementSpec{AggregationLength: i32(33)}),
				bgpAdv("good", v1alpha1.BGPAdvertisementSpec{IPAddressPools: []string{"bgp"}, LocalPref: 50}),
			},
			services: []corev1.Service{svc("s1", nil, "100.64.10.5")},
			slices:   everywhere,
			want: []bgpSummary{
				{VIP: "100.64.10.5", Pool: "bgp", Candidates: []string{"n1", "n2", "n3"}, Ads: []bgp.Advertisement{{Prefix: pfx("100.64.10.5/32"), LocalPref: 50}}},
			},
			wantErrs: []string{"BGPAdvertisement bad-comm: communities", "BGPAdvertisement bad-len: aggregationLength 33"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, errs := Build(Snapshot{Services: tc.services, EndpointSlices: tc.slices, Nodes: nodes, Pools: pools,
				BGPAdvertisements: tc.ads, Communities: comms}, Options{Node: tc.me})
			if diff := cmp.Diff(tc.want, bgpSummaries(w), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
			checkErrs(t, errs, tc.wantErrs)
		})
	}
}

func checkErrs(t *testing.T, errs []error, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d matching %q", errs, len(want), want)
	}
	for i, e := range errs {
		if !strings.Contains(e.Error(), want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, e, want[i])
		}
	}
}

func TestBuildBGPPeers(t *testing.T) {
	nodes := []corev1.Node{node("n1", map[string]string{"rack": "a"}), node("n2", nil)}
	peers := []v1alpha1.BGPPeer{
		peer("r1", "198.51.100.1", nil),
		peer("r2", "2001:db8::1", func(s *v1alpha1.BGPPeerSpec) {
			s.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "a"}}}
			s.PasswordSecret = corev1.SecretReference{Name: "r2-pw"}
			s.BFDProfile = "fast"
		}),
		peer("bad-addr", "not-an-ip", nil),
		peer("no-secret", "198.51.100.2", func(s *v1alpha1.BGPPeerSpec) { s.PasswordSecret = corev1.SecretReference{Name: "missing"} }),
		peer("no-bfd", "198.51.100.3", func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "nosuch" }),
	}
	bfd := []v1alpha1.BFDProfile{{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}}
	s := Snapshot{Nodes: nodes, BGPPeers: peers, BFDProfiles: bfd, Passwords: map[string]string{"r2-pw": "s3cret"}}

	w, errs := Build(s, Options{Node: "n1"})
	var got []string
	for _, p := range bgp.ConfigOf(w).Peers {
		got = append(got, p.Name+"@"+p.Address.String())
	}
	if diff := cmp.Diff([]string{"r1@198.51.100.1", "r2@2001:db8::1"}, got); diff != "" {
		t.Errorf("n1 peers (-want +got):\n%s", diff)
	}
	for _, p := range bgp.ConfigOf(w).Peers {
		if p.Name == "r2" && (p.Password != "s3cret" || p.BFD == nil || p.PeerASN != 64500 || p.MyASN != 64512) {
			t.Errorf("r2 = %+v, want password from the Secret, BFD, ASNs", p)
		}
	}
	checkErrs(t, errs, []string{"BGPPeer bad-addr: spec.peerAddress", "BGPPeer no-bfd:", `BGPPeer no-secret: spec.passwordSecret: no password from Secret "missing"`})
	var invalid []string
	for _, p := range bgp.ConfigOf(w).Invalid {
		invalid = append(invalid, p.Name+": "+p.Err.Error())
	}
	wantInvalid := []string{
		`bad-addr: spec.peerAddress: ParseAddr("not-an-ip"): unable to parse IP`,
		`no-bfd: spec.bfdProfile: BFDProfile "nosuch" not found`,
		`no-secret: spec.passwordSecret: no password from Secret "missing"`,
	}
	if diff := cmp.Diff(wantInvalid, invalid); diff != "" {
		t.Errorf("n1 invalid peers (-want +got):\n%s", diff)
	}

	w, _ = Build(s, Options{Node: "n2"})
	if len(bgp.ConfigOf(w).Peers) != 1 || bgp.ConfigOf(w).Peers[0].Name != "r1" {
		t.Errorf("n2 peers = %+v, want r1 only (r2 selects rack a)", bgp.ConfigOf(w).Peers)
	}
	if len(bgp.ConfigOf(w).Invalid) != 3 {
		t.Errorf("n2 invalid peers = %v, want the three that select every node", bgp.ConfigOf(w).Invalid)
	}

	// A Secret that was read but has no "password" key, and a node selector that does not parse
	// (reported on every node: nobody can tell whom it selects).
	s.Passwords = nil
	s.PasswordErrors = map[string]error{"r2-pw": errors.New(`no key "password" in Secret "r2-pw"`)}
	s.BGPPeers = append(s.BGPPeers, peer("bad-sel", "198.51.100.4", func(s *v1alpha1.BGPPeerSpec) {
		s.NodeSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Bogus"}}}}
	}))
	for _, n := range []string{"n1", "n2"} {
		w, _ = Build(s, Options{Node: n})
		got := map[string]string{}
		for _, p := range bgp.ConfigOf(w).Invalid {
			got[p.Name] = p.Err.Error()
		}
		if !strings.HasPrefix(got["bad-sel"], "spec.nodeSelectors[0]: ") {
			t.Errorf("%s: bad-sel error = %q, want spec.nodeSelectors[0]: …", n, got["bad-sel"])
		}
		if want := `spec.passwordSecret: no key "password" in Secret "r2-pw"`; n == "n1" && got["r2"] != want {
			t.Errorf("n1: r2 error = %q, want %q", got["r2"], want)
		}
		if _, ok := got["r2"]; n == "n2" && ok {
			t.Errorf("n2: r2 reported invalid, but it does not select n2")
		}
	}
}
