package allocator

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentUse hammers one Allocator from several goroutines (run with -race) and then
// checks its internal consistency.
func TestConcurrentUse(t *testing.T) {
	a := New()
	pools := []Pool{
		{Name: "a", Addresses: []string{"10.0.0.0/26", "2001:db8::/122"}, AutoAssign: true},
		{Name: "b", Addresses: []string{"10.0.1.0/26"}, AutoAssign: true, Priority: 1},
	}
	if _, err := a.SetPools(pools); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				key := fmt.Sprintf("ns/g%d-%d", g, i%20)
				r := Request{Key: key, Namespace: "ns", Policy: FamilyPolicy(i % 3), SharingKey: []string{"", "s"}[i%2], Ports: []Port{{"TCP", int32(i % 7)}}}
				if asg, err := a.Assign(r); err == nil {
					for _, x := range asg.Addresses {
						a.HoldersOf(x)
						a.PoolOf(x)
					}
				}
				switch i % 10 {
				case 3:
					a.Release(key)
				case 7:
					a.Stats("a")
					a.Overlaps()
					a.Holding(key)
				case 9:
					if g == 0 {
						if _, err := a.SetPools(pools[:1+i%2]); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
}
