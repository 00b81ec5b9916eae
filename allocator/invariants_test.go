package allocator

import (
	"fmt"
	"net/netip"
	"slices"
)

// check verifies the allocator's internal consistency: holdings, the holder index, the
// sharing index, sharing compatibility and every span's used set. Tests call it after
// every mutation.
func (a *Allocator) check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, h := range a.keys {
		p := a.ps.byName[h.pool]
		if p == nil {
			return fmt.Errorf("%s: recorded pool %q does not exist", key, h.pool)
		}
		if h.n == 0 || h.n > 2 || h.self[0] != key {
			return fmt.Errorf("%s holds %d addresses (self %q)", key, h.n, h.self[0])
		}
		if h.n == 2 && famIndex(h.buf[0]) == famIndex(h.buf[1]) {
			return fmt.Errorf("%s holds two addresses of one family: %v", key, h.addrs())
		}
		if h.req.NamespaceLabels != nil || h.req.ServiceLabels != nil {
			return fmt.Errorf("%s: stored request keeps label maps", key)
		}
		for _, x := range h.addrs() {
			if !p.covers(x) {
				return fmt.Errorf("%s: address %s is not in its pool %q", key, x, h.pool)
			}
			if _, ok := slices.BinarySearch(a.holders[addrKey(x)], key); !ok {
				return fmt.Errorf("%s holds %s but is not among its holders %v", key, x, a.holders[addrKey(x)])
			}
		}
		if sk := h.req.SharingKey; sk != "" {
			if _, ok := a.sharing[sk][key]; !ok {
				return fmt.Errorf("%s: missing from sharing group %q", key, sk)
			}
		}
	}
	for k, hs := range a.holders {
		x := keyAddr(k)
		if addrKey(x) != k {
			return fmt.Errorf("holders key %v does not round-trip", k)
		}
		if len(hs) == 0 || !slices.IsSorted(hs) || len(slices.Compact(slices.Clone(hs))) != len(hs) {
			return fmt.Errorf("holders of %s: %v", x, hs)
		}
		for i, k := range hs {
			h := a.keys[k]
			if h == nil || !slices.Contains(h.addrs(), x) {
				return fmt.Errorf("%s listed as holder of %s but does not hold it", k, x)
			}
			for _, k2 := range hs[i+1:] {
				if err := conflict(&h.req, x, k2, &a.keys[k2].req, scopeOf(a.ps.byName[h.pool], a.ps.byName[a.keys[k2].pool])); err != nil {
					return fmt.Errorf("incompatible holders of %s: %v", x, err)
				}
			}
		}
	}
	for sk, g := range a.sharing {
		if len(g) == 0 {
			return fmt.Errorf("empty sharing group %q", sk)
		}
		for k := range g {
			if h := a.keys[k]; h == nil || h.req.SharingKey != sk {
				return fmt.Errorf("sharing group %q lists %s", sk, k)
			}
		}
	}
	for _, p := range a.ps.order {
		for fi, spans := range p.spans {
			for _, s := range spans {
				if err := a.checkSpan(p, fi, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (a *Allocator) checkSpan(p *poolState, fi int, s *span) error {
	var want uint64
	for k := range a.holders {
		x := keyAddr(k)
		xfi, v := addrBits(x)
		if xfi != fi || v.less(s.first) || s.last.less(v) {
			continue
		}
		off, ok := s.offset(v)
		if !ok {
			continue
		}
		want++
		if !s.used.contains(off) {
			return fmt.Errorf("pool %q: held address %s not marked used", p.cfg.Name, x)
		}
		if s.at(off) != v {
			return fmt.Errorf("pool %q: offset mapping of %s is not invertible", p.cfg.Name, x)
		}
	}
	if s.used.count != want {
		return fmt.Errorf("pool %q span %s: used count %d, held addresses %d", p.cfg.Name,
			Range{bitsAddr(fi, s.first), bitsAddr(fi, s.last)}, s.used.count, want)
	}
	return s.used.checkRuns()
}

// checkRuns verifies that runs are sorted, disjoint, non-adjacent, that the count matches,
// and that the treap heap property holds.
func (s *runSet) checkRuns() error {
	var n int
	var total uint64
	var prev *[2]u128
	var err error
	s.walk(func(start, end u128) bool {
		n++
		if end.less(start) {
			err = fmt.Errorf("run %v-%v reversed", start, end)
			return false
		}
		if prev != nil && (prev[1] == u128Max || !prev[1].inc().less(start)) {
			err = fmt.Errorf("runs %v and %v-%v overlap or touch", *prev, start, end)
			return false
		}
		total += end.sub(start).lo + 1
		prev = &[2]u128{start, end}
		return true
	})
	if err != nil {
		return err
	}
	if n != s.runs || total != s.count {
		return fmt.Errorf("runSet: %d runs / %d values, counters say %d / %d", n, total, s.runs, s.count)
	}
	var heap func(t *run) bool
	heap = func(t *run) bool {
		if t == nil {
			return true
		}
		for _, c := range []*run{t.left, t.right} {
			if c != nil && c.prio > t.prio {
				return false
			}
		}
		return heap(t.left) && heap(t.right)
	}
	if !heap(s.root) {
		return fmt.Errorf("runSet: heap property violated")
	}
	return nil
}

// universe lists every address in the given prefixes (test helper for small prefixes).
func universe(prefixes ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range prefixes {
		p := netip.MustParsePrefix(s)
		for x := p.Addr(); p.Contains(x); x = x.Next() {
			out = append(out, x)
		}
	}
	return out
}
