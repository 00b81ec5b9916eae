package membership

import (
	"net"
	"net/netip"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/speaker/claims"
)

// TestClaimsDelegate: claims reach the store through memberlist's delegates (user messages
// and push/pull state); hostile ones are counted as refusals and change nothing; a member
// that leaves loses its claims; a member that joins, and every member when our claims
// change, gets them sent.
func TestClaimsDelegate(t *testing.T) {
	vip := netip.MustParseAddr("198.51.100.7")
	enc := func(node string, version uint64, vips ...netip.Addr) []byte {
		b, err := claims.Message{Node: node, Version: version, VIPs: vips}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		msg     []byte
		refused Refusal // "" none
		want    map[string][]netip.Addr
	}{
		{"malformed", append(enc("n2", 9, vip), 0), RefusedClaimsMalformed, map[string][]netip.Addr{"n2": {}}},
		{"too large", append(enc("n2", 9, vip), make([]byte, claims.MaxMessage)...), RefusedClaimsMalformed, map[string][]netip.Addr{"n2": {}}},
		{"in our name", enc("n1", 9, vip), RefusedClaimsUnexpected, map[string][]netip.Addr{"n2": {}}},
		{"of a non-member", enc("n9", 9, vip), RefusedClaimsUnexpected, map[string][]netip.Addr{"n2": {}}},
		{"older", enc("n2", 4, vip), "", map[string][]netip.Addr{"n2": {}}},
		{"newer", enc("n2", 9, vip), "", map[string][]netip.Addr{"n2": {vip}}},
	} {
		for _, path := range []string{"user message", "push/pull state"} {
			t.Run(tc.name+" by "+path, func(t *testing.T) {
				changes := 0
				m := newMembership(Options{Name: "n1", OnChange: func() { changes++ }}, logr.Discard(), netip.MustParseAddr("127.0.0.1"))
				m.members["n2"] = netip.MustParseAddrPort("127.0.0.2:7946")
				d := delegate{m}
				d.MergeRemoteState(enc("n2", 5), true)
				changes = 0
				if path == "user message" {
					d.NotifyMsg(tc.msg)
				} else {
					d.MergeRemoteState(tc.msg, false)
				}
				if diff := cmp.Diff(tc.want, m.Claims(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("claims (-want +got):\n%s", diff)
				}
				for _, r := range []Refusal{RefusedClaimsMalformed, RefusedClaimsUnexpected, RefusedPingMalformed} {
					want := 0.0
					if r == tc.refused {
						want = 1
					}
					if got := testutil.ToFloat64(m.metrics.Refused.WithLabelValues(string(r))); got != want {
						t.Errorf("refused %s: %v, want %v", r, got, want)
					}
				}
				if wantChange := tc.name == "newer"; (changes == 1) != wantChange {
					t.Errorf("%d change notifications, want a change: %v", changes, wantChange)
				}
			})
		}
	}

	t.Run("leave, join, change", func(t *testing.T) {
		m := newMembership(Options{Name: "n1"}, logr.Discard(), netip.MustParseAddr("127.0.0.1"))
		ev, d := events{m}, delegate{m}
		ev.NotifyJoin(&memberlist.Node{Name: "n2", Addr: net.ParseIP("127.0.0.2"), Port: 7946, Meta: d.NodeMeta(512)})
		ev.NotifyJoin(&memberlist.Node{Name: "old", Addr: net.ParseIP("127.0.0.4"), Port: 7946}) // no claims: an older speaker
		if m.claimsDue["n2"] != claimsResends || m.bcast.NumQueued() != 1 {
			t.Errorf("after a join: due %v, queued %d; want n2 due %d times, one broadcast", m.claimsDue, m.bcast.NumQueued(), claimsResends)
		}
		// n2 sends claims (its metadata says so): an empty entry until they arrive; the older
		// speaker has none.
		if diff := cmp.Diff(map[string][]netip.Addr{"n2": {}}, m.Claims()); diff != "" {
			t.Errorf("claims before any arrived (-want +got):\n%s", diff)
		}
		ev.NotifyLeave(&memberlist.Node{Name: "old"})
		d.NotifyMsg(enc("n2", 5, vip))
		ev.NotifyLeave(&memberlist.Node{Name: "n2", Addr: net.ParseIP("127.0.0.2"), Port: 7946})
		if got := m.Claims(); len(got) != 0 || len(m.claimsDue) != 0 {
			t.Errorf("after n2 left: claims %v, due %v", got, m.claimsDue)
		}
		ev.NotifyJoin(&memberlist.Node{Name: "n3", Addr: net.ParseIP("127.0.0.3"), Port: 7946})
		delete(m.claimsDue, "n3")
		if err := m.SetClaims([]netip.Addr{vip}); err != nil {
			t.Fatal(err)
		}
		own, err := claims.Decode(d.LocalState(false))
		if err != nil || !cmp.Equal(own.VIPs, []netip.Addr{vip}, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
			t.Errorf("LocalState: %v, %v; want our claim of %s", own, err, vip)
		}
		if m.claimsDue["n3"] != claimsResends || m.bcast.NumQueued() != 1 {
			t.Errorf("after a change: due %v, queued %d; want n3 due, one broadcast (the newer replaces the older)", m.claimsDue, m.bcast.NumQueued())
		}
		bs := d.GetBroadcasts(0, 1400)
		if len(bs) != 1 || string(bs[0]) != string(d.LocalState(false)) {
			t.Errorf("broadcasts %d, want our current claims", len(bs))
		}
	})
}
