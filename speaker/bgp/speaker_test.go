package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/testenv"
)

// router is a plain GoBGP server standing in for a ToR router: it listens
// on addr:port and accepts the speaker (dialing from 127.0.0.1) as passive
// neighbor.
type router struct {
	srv    *server.BgpServer
	addr   netip.Addr
	port   uint16
	states chan bgp.FSMState
}

func freePort(t *testing.T, addr netip.Addr) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).AddrPort().Port()
}

func newRouter(t *testing.T, addr string, asn, speakerASN uint32) *router {
	t.Helper()
	r := &router{addr: netip.MustParseAddr(addr), states: make(chan bgp.FSMState, 64)}
	r.port = freePort(t, r.addr)
	r.srv = server.NewBgpServer(server.LoggerOption(slog.New(logr.ToSlogHandler(testr.New(t).WithName("router"))), nil))
	go r.srv.Serve()
	ctx := context.Background()
	if err := r.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: "192.0.2.254", ListenPort: int32(r.port), ListenAddresses: []string{addr},
	}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		r.srv.Stop()
	})
	err := r.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
		if ev.Type == apiutil.PEER_EVENT_STATE {
			select {
			case r.states <- ev.Peer.State.SessionState:
			default:
			}
		}
	}}, server.WatchPeer())
	if err != nil {
		t.Fatal(err)
	}
	afs := []*api.AfiSafi{
		{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}},
		{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, Enabled: true}},
	}
	if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: speakerASN},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  afs,
	}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitEstablished waits for the router's session to reach Established.
func (r *router) waitEstablished(t *testing.T) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s := <-r.states:
			if s == bgp.BGP_FSM_ESTABLISHED {
				return
			}
		case <-deadline:
			t.Fatalf("router %v: session not established", r.addr)
		}
	}
}

