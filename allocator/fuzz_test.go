package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fuzzPoolSets are the pool sets FuzzNoAddressHeldTwice switches between: small pools,
// dual-stack, autoAssign=false, avoidBuggyIPs, overlaps, serviceAllocation, and none.
var fuzzPoolSets = [][]Pool{
	{
		{Name: "A", Addresses: []string{"10.0.0.0/29"}, AutoAssign: true, Priority: 1},
		{Name: "B", Addresses: []string{"2001:db8::/126"}, AutoAssign: true},
		{Name: "C", Addresses: []string{"10.0.0.8-10.0.0.11", "2001:db8::4/126"}},
	},
	{
		{Name: "A", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true, AvoidBuggyIPs: true},
		{Name: "D", Addresses: []string{"10.0.0.4/30", "2001:db8::/125"}, AutoAssign: true, Priority: 2},
		{Name: "C", Addresses: []string{"10.0.0.8/31"}},
	},
	{
		{Name: "A", Addresses: []string{"10.0.0.0/28"}, AutoAssign: true, Priority: 3},
		{Name: "B", Addresses: []string{"10.0.0.4-10.0.0.12", "2001:db8::2-2001:db8::9"}, AutoAssign: true, Priority: 1},
		{Name: "E", Addresses: []string{"2001:db8::/124"}, AutoAssign: true, Namespaces: []string{"ns1"}},
	},
	nil,
}

var (
	fuzzUniverse = universe("10.0.0.0/28", "2001:db8::/124")
	fuzzKeys     = []string{"ns0/a", "ns1/b", "ns0/c", "ns1/d", "ns0/e", "ns1/f"}
	fuzzPorts    = []Port{{"TCP", 80}, {"TCP", 443}, {"UDP", 53}, {"udp", 80}}
	fuzzFamilies = [][]Family{nil, {IPv4}, {IPv6}, {IPv6, IPv4}, {IPv4, IPv6}}
	fuzzPools    = []string{"", "", "", "A", "C", "nope"}
)

// fuzzOps reads operations from the fuzz input; reads past the end return 0.
type fuzzOps struct{ data []byte }

func (o *fuzzOps) next(n int) int {
	if len(o.data) == 0 {
		return 0
	}
	b := o.data[0]
	o.data = o.data[1:]
	return int(b) % n
}

func (o *fuzzOps) request() Request {
	key := fuzzKeys[o.next(len(fuzzKeys))]
	ns, _, _ := strings.Cut(key, "/")
	r := Request{Key: key, Namespace: ns}
	r.SharingKey = []string{"", "s1", "s2"}[o.next(3)]
	mask := o.next(16)
	for i, p := range fuzzPorts {
		if mask&(1<<i) != 0 {
			r.Ports = append(r.Ports, p)
		}
	}
	r.BackendKey = []string{"", "", "b1"}[o.next(3)]
	r.Policy = FamilyPolicy(o.next(3))
	r.Families = fuzzFamilies[o.next(len(fuzzFamilies))]
	r.Pool = fuzzPools[o.next(len(fuzzPools))]
	return r
}

func (o *fuzzOps) addrs() []netip.Addr {
	var out []netip.Addr
	switch o.next(4) {
	case 1:
		out = append(out, fuzzUniverse[o.next(16)])
	case 2:
		out = append(out, fuzzUniverse[16+o.next(16)])
	case 3:
		out = append(out, fuzzUniverse[o.next(16)], fuzzUniverse[16+o.next(16)])
	}
	return out
}

// FuzzNoAddressHeldTwice runs random operations on small pools and checks after every step
// that no address is held by two keys unless they may share it, that every held address is
// in a pool, and that Holding and HoldersOf agree.
func FuzzNoAddressHeldTwice(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 0, 0, 1, 1, 3, 1, 0, 0, 0, 2, 1, 3, 1, 0, 0, 0, 0, 1, 5, 2, 0, 3, 1, 5, 1, 0, 0, 0, 0, 6, 4, 2, 0, 1, 0, 0, 0, 3, 7, 18, 5, 3, 4, 2})
	f.Add([]byte("sharing all the addresses with every key, then switching pools around a few times"))
	f.Add([]byte{5, 2, 0, 0, 1, 3, 0, 1, 3, 0, 1, 2, 1, 3, 0, 1, 3, 0, 2, 2, 5, 2, 0, 3, 0, 0, 1, 1, 0, 2, 0, 1, 5, 1, 4, 0, 5, 0, 6, 1, 1, 3, 0, 0, 3, 1, 4, 7, 5, 3})
	f.Fuzz(runFuzzOps)
}

