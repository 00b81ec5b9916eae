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

// TestFailureDetection starts three members on loopback addresses, crashes one (Shutdown
// without Leave: it just stops answering) and checks that the others drop it from Live. How
// fast is a figure, not a pass mark (a loaded machine stretches it): BenchmarkFailureDetection
// reports it (designed for < 1 s, docs/speaker.md), and make bench-failover measures the whole
// failover in network namespaces.
func TestFailureDetection(t *testing.T) {
	took := detectOnce(t, 0, 30*time.Second)
	t.Logf("crash detected in %v", took)
}

// BenchmarkFailureDetection reports the median time the surviving members take to drop a
// crashed one (ms/detection), over b.N crashes.
func BenchmarkFailureDetection(b *testing.B) {
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		took = append(took, detectOnce(b, i%50+1, 10*time.Second))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/detection")
}

// detectOnce crashes one of three members and returns how long the other two took to drop it;
// limit bounds each wait. run picks the port, so runs never share one.
func detectOnce(t testing.TB, run int, limit time.Duration) time.Duration {
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
	waitFor(t, limit, changed, func() bool { return len(ms[1].Live()) == 3 && len(ms[2].Live()) == 3 && len(ms[0].Live()) == 3 })
	// Let probing settle into its steady rhythm: the crash is measured from a steady state,
	// which memberlist does not signal; this wait is part of the scenario, not a wait for a
	// result (detection itself is waited for on change events below).
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := ms[0].Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, limit, changed, func() bool { return !ms[1].Live()["n1"] && !ms[2].Live()["n1"] })
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
func waitFor(t testing.TB, limit time.Duration, changed <-chan struct{}, cond func() bool) {
	t.Helper()
	testenv.EventuallyOn(t, limit, "membership condition", changed, testenv.True(cond))
}
