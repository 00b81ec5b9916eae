package allocator

import (
	"fmt"
	"runtime"
	"testing"
)

// allocWindow is the number of allocations each benchmark window measures.
const allocWindow = 1000

// benchWindow measures allocations number prefill+1 … prefill+allocWindow of distinct keys
// from pool: each b.N iteration is exactly one Assign of a new key, so ns/op and allocs/op
// (and the explicit ns/alloc and allocs/alloc metrics, which keep the fraction) are per
// allocation. Every allocWindow iterations the timer is stopped and a fresh allocator is
// built and pre-filled with prefill keys, so the timed Assigns always fall inside the
// window: for last1k the allocator already holds prefill addresses. A runtime.GC() before
// each window keeps the setup's garbage from being collected on the clock, and the window's
// 1,000 requests are built after it, so both windows start with their requests equally
// fresh in the cache. Mallocs are counted around the timed windows only, excluding setup.
func benchWindow(b *testing.B, pool Pool, families []Family, prefill int) {
	newReq := func(i int) Request {
		return Request{Key: fmt.Sprintf("bench/svc-%06d", i), Namespace: "bench", Families: families}
	}
	reqs := make([]Request, prefill)
	for i := range reqs {
		reqs[i] = newReq(i)
	}
	window := make([]Request, allocWindow)
	var (
		a       *Allocator
		ms      runtime.MemStats
		m0      uint64
		mallocs uint64
	)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pos := i % allocWindow
		if pos == 0 {
			b.StopTimer()
			if i > 0 {
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - m0
			}
			a = New()
			if _, err := a.SetPools([]Pool{pool}); err != nil {
				b.Fatal(err)
			}
			for _, r := range reqs[:prefill] {
				if _, err := a.Assign(r); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			for j := range window {
				window[j] = newReq(prefill + j)
			}
			runtime.ReadMemStats(&ms)
			m0 = ms.Mallocs
			b.StartTimer()
		}
		if _, err := a.Assign(window[pos]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	mallocs += ms.Mallocs - m0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/alloc")
	b.ReportMetric(float64(mallocs)/float64(b.N), "allocs/alloc")
}

// BenchmarkFillV4Slash16 fills a /16 (65,536 usable addresses, AvoidBuggyIPs off) with
// 65,536 keys and times the first and the last 1,000 allocations.
func BenchmarkFillV4Slash16(b *testing.B) {
	pool := Pool{Name: "v4", Addresses: []string{"100.64.0.0/16"}, AutoAssign: true}
	b.Run("first1k", func(b *testing.B) { benchWindow(b, pool, nil, 0) })
	b.Run("last1k", func(b *testing.B) { benchWindow(b, pool, nil, 65536-allocWindow) })
}

// BenchmarkFillV6Slash64 makes 100,000 allocations from a /64 and times the first and the
// last 1,000.
func BenchmarkFillV6Slash64(b *testing.B) {
	pool := Pool{Name: "v6", Addresses: []string{"2001:db8::/64"}, AutoAssign: true}
	v6 := []Family{IPv6}
	b.Run("first1k", func(b *testing.B) { benchWindow(b, pool, v6, 0) })
	b.Run("last1k", func(b *testing.B) { benchWindow(b, pool, v6, 100000-allocWindow) })
}