func runFuzzOps(t *testing.T, data []byte) {
	{
		a := New()
		if _, err := a.SetPools(fuzzPoolSets[0]); err != nil {
			t.Fatal(err)
		}
		model := map[string]Request{} // the request each holding key was last assigned or restored with
		ops := &fuzzOps{data: data}
		for step := 0; len(ops.data) > 0 && step < 100; step++ {
			var desc func() string
			switch op := ops.next(8); op {
			case 0, 1, 2, 3:
				r := ops.request()
				if op == 3 {
					r.Addresses = ops.addrs()
				}
				desc = func() string { return fmt.Sprintf("Assign(%+v)", r) }
				got, err := a.Assign(r)
				switch {
				case err == nil:
					model[r.Key] = r
					again, err := a.Assign(r)
					if err != nil || !slices.Equal(again.Addresses, got.Addresses) || again.Pool != got.Pool {
						t.Fatalf("step %d %s: not idempotent: %v then %v, %v", step, desc(), got, again, err)
					}
				case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrInvalidAddress):
					// rejected before touching the key
				default:
					delete(model, r.Key)
				}
			case 4:
				key := fuzzKeys[ops.next(len(fuzzKeys))]
				desc = func() string { return "Release(" + key + ")" }
				a.Release(key)
				delete(model, key)
			case 5:
				i := ops.next(len(fuzzPoolSets))
				desc = func() string { return fmt.Sprintf("SetPools(set %d)", i) }
				released, err := a.SetPools(fuzzPoolSets[i])
				if err != nil {
					t.Fatalf("step %d %s: %v", step, desc(), err)
				}
				for _, k := range released {
					delete(model, k)
				}
			case 6:
				r := ops.request()
				addrs := ops.addrs()
				desc = func() string { return fmt.Sprintf("Restore(%+v, %v)", r, addrs) }
				before, _ := a.Holding(r.Key)
				if _, err := a.Restore(r, addrs); err == nil {
					model[r.Key] = r
				} else if after, _ := a.Holding(r.Key); !slices.Equal(before.Addresses, after.Addresses) {
					t.Fatalf("step %d %s failed (%v) but changed the key's holding from %v to %v", step, desc(), err, before, after)
				}
			case 7:
				desc = func() string { return "Overlaps/Stats" }
				a.Overlaps()
				for _, p := range []string{"A", "B", "C", "D", "E"} {
					a.Stats(p)
				}
			}
			if err := checkFuzzInvariants(a, model); err != nil {
				t.Fatalf("after step %d %s: %v", step, desc(), err)
			}
		}
	}
}

func checkFuzzInvariants(a *Allocator, model map[string]Request) error {
	if err := a.check(); err != nil {
		return err
	}
	for _, k := range fuzzKeys {
		h, ok := a.Holding(k)
		if _, want := model[k]; ok != want {
			return fmt.Errorf("Holding(%s) = %v, %v; the model says held=%v", k, h, ok, want)
		}
		for _, x := range h.Addresses {
			if !slices.Contains(a.HoldersOf(x), k) {
				return fmt.Errorf("%s holds %s but HoldersOf(%s) = %v", k, x, x, a.HoldersOf(x))
			}
			if _, ok := a.PoolOf(x); !ok {
				return fmt.Errorf("%s holds %s, which is in no pool", k, x)
			}
		}
	}
	for _, x := range fuzzUniverse {
		hs := a.HoldersOf(x)
		for _, k := range hs {
			h, _ := a.Holding(k)
			if !slices.Contains(h.Addresses, x) {
				return fmt.Errorf("HoldersOf(%s) lists %s, which holds %v", x, k, h.Addresses)
			}
		}
		for i, k1 := range hs {
			r1 := model[k1]
			for _, k2 := range hs[i+1:] {
				r2 := model[k2]
				if r1.SharingKey == "" || r1.SharingKey != r2.SharingKey || r1.BackendKey != r2.BackendKey {
					return fmt.Errorf("%s held by %s (%q/%q) and %s (%q/%q)", x, k1, r1.SharingKey, r1.BackendKey, k2, r2.SharingKey, r2.BackendKey)
				}
				for _, p := range r1.Ports {
					for _, q := range r2.Ports {
						if p.Port == q.Port && strings.EqualFold(p.Protocol, q.Protocol) {
							return fmt.Errorf("%s held by %s and %s, both on %v", x, k1, k2, p)
						}
					}
				}
			}
		}
	}
	return nil
}
