package speaker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/election"
)

// l2Locator is a layer-2 announcer that announces on eth0 (Where), like layer2.Announcer.
type l2Locator struct {
	mu   sync.Mutex
	vips map[netip.Addr]bool
}

func (l *l2Locator) Announce(_ context.Context, _ any, d []speaker.Announcement) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vips = map[netip.Addr]bool{}
	for _, a := range d {
		l.vips[a.VIP] = true
	}
	return nil
}
func (l *l2Locator) Close() error { return nil }
func (l *l2Locator) Where(vip netip.Addr) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.vips[vip] {
		return []string{"eth0"}
	}
	return nil
}

// statusBGP is a fakeBGP that reports r3 as refused by the library.
type statusBGP struct{ fakeBGP }

func (f *statusBGP) Status() []bgp.PeerStatus {
	var out []bgp.PeerStatus
	for _, p := range f.peers {
		st := v1alpha1.SessionStateEstablished
		if p.Name == "r3" {
			st = v1alpha1.SessionStateUnknown
		}
		out = append(out, bgp.PeerStatus{Name: p.Name, SessionState: st})
	}
	return out
}

// TestDebugHandler pins the JSON contract of GET /debug/announcements (kubectl metalgate
// announcers parses it): only what this node announces now — layer-2 VIPs it owns after the
// election and hold-down with their interfaces, BGP VIPs it is a candidate for with the
// accepted peers each advertisement allows — sorted by address (numerically), empty array
// before the first sync.
func TestDebugHandler(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	mem := &fakeMembership{mu: &sync.Mutex{}, live: map[string]bool{"n1": true, "n2": true}, self: "n1"}
	sp, err := speaker.New(speaker.Options{
		Node: "n1", Membership: mem, Now: clk.now, HoldDown: time.Second,
		Announcers: map[speaker.Mode]speaker.Announcer{
			speaker.ModeLayer2: &l2Locator{},
			speaker.ModeBGP:    bgp.NewAnnouncer(&statusBGP{}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sp.DebugHandler())
	defer srv.Close()
	get := func(t *testing.T) string {
		t.Helper()
		resp, err := http.Get(srv.URL + contract.DebugAnnouncementsPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		return string(b)
	}
	if diff := cmp.Diff(`{"node":"n1","announcements":[]}`+"\n", get(t)); diff != "" {
		t.Errorf("before the first sync (-want +got):\n%s", diff)
	}

	addr := netip.MustParseAddr
	l2 := func(vip string, sel ...string) speaker.VIP {
		v := speaker.VIP{Request: election.Request{VIP: addr(vip), AnyReady: true}, Mode: speaker.ModeLayer2, Service: "ns/l2-" + vip}
		if len(sel) > 0 { // ETP Local with the endpoint elsewhere: n1 is no candidate
			v.Local, v.ReadyNodes = true, map[string]bool{sel[0]: true}
		}
		return v
	}
	bgpVIP := func(vip string, peers ...string) speaker.VIP {
		return speaker.VIP{Request: election.Request{VIP: addr(vip), AnyReady: true}, Mode: speaker.ModeBGP, Service: "ns/bgp-" + vip,
			Params: bgp.Params{Advertisements: []bgp.Advertisement{{Prefix: netip.PrefixFrom(addr(vip), addr(vip).BitLen()), Peers: peers}}}}
	}
	w := speaker.World{Speakers: []string{"n1", "n2"}, Nodes: []election.Node{{Name: "n1"}, {Name: "n2"}}}
	w.Modes = map[speaker.Mode]any{speaker.ModeBGP: bgp.Config{Peers: []bgp.Peer{{Name: "r1"}, {Name: "r2"}, {Name: "r3"}}}}
	// Which layer-2 VIPs n1 wins among n1 and n2 is the election's business; pick one of each.
	var mine, theirs string
	for _, v := range []string{"198.51.100.3", "198.51.100.20", "198.51.100.21", "198.51.100.22", "198.51.100.23"} {
		owner := election.Owner(addr(v), []string{"n1", "n2"})
		if owner == "n1" && mine == "" {
			mine = v
		}
		if owner == "n2" && theirs == "" {
			theirs = v
		}
	}
	if mine == "" || theirs == "" {
		t.Fatal("no address of each owner among the candidates; pick others")
	}
	w.VIPs = []speaker.VIP{
		l2(mine), l2(theirs), l2("198.51.100.9", "n2"),
		bgpVIP("100.64.10.5"), bgpVIP("100.64.10.1", "r2", "nosuch"), bgpVIP("2001:db8:64::1"),
		l2("100.64.10.5"), // both modes for one address: two entries
	}
	mine5 := election.Owner(addr("100.64.10.5"), []string{"n1", "n2"}) == "n1"
	sp.SetWorld(w)
	ctx := context.Background()
	if err := sp.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Layer 2 is held down for a second after the first election: BGP only.
	want := `{"node":"n1","announcements":[` +
		`{"service":"ns/bgp-100.64.10.1","vip":"100.64.10.1","mode":"bgp","peers":["r2"]},` +
		`{"service":"ns/bgp-100.64.10.5","vip":"100.64.10.5","mode":"bgp","peers":["r1","r2"]},` +
		`{"service":"ns/bgp-2001:db8:64::1","vip":"2001:db8:64::1","mode":"bgp","peers":["r1","r2"]}]}` + "\n"
	if diff := cmp.Diff(want, get(t)); diff != "" {
		t.Errorf("held down (-want +got):\n%s", diff)
	}

	clk.t = clk.t.Add(2 * time.Second)
	if err := sp.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	body := get(t)
	// Decode it as a client that knows only the contract does.
	var generic struct {
		Node          string           `json:"node"`
		Announcements []map[string]any `json:"announcements"`
	}
	if err := json.Unmarshal([]byte(body), &generic); err != nil || generic.Node != "n1" {
		t.Fatalf("decode %s: %v", body, err)
	}
	type row struct{ Service, VIP, Mode, Where string }
	var rows []row
	for _, m := range generic.Announcements {
		r := row{Service: m["service"].(string), VIP: m["vip"].(string), Mode: m["mode"].(string)}
		other := "peers"
		switch r.Mode {
		case "layer2":
			r.Where = fmtList(m["interfaces"])
		case "bgp":
			r.Where, other = fmtList(m["peers"]), "interfaces"
		}
		if _, ok := m[other]; ok || len(m) != 4 {
			t.Errorf("%s %s: unexpected keys: %v", r.VIP, r.Mode, m)
		}
		rows = append(rows, r)
	}
	wantRows := []row{
		{"ns/bgp-100.64.10.1", "100.64.10.1", "bgp", "r2"},
		{"ns/bgp-100.64.10.5", "100.64.10.5", "bgp", "r1,r2"},
	}
	if mine5 {
		wantRows = append(wantRows, row{"ns/l2-100.64.10.5", "100.64.10.5", "layer2", "eth0"})
	}
	// theirs and 198.51.100.9 (no local endpoint) are not n1's: not listed.
	wantRows = append(wantRows, row{"ns/l2-" + mine, mine, "layer2", "eth0"}, row{"ns/bgp-2001:db8:64::1", "2001:db8:64::1", "bgp", "r1,r2"})
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("after the hold-down (-want +got):\n%s", diff)
	}
	// The Go type round-trips.
	var typed contract.Announcements
	if err := json.Unmarshal([]byte(body), &typed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sp.Announcements(), typed); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	// Only GET (and HEAD).
	resp, err := http.Post(srv.URL+contract.DebugAnnouncementsPath, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", resp.StatusCode)
	}
}

func fmtList(v any) string {
	l, _ := v.([]any)
	out := ""
	for i, x := range l {
		if i > 0 {
			out += ","
		}
		out += x.(string)
	}
	return out
}
