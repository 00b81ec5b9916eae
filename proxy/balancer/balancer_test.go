package balancer

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func endpoints(n int) []*Endpoint {
	eps := make([]*Endpoint, n)
	for i := range eps {
		eps[i] = &Endpoint{Addr: fmt.Sprintf("10.0.0.%d:8080", i+1)}
	}
	return eps
}

func counts(b Balancer, n int, key func(i int) string) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i++ {
		out[b.Pick(key(i), nil).Addr]++
	}
	return out
}

func TestRoundRobinEven(t *testing.T) {
	eps := endpoints(4)
	got := counts(NewRoundRobin(eps), 400, func(int) string { return "" })
	want := map[string]int{"10.0.0.1:8080": 100, "10.0.0.2:8080": 100, "10.0.0.3:8080": 100, "10.0.0.4:8080": 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
}

func TestRoundRobinSkipsEjectedAndTried(t *testing.T) {
	eps := endpoints(3)
	now := time.Now()
	for i := 0; i < 3; i++ {
		eps[1].Failed(3, time.Minute, now)
	}
	b := NewRoundRobin(eps)
	got := counts(b, 300, func(int) string { return "" })
	if got[eps[1].Addr] != 0 {
		t.Errorf("ejected endpoint picked %d times", got[eps[1].Addr])
	}
	if e := b.Pick("", func(e *Endpoint) bool { return e != eps[2] }); e != eps[2] {
		t.Errorf("Pick with skip = %v, want %v", e.Addr, eps[2].Addr)
	}
	eps[1].Succeeded()
	if !eps[1].Healthy(now) {
		t.Error("endpoint not back in rotation after a success")
	}
}

func TestPassiveHealthReturns(t *testing.T) {
	e := &Endpoint{Addr: "a"}
	now := time.Now()
	for i := 0; i < 2; i++ {
		if e.Failed(3, time.Second, now) {
			t.Fatalf("ejected after %d failures, want 3", i+1)
		}
	}
	if !e.Failed(3, time.Second, now) || e.Healthy(now) {
		t.Fatal("not ejected after 3 failures")
	}
	if !e.Healthy(now.Add(time.Second)) {
		t.Error("still ejected after the ejection time")
	}
	// A failed retry after the ejection time ejects again at once.
	if !e.Failed(3, time.Second, now.Add(time.Second)) {
		t.Error("not ejected again by one failure after coming back")
	}
}

func TestLeastRequestPrefersLessLoaded(t *testing.T) {
	eps := endpoints(2)
	for i := 0; i < 10; i++ {
		eps[0].Begin()
	}
	got := counts(NewLeastRequest(eps), 100, func(int) string { return "" })
	if diff := cmp.Diff(map[string]int{eps[1].Addr: 100}, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
	// With many endpoints, the loaded one is picked much less often than its fair share.
	eps = endpoints(10)
	for i := 0; i < 5; i++ {
		eps[0].Begin()
	}
	got = counts(NewLeastRequest(eps), 10000, func(int) string { return "" })
	if got[eps[0].Addr] > 0 {
		t.Errorf("loaded endpoint picked %d times of 10000; p2c never picks it when the other draw is idle", got[eps[0].Addr])
	}
}

func TestEWMAPrefersFaster(t *testing.T) {
	eps := endpoints(2)
	eps[0].Begin()(100 * time.Millisecond)
	eps[1].Begin()(time.Millisecond)
	got := counts(NewEWMA(eps), 100, func(int) string { return "" })
	if diff := cmp.Diff(map[string]int{eps[1].Addr: 100}, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
}

func TestHashStableAndMinimalDisruption(t *testing.T) {
	const keys = 10000
	key := func(i int) string { return fmt.Sprintf("user-%d", i) }
	eps := endpoints(10)
	h := NewHash(eps)
	before := make([]string, keys)
	perEndpoint := map[string]int{}
	for i := range before {
		before[i] = h.Pick(key(i), nil).Addr
		perEndpoint[before[i]]++
		if again := h.Pick(key(i), nil).Addr; again != before[i] {
			t.Fatalf("key %d moved from %s to %s without a change", i, before[i], again)
		}
	}
	for a, n := range perEndpoint {
		if math.Abs(float64(n)-keys/10) > keys/10*0.35 {
			t.Errorf("endpoint %s got %d keys, want %d ± 35%%", a, n, keys/10)
		}
	}
	// A rebuilt ring over the same endpoints (a table swap) maps every key the same way.
	h2 := NewHash(endpoints(10))
	for i := range before {
		if got := h2.Pick(key(i), nil).Addr; got != before[i] {
			t.Fatalf("key %d maps to %s after a rebuild, was %s", i, got, before[i])
		}
	}
	// Adding an 11th endpoint moves only keys to it, about 1/11 of them.
	h3 := NewHash(endpoints(11))
	moved := 0
	for i := range before {
		got := h3.Pick(key(i), nil).Addr
		if got != before[i] {
			moved++
			if got != "10.0.0.11:8080" {
				t.Fatalf("key %d moved from %s to %s, not to the new endpoint", i, before[i], got)
			}
		}
	}
	if frac := float64(moved) / keys; frac > 0.15 || frac < 0.04 {
		t.Errorf("%.1f%% of keys moved when 1 of 11 endpoints was added, want about 9%%", frac*100)
	}
}

func TestRegistryKeepsState(t *testing.T) {
	r := NewRegistry()
	a := r.Get("a")
	a.Begin()
	if r.Get("a") != a || r.Get("a").InFlight() != 1 {
		t.Fatal("registry lost the endpoint's state")
	}
	r.Retain(map[string]bool{})
	if r.Get("a") == a {
		t.Error("retain kept a dropped endpoint")
	}
}
