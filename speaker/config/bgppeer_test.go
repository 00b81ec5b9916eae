package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker/bgp"
)

func TestParseCommunity(t *testing.T) {
	aliases := map[string]string{"no-export": "65535:65281", "big": "large:1:2:3", "bad": "nope"}
	for _, tc := range []struct {
		in      string
		want    community
		wantErr string
	}{
		{in: "65000:100", want: community{Standard: 65000<<16 | 100}},
		{in: "0:0", want: community{}},
		{in: "65535:65535", want: community{Standard: 0xffffffff}},
		{in: "large:1:2:3", want: community{IsLarge: true, Large: bgp.LargeCommunity{GlobalAdmin: 1, LocalData1: 2, LocalData2: 3}}},
		{in: "large:4294967295:0:4294967295", want: community{IsLarge: true, Large: bgp.LargeCommunity{GlobalAdmin: 4294967295, LocalData1: 0, LocalData2: 4294967295}}},
		{in: "no-export", want: community{Standard: 65535<<16 | 65281}},
		{in: "big", want: community{IsLarge: true, Large: bgp.LargeCommunity{GlobalAdmin: 1, LocalData1: 2, LocalData2: 3}}},
		{in: "65536:1", wantErr: "0 to 65535"},
		{in: "1:2:3", wantErr: "want N:N"},
		{in: "large:1:2", wantErr: "large:N:N:N"},
		{in: "large:1:2:4294967296", wantErr: "0 to 4294967295"},
		{in: "unknown", wantErr: "no Community alias"},
		{in: "bad", wantErr: `alias "bad"`},
		{in: "", wantErr: "want N:N"},
		{in: "-1:2", wantErr: "0 to 65535"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseCommunity(tc.in, aliases)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseCommunity(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseCommunity(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseCommunity(%q) (-want +got):\n%s", tc.in, diff)
			}
			if !strings.HasPrefix(tc.in, "big") && !strings.HasPrefix(tc.in, "no-") && got.String() != tc.in {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}

func TestAggregate(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		length int
		want   string
	}{
		{"100.64.1.7", 32, "100.64.1.7/32"},
		{"100.64.1.7", -1, "100.64.1.7/32"},
		{"100.64.1.7", 24, "100.64.1.0/24"},
		{"100.64.1.7", 0, "0.0.0.0/0"},
		{"100.64.1.7", 33, "100.64.1.7/32"},
		{"::ffff:100.64.1.7", 16, "100.64.0.0/16"},
		{"2001:db8::1:2", 128, "2001:db8::1:2/128"},
		{"2001:db8::1:2", -1, "2001:db8::1:2/128"},
		{"2001:db8::1:2", 64, "2001:db8::/64"},
		{"2001:db8::1:2", 129, "2001:db8::1:2/128"},
	} {
		got := aggregate(netip.MustParseAddr(tc.addr), tc.length)
		if got.String() != tc.want {
			t.Errorf("aggregate(%s, %d) = %v, want %s", tc.addr, tc.length, got, tc.want)
		}
	}
	if got := aggregate(netip.Addr{}, 32); got.IsValid() {
		t.Errorf("aggregate(invalid) = %v, want the zero Prefix", got)
	}
}

func TestPeerFromCRD(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	u16 := func(v uint16) *uint16 { return &v }
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	bfd := map[string]*v1alpha1.BFDProfile{
		"fast":    {Spec: v1alpha1.BFDProfileSpec{ReceiveInterval: u32(100), TransmitInterval: u32(100), DetectMultiplier: u32(3)}},
		"default": {},
		"echo":    {Spec: v1alpha1.BFDProfileSpec{EchoMode: true}},
		"passive": {Spec: v1alpha1.BFDProfileSpec{PassiveMode: true}},
	}
	base := func(mod func(*v1alpha1.BGPPeerSpec)) *v1alpha1.BGPPeer {
		p := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor1"}, Spec: v1alpha1.BGPPeerSpec{
			MyASN: 64512, ASN: 64500, Address: "198.51.100.1",
		}}
		if mod != nil {
			mod(&p.Spec)
		}
		return p
	}
	minimal := bgp.Peer{Name: "tor1", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("198.51.100.1"), Port: 179}
	for _, tc := range []struct {
		name     string
		peer     *v1alpha1.BGPPeer
		password string
		want     bgp.Peer
		wantErr  string
	}{
		{name: "minimal", peer: base(nil), want: minimal},
		{
			name: "everything",
			peer: base(func(s *v1alpha1.BGPPeerSpec) {
				s.Port = u16(1179)
				s.SrcAddress = "198.51.100.11"
				s.RouterID = "10.0.0.1"
				s.HoldTime, s.KeepaliveTime, s.ConnectTime = dur(9*time.Second), dur(3*time.Second), dur(time.Second)
				s.Password = "inline"
				s.BFDProfile = "fast"
				s.EnableGracefulRestart = true
			}),
			password: "fromsecret",
			want: bgp.Peer{
				Name: "tor1", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("198.51.100.1"), Port: 1179,
				SourceAddress: netip.MustParseAddr("198.51.100.11"), RouterID: netip.MustParseAddr("10.0.0.1"),
				HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, ConnectTime: time.Second,
				Password: "fromsecret", GracefulRestart: true,
				BFD: &bgp.BFDProfile{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, DetectMultiplier: 3},
			},
		},
		{
			name: "inline password, default BFD, IPv6, multihop",
			peer: base(func(s *v1alpha1.BGPPeerSpec) {
				s.Address = "2001:db8::1"
				s.Password = "inline"
				s.EBGPMultiHop = true
			}),
			want: bgp.Peer{Name: "tor1", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("2001:db8::1"), Port: 179, Password: "inline", EBGPMultiHop: true},
		},
		{
			name: "default BFD profile",
			peer: base(func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "default" }),
			want: func() bgp.Peer {
				p := minimal
				p.BFD = &bgp.BFDProfile{ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3}
				return p
			}(),
		},
		{name: "bad address", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.Address = "x" }), wantErr: "spec.peerAddress"},
		{name: "bad source", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.SrcAddress = "1.2.3" }), wantErr: "spec.sourceAddress"},
		{name: "v6 router ID", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.RouterID = "::1" }), wantErr: "spec.routerID"},
		{name: "no myASN", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.MyASN = 0 }), wantErr: "spec.myASN"},
		{name: "no peerASN", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.ASN = 0 }), wantErr: "spec.peerASN"},
		{name: "port 0", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.Port = u16(0) }), wantErr: "spec.peerPort"},
		{name: "short hold", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.HoldTime = dur(2 * time.Second) }), wantErr: "spec.holdTime"},
		{name: "keepalive >= hold", peer: base(func(s *v1alpha1.BGPPeerSpec) {
			s.HoldTime, s.KeepaliveTime = dur(9*time.Second), dur(9*time.Second)
		}), wantErr: "spec.keepaliveTime"},
		{name: "negative connect", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.ConnectTime = dur(-time.Second) }), wantErr: "spec.connectTime"},
		{name: "missing BFD profile", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "nope" }), wantErr: `spec.bfdProfile: BFDProfile "nope" not found`},
		{name: "echo mode", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "echo" }), wantErr: "spec.echoMode"},
		{name: "passive mode", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "passive" }), wantErr: "spec.passiveMode"},
		{name: "BFD multihop", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = "fast"; s.EBGPMultiHop = true }), wantErr: "multi-hop"},
		{name: "vrf", peer: base(func(s *v1alpha1.BGPPeerSpec) { s.VRFName = "red" }), wantErr: "spec.vrf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bgpPeerFromCRD(tc.peer, bfd, tc.password)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("bgpPeerFromCRD (-want +got):\n%s", diff)
			}
		})
	}
}