// received is what the router learned: prefix -> attributes summary.
func (r *router) received(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f}, func(nlri bgp.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				out[nlri.String()] = describe(p)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// describe summarises the attributes the tests care about.
func describe(p *apiutil.Path) string {
	var parts []string
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeNextHop:
			parts = append(parts, "nh="+a.Value.String())
		case *bgp.PathAttributeMpReachNLRI:
			parts = append(parts, "nh="+a.Nexthop.String())
		case *bgp.PathAttributeLocalPref:
			parts = append(parts, fmt.Sprintf("lp=%d", a.Value))
		case *bgp.PathAttributeCommunities:
			for _, c := range a.Value {
				parts = append(parts, fmt.Sprintf("c=%d:%d", c>>16, c&0xffff))
			}
		case *bgp.PathAttributeLargeCommunities:
			for _, c := range a.Values {
				parts = append(parts, fmt.Sprintf("lc=%d:%d:%d", c.ASN, c.LocalData1, c.LocalData2))
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// eventually waits up to 15s until cond returns "" (testenv.Eventually; cond returns what
// is still wrong, often a cmp.Diff).
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, what, func() error { return problem(cond()) })
}

// problem is msg as an error, nil when it is empty.
func problem(msg string) error {
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

func wantReceived(t *testing.T, r *router, want map[string]string) {
	t.Helper()
	eventually(t, fmt.Sprintf("routes on router %v", r.addr), func() string {
		return cmp.Diff(want, r.received(t))
	})
}

func newSpeaker(t *testing.T, reg prometheus.Registerer) *Speaker {
	t.Helper()
	s, err := New(testr.New(t), Options{RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func testPeer(name string, r *router) Peer {
	return Peer{
		Name: name, MyASN: 64512, PeerASN: 64500, Address: r.addr, Port: r.port,
		ConnectTime: time.Second, NextHopV6: netip.MustParseAddr("2001:db8::11"),
	}
}

func statusOf(s *Speaker, name string) PeerStatus {
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	return PeerStatus{}
}

func TestAdvertiseAndWithdraw(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	r := newRouter(t, "127.0.0.1", 64500, 64512)
	s := newSpeaker(t, reg)
	if err := s.SetPeers(ctx, []Peer{testPeer("r1", r)}); err != nil {
		t.Fatal(err)
	}
	// No session before the first SetAdvertisements (see SetPeers).
	if st := statusOf(s, "r1"); st.SessionState != v1alpha1.SessionStateIdle {
		t.Errorf("status before SetAdvertisements = %+v, want Idle", st)
	}
	for timeout := time.After(500 * time.Millisecond); ; {
		select {
		case st := <-r.states:
			if st == bgp.BGP_FSM_ESTABLISHED {
				t.Fatal("session established before SetAdvertisements")
			}
			continue
		case <-timeout:
		}
		break
	}

	vip4 := Advertisement{Prefix: netip.MustParsePrefix("100.64.0.10/32"), Communities: []uint32{65000<<16 | 100}, LocalPref: 200,
		LargeCommunities: []LargeCommunity{{64512, 1, 2}}}
	vip6 := Advertisement{Prefix: netip.MustParsePrefix("2001:db8:100::10/128")}
	agg := Advertisement{Prefix: netip.MustParsePrefix("100.64.1.0/24")}
	if err := s.SetAdvertisements(ctx, []Advertisement{vip4, vip6, agg}); err != nil {
		t.Fatal(err)
	}
	r.waitEstablished(t)
	// eBGP: the next hop is the session's address, LOCAL_PREF is not sent.
	wantReceived(t, r, map[string]string{
		"100.64.0.10/32":       "c=65000:100 lc=64512:1:2 nh=127.0.0.1",
		"100.64.1.0/24":        "nh=127.0.0.1",
		"2001:db8:100::10/128": "nh=2001:db8::11",
	})
	eventually(t, "status", func() string {
		st := statusOf(s, "r1")
		return cmp.Diff(PeerStatus{Name: "r1", Address: r.addr, SessionState: v1alpha1.SessionStateEstablished, PrefixesAdvertised: 3, EstablishedCount: 1},
			st, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Since" }, cmp.Ignore()))
	})

	// Idempotent: the same state again changes nothing.
	if err := s.SetAdvertisements(ctx, []Advertisement{agg, vip6, vip4}); err != nil {
		t.Fatal(err)
	}
	// Change attributes of one, withdraw another.
	vip4.Communities = nil
	vip4.LargeCommunities = nil
	if err := s.SetAdvertisements(ctx, []Advertisement{vip4, agg}); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, r, map[string]string{
		"100.64.0.10/32": "nh=127.0.0.1",
		"100.64.1.0/24":  "nh=127.0.0.1",
	})
	if err := s.SetAdvertisements(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, r, map[string]string{})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()] = v
		}
	}
	want := map[string]float64{
		"metalgate_bgp_session_up":                1,
		"metalgate_bgp_prefixes_advertised":       0,
		"metalgate_bgp_session_established_total": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestIBGPLocalPref(t *testing.T) {
	ctx := context.Background()
	r := newRouter(t, "127.0.0.1", 64512, 64512)
	s := newSpeaker(t, nil)
	if err := s.SetAdvertisements(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p := testPeer("r1", r)
	p.PeerASN = 64512
	if err := s.SetPeers(ctx, []Peer{p}); err != nil {
		t.Fatal(err)
	}
	r.waitEstablished(t)
	if err := s.SetAdvertisements(ctx, []Advertisement{
		{Prefix: netip.MustParsePrefix("100.64.0.10/32"), LocalPref: 50},
		{Prefix: netip.MustParsePrefix("100.64.0.10/32"), LocalPref: 200, Communities: []uint32{1<<16 | 1}},
		{Prefix: netip.MustParsePrefix("100.64.0.11/32")},
	}); err != nil {
		t.Fatal(err)
	}
	// Merged: highest LOCAL_PREF, union of communities; GoBGP sends 100
	// to internal peers when none is set.
	wantReceived(t, r, map[string]string{
		"100.64.0.10/32": "c=1:1 lp=200 nh=127.0.0.1",
		"100.64.0.11/32": "lp=100 nh=127.0.0.1",
	})
}

func TestSetPeersKeepsUnchangedSessions(t *testing.T) {
	ctx := context.Background()
	r := newRouter(t, "127.0.0.1", 64500, 64512)
	s := newSpeaker(t, nil)
	if err := s.SetAdvertisements(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p := testPeer("r1", r)
	if err := s.SetPeers(ctx, []Peer{p}); err != nil {
		t.Fatal(err)
	}
	r.waitEstablished(t)
	if err := s.SetAdvertisements(ctx, []Advertisement{{Prefix: netip.MustParsePrefix("100.64.0.10/32")}}); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, r, map[string]string{"100.64.0.10/32": "nh=127.0.0.1"})
	before := statusOf(s, "r1")

	// The same peer again, plus an invalid one: the error names it, the
	// good one is untouched.
	err := s.SetPeers(ctx, []Peer{p, {Name: "broken"}})
	if err == nil || !strings.Contains(err.Error(), `peer "broken"`) {
		t.Fatalf("SetPeers error = %v, want one naming peer \"broken\"", err)
	}
	if got := statusOf(s, "broken"); got.LastError == "" {
		t.Errorf("status of the refused peer has no LastError: %+v", got)
	}
	// Give a reset time to show: the router would see the session drop.
	select {
	case st := <-r.states:
		t.Fatalf("router saw a state change to %v after SetPeers with an unchanged peer", st)
	case <-time.After(time.Second):
	}
	after := statusOf(s, "r1")
	if after.EstablishedCount != before.EstablishedCount || !after.Since.Equal(before.Since) || after.SessionState != v1alpha1.SessionStateEstablished {
		t.Fatalf("session changed: before %+v, after %+v", before, after)
	}
	wantReceived(t, r, map[string]string{"100.64.0.10/32": "nh=127.0.0.1"})

	// A changed peer is re-added: the session resets and comes back with
	// the routes.
	p.HoldTime, p.KeepaliveTime = 30*time.Second, 10*time.Second
	if err := s.SetPeers(ctx, []Peer{p}); err != nil {
		t.Fatal(err)
	}
	r.waitEstablished(t)
	eventually(t, "re-established", func() string {
		if st := statusOf(s, "r1"); st.SessionState != v1alpha1.SessionStateEstablished || st.EstablishedCount != 1 {
			return fmt.Sprintf("status %+v", st)
		}
		return ""
	})
	wantReceived(t, r, map[string]string{"100.64.0.10/32": "nh=127.0.0.1"})

	// Removing the peer withdraws everything from the router.
	if err := s.SetPeers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, r, map[string]string{})
	if st := s.Status(); len(st) != 0 {
		t.Errorf("Status after removing all peers = %+v", st)
	}
}

func TestPerPeerFiltering(t *testing.T) {
	ctx := context.Background()
	r1 := newRouter(t, "127.0.0.1", 64500, 64512)
	r2 := newRouter(t, "127.0.0.2", 64501, 64512)
	s := newSpeaker(t, nil)
	if err := s.SetAdvertisements(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p2 := testPeer("r2", r2)
	p2.PeerASN = 64501
	if err := s.SetPeers(ctx, []Peer{testPeer("r1", r1), p2}); err != nil {
		t.Fatal(err)
	}
	r1.waitEstablished(t)
	r2.waitEstablished(t)

	a := netip.MustParsePrefix("100.64.0.1/32")
	b := netip.MustParsePrefix("100.64.0.2/32")
	c6 := netip.MustParsePrefix("2001:db8:100::3/128")
	steps := []struct {
		name   string
		ads    []Advertisement
		r1, r2 []netip.Prefix
	}{
		{"a to r1, b to all, c6 to r2", []Advertisement{{Prefix: a, Peers: []string{"r1"}}, {Prefix: b}, {Prefix: c6, Peers: []string{"r2"}}}, []netip.Prefix{a, b}, []netip.Prefix{b, c6}},
		{"a moves to r2 (soft reset)", []Advertisement{{Prefix: a, Peers: []string{"r2"}}, {Prefix: b}, {Prefix: c6, Peers: []string{"r2"}}}, []netip.Prefix{b}, []netip.Prefix{a, b, c6}},
		{"a to both by two ads, b only to r1", []Advertisement{{Prefix: a, Peers: []string{"r2"}}, {Prefix: a, Peers: []string{"r1"}}, {Prefix: b, Peers: []string{"r1"}}}, []netip.Prefix{a, b}, []netip.Prefix{a}},
		{"everything to all", []Advertisement{{Prefix: a}, {Prefix: b}, {Prefix: c6}}, []netip.Prefix{a, b, c6}, []netip.Prefix{a, b, c6}},
		{"to nobody known", []Advertisement{{Prefix: a, Peers: []string{"r3"}}}, nil, nil},
	}
	for _, step := range steps {
		if err := s.SetAdvertisements(ctx, step.ads); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		for _, x := range []struct {
			r    *router
			name string
			want []netip.Prefix
		}{{r1, "r1", step.r1}, {r2, "r2", step.r2}} {
			eventually(t, step.name+": routes on "+x.name, func() string {
				got := x.r.received(t)
				var gotP []string
				for k := range got {
					gotP = append(gotP, k)
				}
				var wantP []string
				for _, p := range x.want {
					wantP = append(wantP, p.String())
				}
				slices.Sort(gotP)
				slices.Sort(wantP)
				return cmp.Diff(wantP, gotP)
			})
			if got := statusOf(s, x.name).PrefixesAdvertised; got != len(x.want) {
				t.Errorf("%s: %s PrefixesAdvertised = %d, want %d", step.name, x.name, got, len(x.want))
			}
		}
	}
}

func TestRoutesFromRoutersAreNotPassedOn(t *testing.T) {
	ctx := context.Background()
	r1 := newRouter(t, "127.0.0.1", 64500, 64512)
	r2 := newRouter(t, "127.0.0.2", 64501, 64512)
	s := newSpeaker(t, nil)
	if err := s.SetAdvertisements(ctx, ads("100.64.0.1/32")); err != nil {
		t.Fatal(err)
	}
	p2 := testPeer("r2", r2)
	p2.PeerASN = 64501
	if err := s.SetPeers(ctx, []Peer{testPeer("r1", r1), p2}); err != nil {
		t.Fatal(err)
	}
	r1.waitEstablished(t)
	r2.waitEstablished(t)
	// r1 announces a route to the node.
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("203.0.113.0/24"))
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("127.0.0.1"))
	if _, err := r1.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{{
		Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), nh},
	}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node receives r1's route", func() string {
		n := 0
		err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: "127.0.0.1", Family: bgp.RF_IPv4_UC}, func(bgp.NLRI, []*apiutil.Path) { n++ })
		if err != nil || n == 0 {
			return fmt.Sprintf("%d paths in Adj-RIB-In from r1 (%v)", n, err)
		}
		return ""
	})
	var inRIB []string
	err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, _ []*apiutil.Path) { inRIB = append(inRIB, n.String()) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"100.64.0.1/32"}, inRIB); diff != "" {
		t.Errorf("the node's RIB (-want +got):\n%s", diff)
	}
	// r2 gets our route, and only it, for as long as a wrong propagation would take to show:
	// waiting out that window is the behaviour under test.
	want := map[string]string{"100.64.0.1/32": "nh=127.0.0.1"}
	wantReceived(t, r2, want)
	testenv.Holds(t, 500*time.Millisecond, "r2 has our route only", func() error { return problem(cmp.Diff(want, r2.received(t))) })
}

