package membership

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
)

// testKeys is the cluster key of the tests' speakers.
var testKeys = Keys{Primary: []byte("metalgate test key, 32 bytes....")}

// admitAll admits the named members at their loopback addresses.
func admitAll(ms []*Membership, addrs map[string]string) {
	nodes := map[string][]netip.Addr{}
	for n, a := range addrs {
		nodes[n] = []netip.Addr{netip.MustParseAddr(a)}
	}
	for _, m := range ms {
		m.Admit(nodes)
	}
}

// TestFailureDetectionUnderOneSecond starts three members on loopback addresses, crashes one
// (Shutdown without Leave: it just stops answering) and measures how long the others take to
// drop it from Live.
func TestFailureDetectionUnderOneSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	const runs = 5
	var took []time.Duration
	for run := range runs {
		took = append(took, detectOnce(t, run))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("crash detection over %d runs: min %v median %v max %v", runs, took[0], took[runs/2], took[runs-1])
	// Designed worst case is ~800ms (docs/speaker.md); the bound is generous for loaded CI cores.
	if took[runs/2] > 2*time.Second {
		t.Errorf("median detection %v, want well under 2s (designed for < 1s)", took[runs/2])
	}
}

func detectOnce(t *testing.T, run int) time.Duration {
	t.Helper()
	changed := make(chan struct{}, 64)
	var ms []*Membership
	addrs := map[string]string{}
	for i := range 3 {
		addrs[fmt.Sprintf("n%d", i+1)] = fmt.Sprintf("127.0.0.%d", 11+i)
	}
	for i := range 3 {
		m, err := New(Options{
			Name:     fmt.Sprintf("n%d", i+1),
			BindAddr: fmt.Sprintf("127.0.0.%d", 11+i),
			BindPort: 17946 + run,
			Keys:     testKeys,
			OnChange: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		t.Cleanup(func() { _ = m.Shutdown() })
	}
	admitAll(ms, addrs)
	for _, m := range ms[1:] {
		if _, err := m.Join([]string{fmt.Sprintf("127.0.0.11:%d", 17946+run)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, changed, func() bool { return len(ms[1].Live()) == 3 && len(ms[2].Live()) == 3 && len(ms[0].Live()) == 3 })
	// Let probing settle into its steady rhythm: the crash is measured from a steady state,
	// which memberlist does not signal; this wait is part of the scenario, not a wait for a
	// result (detection itself is waited for on change events below).
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := ms[0].Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, changed, func() bool { return !ms[1].Live()["n1"] && !ms[2].Live()["n1"] })
	return time.Since(start)
}

// TestLeaveIsImmediate: a speaker that leaves (graceful stop) is gone for the others at once.
func TestLeaveIsImmediate(t *testing.T) {
	changed := make(chan struct{}, 64)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	a, err := New(Options{Name: "a", BindAddr: "127.0.0.21", BindPort: -1, OnChange: notify, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := New(Options{Name: "b", BindAddr: "127.0.0.22", BindPort: -1, OnChange: notify, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	admitAll([]*Membership{a, b}, map[string]string{"a": "127.0.0.21", "b": "127.0.0.22"})
	if _, err := b.Join([]string{fmt.Sprintf("127.0.0.21:%d", a.Port())}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, changed, func() bool { return len(a.Live()) == 2 })
	start := time.Now()
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, changed, func() bool { return !a.Live()["b"] })
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("leave took %v to be seen, want < 500ms", d)
	} else {
		t.Logf("leave seen after %v", d)
	}
}

// waitFor waits until cond holds, re-checking on every membership change.
func waitFor(t *testing.T, limit time.Duration, changed <-chan struct{}, cond func() bool) {
	t.Helper()
	testenv.EventuallyOn(t, limit, "membership condition", changed, testenv.True(cond))
}
