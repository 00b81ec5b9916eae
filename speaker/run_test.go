package speaker_test

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/election"
)

// recorder is a membership and an announcer that log what the Speaker does, in order.
type recorder struct {
	mu    sync.Mutex
	steps []string
	got   chan []speaker.Announcement
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}
func (r *recorder) Live() map[string]bool      { return map[string]bool{"n1": true} }
func (r *recorder) Reachable() map[string]bool { return map[string]bool{"n1": true} }
func (r *recorder) Join([]string) (int, error) { r.add("join"); return 1, nil }
func (r *recorder) Leave(time.Duration) error  { r.add("leave"); return nil }
func (r *recorder) Admit(nodes map[string][]netip.Addr) {
	r.add("admit " + strings.Join(slices.Sorted(maps.Keys(nodes)), ","))
}
func (r *recorder) Announce(_ context.Context, _ any, d []speaker.Announcement) error {
	if len(d) == 0 {
		r.add("announce nothing")
	}
	r.got <- d
	return nil
}
func (r *recorder) Where(netip.Addr) []string { return nil }
func (r *recorder) Close() error              { r.add("close"); return nil }

// TestRunAnnouncesThenHandsOver: Run admits the speakers of the first World and then joins its
// peers, announces after the hold-down, and on cancel leaves the membership before it stops
// announcing (Close: the layer-2 announcer stops answering).
func TestRunAnnouncesThenHandsOver(t *testing.T) {
	r := &recorder{got: make(chan []speaker.Announcement, 100)}
	sp, err := speaker.New(speaker.Options{
		Node: "n1", Membership: r, HoldDown: 50 * time.Millisecond,
		Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: r},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()
	vip := netip.MustParseAddr("2001:db8::100")
	sp.SetWorld(speaker.World{
		Nodes: []election.Node{{Name: "n1"}}, Speakers: []string{"n1", "n2"}, Peers: []string{"[2001:db8::12]:7946"},
		SpeakerAddrs: map[string][]netip.Addr{"n1": {netip.MustParseAddr("2001:db8::11")}, "n2": {netip.MustParseAddr("2001:db8::12")}},
		VIPs:         []speaker.VIP{{Request: election.Request{VIP: vip, AnyReady: true}, Mode: speaker.ModeLayer2, Service: "ns/web"}},
	})
	deadline := time.After(5 * time.Second)
	for announced := false; !announced; {
		select {
		case d := <-r.got:
			announced = len(d) == 1 && d[0].VIP == vip
		case <-deadline:
			t.Fatal("not announced within 5s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// n2 is expected but never live, so the join loop may have retried; what matters is the order
	// at the end.
	n := len(r.steps)
	if n < 4 || r.steps[0] != "admit n1,n2" || !slices.Contains(r.steps, "join") {
		t.Fatalf("steps %v, want the World's speakers admitted before the first join", r.steps)
	}
	if diff := cmp.Diff([]string{"leave", "close"}, r.steps[n-2:]); diff != "" {
		t.Errorf("shutdown order (-want +got):\n%s\nall: %v", diff, r.steps)
	}
}