func TestNewValidates(t *testing.T) {
	if _, err := New(logr.Discard(), Options{}); err == nil {
		t.Error("New without router ID succeeded")
	}
}

func TestOtherFamilyNeedsNextHop(t *testing.T) {
	ctx := context.Background()
	r := newRouter(t, "127.0.0.1", 64500, 64512)
	s := newSpeaker(t, nil)
	if err := s.SetAdvertisements(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p := testPeer("r1", r)
	// Loopback has no global IPv6 address to use as next hop for IPv6
	// prefixes on this IPv4 session: they must not be sent.
	p.NextHopV6 = netip.Addr{}
	if err := s.SetPeers(ctx, []Peer{p}); err != nil {
		t.Fatal(err)
	}
	r.waitEstablished(t)
	if err := s.SetAdvertisements(ctx, []Advertisement{
		{Prefix: netip.MustParsePrefix("100.64.0.10/32")},
		{Prefix: netip.MustParsePrefix("2001:db8:100::10/128")},
		{Prefix: netip.MustParsePrefix("::ffff:100.64.0.11/128")}, // IPv4-mapped: an IPv4 /32
	}); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, r, map[string]string{"100.64.0.10/32": "nh=127.0.0.1", "100.64.0.11/32": "nh=127.0.0.1"})
	if got := statusOf(s, "r1").PrefixesAdvertised; got != 2 {
		t.Errorf("PrefixesAdvertised = %d, want 2", got)
	}
	if err := s.SetAdvertisements(ctx, []Advertisement{{}}); err == nil {
		t.Error("SetAdvertisements with an invalid prefix: no error")
	}
	wantReceived(t, r, map[string]string{})
}
