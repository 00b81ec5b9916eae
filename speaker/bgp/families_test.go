package bgp

import (
	"runtime"
	"testing"
)

// TestRIBFamilies pins that GoBGP keeps RIBs for IPv4 and IPv6 unicast only (the families
// apiPeer negotiates) by what that saves: with GoBGP's default of every family it knows (52
// tables of 2,048 map shards), one speaker held 9.5 MiB of heap before its first path.
// (GetBgp does not report the families, so the heap is the observable.)
func TestRIBFamilies(t *testing.T) {
	newSpeaker(t, nil) // the first one's one-time costs (GoBGP's package state) do not count
	// The heap one more speaker adds, settled by GC.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	extra := newSpeaker(t, nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(extra)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("one more speaker holds %.1f MiB of heap, want < 4 MiB", float64(grew)/(1<<20))
	} else {
		t.Logf("one more speaker holds %.2f MiB of heap", float64(grew)/(1<<20))
	}
}
