package allocator

import (
	"math/rand/v2"
	"testing"
)

// TestRunSetModel drives a runSet and a map through the same random operations.
func TestRunSetModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		base u128 // values are base+[0, width)
		span uint64
	}{
		{name: "small offsets", base: u128{}, span: 64},
		{name: "near max", base: u128Max.sub(u128{0, 63}), span: 64},
		{name: "across 64-bit carry", base: u128{0, 1<<64 - 32}, span: 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var s runSet
			model := map[u128]bool{}
			for i := range 20000 {
				k, _ := tc.base.add(u128{0, rng.Uint64N(tc.span)})
				if rng.IntN(2) == 0 {
					if got, want := s.add(k), !model[k]; got != want {
						t.Fatalf("step %d: add(%v) = %v, want %v", i, k, got, want)
					}
					model[k] = true
				} else {
					if got, want := s.remove(k), model[k]; got != want {
						t.Fatalf("step %d: remove(%v) = %v, want %v", i, k, got, want)
					}
					delete(model, k)
				}
				if err := s.checkRuns(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				// firstAbsent must be the smallest value not in the model.
				want := u128{}
				for model[want] {
					want = want.inc()
				}
				got, ok := s.firstAbsent()
				if !ok || got != want {
					t.Fatalf("step %d: firstAbsent = %v,%v, want %v", i, got, ok, want)
				}
			}
		})
	}
}

// TestRunSetDepth checks that the treap stays balanced when the set is fragmented into many
// runs, so that first-free, add and remove stay O(log runs).
func TestRunSetDepth(t *testing.T) {
	var s runSet
	const n = 1 << 16
	for i := range uint64(n) {
		s.add(u128{0, 2 * i}) // every other value: n separate runs, inserted in order
	}
	var depth func(r *run) int
	depth = func(r *run) int {
		if r == nil {
			return 0
		}
		return 1 + max(depth(r.left), depth(r.right))
	}
	if s.runs != n {
		t.Fatalf("runs = %d, want %d", s.runs, n)
	}
	// A treap's expected depth is about 2.99·log2(n) ≈ 48 for 2^16 nodes.
	if d := depth(s.root); d > 64 {
		t.Fatalf("treap depth %d for %d runs", d, n)
	}
	// Filling the holes merges runs: every fill is a lowest-first allocation.
	for i := range uint64(n - 1) {
		off, ok := s.firstAbsent()
		if !ok || off != (u128{0, 2*i + 1}) {
			t.Fatalf("firstAbsent = %v, %v; want %d", off, ok, 2*i+1)
		}
		s.add(off)
	}
	if s.runs != 1 || s.count != 2*n-1 {
		t.Fatalf("after filling: %d runs, %d values", s.runs, s.count)
	}
}

func TestRunSetFull(t *testing.T) {
	var s runSet
	s.add(u128Max)
	s.add(u128{})
	if got, ok := s.firstAbsent(); !ok || got != (u128{0, 1}) {
		t.Fatalf("firstAbsent = %v,%v", got, ok)
	}
	// Fill the whole space as one run by construction: [0, max].
	s = runSet{root: &run{start: u128{}, end: u128Max}, runs: 1}
	if _, ok := s.firstAbsent(); ok {
		t.Fatal("firstAbsent on a full set reported a value")
	}
}
