package speaker_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/election"
)

// fakeBGP records the calls the announcer makes.
type fakeBGP struct {
	peerCalls, adCalls int
	peers              []bgp.Peer
	ads                []bgp.Advertisement
	closed             bool
}

func (f *fakeBGP) SetPeers(_ context.Context, p []bgp.Peer) error {
	f.peerCalls++
	f.peers = p
	return nil
}
func (f *fakeBGP) SetAdvertisements(_ context.Context, a []bgp.Advertisement) error {
	f.adCalls++
	f.ads = a
	return nil
}
func (f *fakeBGP) Close(context.Context) error { f.closed = true; return nil }

// TestBGPAnnouncer: every candidate advertises without election and without quorum, peers come
// from the World, SetAdvertisements is called once even with nothing to advertise, and repeated
// syncs with the same state call nothing.
func TestBGPAnnouncer(t *testing.T) {
	vip := netip.MustParseAddr("100.64.10.5")
	ad := bgp.Advertisement{Prefix: netip.MustParsePrefix("100.64.10.5/32"), LocalPref: 100}
	peers := []bgp.Peer{{Name: "r1", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("198.51.100.1")}}
	mk := func(vips ...speaker.VIP) speaker.World {
		w := speaker.World{Speakers: []string{"n1", "n2", "n3"}, Modes: map[speaker.Mode]any{speaker.ModeBGP: bgp.Config{Peers: peers}}}
		for _, n := range w.Speakers {
			w.Nodes = append(w.Nodes, election.Node{Name: n})
		}
		w.VIPs = vips
		return w
	}
	bgpVIP := speaker.VIP{Request: election.Request{VIP: vip, AnyReady: true}, Mode: speaker.ModeBGP, Service: "ns/s", Params: bgp.Params{Advertisements: []bgp.Advertisement{ad}}}

	mu := &sync.Mutex{}
	live := map[string]bool{"n1": true, "n2": true, "n3": true}
	fakes := map[string]*fakeBGP{}
	sps := map[string]*speaker.Speaker{}
	mems := map[string]*fakeMembership{}
	for _, name := range []string{"n1", "n2", "n3"} {
		f := &fakeBGP{}
		mems[name] = &fakeMembership{mu: mu, live: live, self: name}
		sp, err := speaker.New(speaker.Options{Node: name, Membership: mems[name], Now: testClock.now,
			Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeBGP: bgp.NewAnnouncer(f)}})
		if err != nil {
			t.Fatal(err)
		}
		fakes[name], sps[name] = f, sp
	}
	ctx := context.Background()

	// Nothing to advertise yet: SetAdvertisements is still called once (sessions start).
	for name, sp := range sps {
		sp.SetWorld(mk())
		if err := sp.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if f := fakes[name]; f.adCalls != 1 || len(f.ads) != 0 || f.peerCalls != 1 || len(f.peers) != 1 {
			t.Fatalf("%s: %d SetAdvertisements (%v), %d SetPeers (%v); want 1 empty, 1 with r1", name, f.adCalls, f.ads, f.peerCalls, f.peers)
		}
	}
	// One VIP: all three nodes advertise it (no election).
	for name, sp := range sps {
		sp.SetWorld(mk(bgpVIP))
		for range 2 { // the second sync changes nothing and calls nothing
			if err := sp.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if f := fakes[name]; f.adCalls != 2 || len(f.ads) != 1 || f.ads[0].Prefix != ad.Prefix || f.peerCalls != 1 {
			t.Fatalf("%s: %d SetAdvertisements %v, %d SetPeers; want 2 calls, the /32, peers unchanged", name, f.adCalls, f.ads, f.peerCalls)
		}
	}
	// n1 cut off (no quorum): it keeps advertising; BGP is not fenced.
	mems["n1"].cut = true
	if err := sps["n1"].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if f := fakes["n1"]; len(f.ads) != 1 {
		t.Fatalf("n1 without quorum advertises %v, want the /32", f.ads)
	}
	mems["n1"].cut = false
	// ETP Local with the endpoint on n2: only n2 advertises.
	localVIP := bgpVIP
	localVIP.Local, localVIP.ReadyNodes = true, map[string]bool{"n2": true}
	for name, sp := range sps {
		sp.SetWorld(mk(localVIP))
		if err := sp.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if want := name == "n2"; (len(fakes[name].ads) == 1) != want {
			t.Errorf("%s advertises %v, want advertising=%v", name, fakes[name].ads, want)
		}
	}
}

// TestBGPShutdownKeepsRoutes: on shutdown the Speaker leaves the membership and then closes
// each announcer; the BGP one closes its sessions without withdrawing first — withdrawing the
// routes before Close would defeat graceful restart (bgp.Speaker.Close decides: NOTIFICATION,
// or sessions left to the exit).
func TestBGPShutdownKeepsRoutes(t *testing.T) {
	f := &fakeBGP{}
	l2 := &recorder{got: make(chan []speaker.Announcement, 100)}
	sp, err := speaker.New(speaker.Options{Node: "n1", Membership: l2,
		Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeBGP: bgp.NewAnnouncer(f), speaker.ModeLayer2: l2}})
	if err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr("100.64.10.5")
	sp.SetWorld(speaker.World{Speakers: []string{"n1"}, Nodes: []election.Node{{Name: "n1"}},
		VIPs: []speaker.VIP{{Request: election.Request{VIP: vip, AnyReady: true}, Mode: speaker.ModeBGP, Service: "ns/s",
			Params: bgp.Params{Advertisements: []bgp.Advertisement{{Prefix: netip.PrefixFrom(vip, 32)}}}}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()
	testenv.Eventually(t, 5*time.Second, "the BGP VIP announced", func() error {
		if len(sp.Announcements().Announcements) == 0 {
			return errors.New("nothing announced")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !f.closed || len(f.ads) != 1 || f.adCalls != 1 {
		t.Errorf("BGP on shutdown: closed %v, %d SetAdvertisements, last %v; want closed with the /32 still set", f.closed, f.adCalls, f.ads)
	}
	if i := slices.Index(l2.steps, "leave"); i < 0 || !slices.Contains(l2.steps[i:], "close") {
		t.Errorf("layer 2 on shutdown: %v, want closed after the leave", l2.steps)
	}
	if n := len(sp.Announcements().Announcements); n != 0 {
		t.Errorf("debug snapshot still lists %d announcements after Run returned", n)
	}
}
