package election

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

func nodes(names ...string) []Node {
	out := make([]Node, len(names))
	for i, n := range names {
		out[i] = Node{Name: n, Labels: map[string]string{"name": n}}
	}
	return out
}

func all(ns []Node) map[string]bool {
	m := map[string]bool{}
	for _, n := range ns {
		m[n.Name] = true
	}
	return m
}

func TestCandidates(t *testing.T) {
	vip := netip.MustParseAddr("198.51.100.10")
	zoneA := labels.SelectorFromSet(labels.Set{"zone": "a"})
	base := []Node{
		{Name: "n1", Labels: map[string]string{"zone": "a"}},
		{Name: "n2", Labels: map[string]string{"zone": "b"}},
		{Name: "n3", Labels: map[string]string{"zone": "a"}, Excluded: true},
		{Name: "n4", Labels: map[string]string{"zone": "a"}},
	}
	live := map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true}
	tests := []struct {
		name  string
		req   Request
		nodes []Node
		live  map[string]bool
		want  []string
	}{
		{name: "cluster policy: every live, not excluded node", req: Request{VIP: vip, AnyReady: true}, live: live, want: []string{"n1", "n2", "n4"}},
		{name: "cluster policy without any ready endpoint: nobody", req: Request{VIP: vip}, live: live},
		{name: "dead speaker is no candidate", req: Request{VIP: vip, AnyReady: true}, live: map[string]bool{"n1": true, "n2": false}, want: []string{"n1"}},
		{name: "node selector", req: Request{VIP: vip, AnyReady: true, NodeSelectors: []labels.Selector{zoneA}}, live: live, want: []string{"n1", "n4"}},
		{name: "node selectors are ORed", req: Request{VIP: vip, AnyReady: true, NodeSelectors: []labels.Selector{zoneA, labels.SelectorFromSet(labels.Set{"zone": "b"})}}, live: live, want: []string{"n1", "n2", "n4"}},
		{name: "local: only nodes with a ready endpoint", req: Request{VIP: vip, Local: true, AnyReady: true, ReadyNodes: map[string]bool{"n2": true, "n3": true}}, live: live, want: []string{"n2"}},
		{name: "local without ready endpoint: nobody", req: Request{VIP: vip, Local: true}, live: live},
		{name: "local and selector intersect", req: Request{VIP: vip, Local: true, AnyReady: true, ReadyNodes: map[string]bool{"n2": true, "n4": true}, NodeSelectors: []labels.Selector{zoneA}}, live: live, want: []string{"n4"}},
		{name: "no live speakers", req: Request{VIP: vip, AnyReady: true}, live: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = base
			}
			got := Candidates(tc.req, ns, tc.live)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Candidates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnerExactlyOneAndDeterministic(t *testing.T) {
	ns := []string{"n1", "n2", "n3"}
	rev := []string{"n3", "n2", "n1"}
	for i := range 200 {
		vip := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		a, b := Owner(vip, ns), Owner(vip, rev)
		if a == "" || a != b {
			t.Fatalf("Owner(%s) = %q with one order, %q with the other", vip, a, b)
		}
	}
	if got := Owner(netip.MustParseAddr("2001:db8::1"), nil); got != "" {
		t.Errorf("Owner with no candidates = %q, want \"\"", got)
	}
}

func TestOwnerSpreads(t *testing.T) {
	ns := []string{"node-a", "node-b", "node-c", "node-d"}
	count := map[string]int{}
	const n = 4000
	for i := range n {
		vip := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		count[Owner(vip, ns)]++
	}
	for _, name := range ns {
		// Expect n/4 = 1000 each; a 20% band is ~6 standard deviations.
		if c := count[name]; c < 800 || c > 1200 {
			t.Errorf("node %s owns %d of %d addresses, want about %d: %v", name, c, n, n/len(ns), count)
		}
	}
}

func TestOwnerStableWhenUnrelatedNodeLeaves(t *testing.T) {
	ns := nodes("n1", "n2", "n3", "n4", "n5")
	live := all(ns)
	before := map[netip.Addr]string{}
	for i := range 500 {
		vip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		before[vip] = Elect(Request{VIP: vip, AnyReady: true}, ns, live)
	}
	live["n3"] = false
	moved := 0
	for vip, owner := range before {
		after := Elect(Request{VIP: vip, AnyReady: true}, ns, live)
		switch {
		case owner == "n3":
			if after == "n3" || after == "" {
				t.Fatalf("%s stayed on dead n3 or lost its owner: %q", vip, after)
			}
			moved++
		case after != owner:
			t.Errorf("%s moved from %s to %s although only n3 left", vip, owner, after)
		}
	}
	if moved == 0 {
		t.Fatal("n3 owned nothing; test proves nothing")
	}
	// And back: when n3 returns, exactly its addresses return to it.
	live["n3"] = true
	for vip, owner := range before {
		if after := Elect(Request{VIP: vip, AnyReady: true}, ns, live); after != owner {
			t.Errorf("%s: owner %s after n3 came back, want %s", vip, after, owner)
		}
	}
}

func TestWeightKnownValue(t *testing.T) {
	// Pin the hash input format (node + "#" + vip): every speaker version must agree, or two
	// nodes answer for one address during a rolling upgrade.
	got := fmt.Sprintf("%x", Weight("n1", netip.MustParseAddr("198.51.100.10")))
	if want := "d23da545b51bdc39de5c015724408abea0e317467a97b6d5a64d6bda470c69f5"; got != want {
		t.Errorf("Weight = %s, want %s", got, want)
	}
}
