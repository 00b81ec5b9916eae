package allocator

import (
	"errors"
	"net/netip"
	"slices"
	"sort"
)

// span is one merged, contiguous range of a pool's addresses of one family, with the set of
// its offsets that are held. Offsets number the span's usable addresses: with avoidBuggy
// (IPv4 only) the addresses ending in .0 and .255 are not usable and get no offset, so the
// usable addresses are contiguous in offset space and both directions of the mapping are
// O(1).
type span struct {
	fi          int
	first, last u128 // raw bounds, inclusive
	avoidBuggy  bool
	base        uint64 // usableBelow(first) when avoidBuggy
	empty       bool   // no usable address (e.g. avoidBuggy and first == last == x.x.x.0)
	maxOff      u128   // offset of the last usable address, when !empty
	used        runSet
}

// buggy reports whether the IPv4 address v ends in .0 or .255.
func buggy(v uint64) bool { return v&0xff == 0 || v&0xff == 0xff }

// usableBelow returns how many IPv4 addresses in [0, v) do not end in .0 or .255.
func usableBelow(v uint64) uint64 {
	r := v & 0xff
	switch r {
	case 0:
	case 0xff:
		r = 254
	default:
		r--
	}
	return (v>>8)*254 + r
}

func newSpan(fi int, first, last u128, avoidBuggy bool) *span {
	s := &span{fi: fi, first: first, last: last, avoidBuggy: avoidBuggy && fi == fi4}
	if !s.avoidBuggy {
		s.maxOff = last.sub(first)
		return s
	}
	s.base = usableBelow(first.lo)
	n := usableBelow(last.lo+1) - s.base // last.lo+1 ≤ 2^32: no overflow
	if n == 0 {
		s.empty = true
	} else {
		s.maxOff = u128{0, n - 1}
	}
	return s
}

// offset returns the offset of x (which must be inside [first, last]) and false if x is not
// usable.
func (s *span) offset(x u128) (u128, bool) {
	if !s.avoidBuggy {
		return x.sub(s.first), true
	}
	if buggy(x.lo) {
		return u128{}, false
	}
	return u128{0, usableBelow(x.lo) - s.base}, true
}

// at is the inverse of offset.
func (s *span) at(off u128) u128 {
	if !s.avoidBuggy {
		r, _ := s.first.add(off)
		return r
	}
	k := s.base + off.lo
	return u128{0, k/254*256 + 1 + k%254}
}

// firstFree returns the lowest usable address of s that nobody holds.
func (s *span) firstFree() (u128, bool) {
	if s.empty {
		return u128{}, false
	}
	off, ok := s.used.firstAbsent()
	if !ok || s.maxOff.less(off) {
		return u128{}, false
	}
	return s.at(off), true
}

// size returns the number of usable addresses, saturating at 2^128-1.
func (s *span) size() u128 {
	if s.empty {
		return u128{}
	}
	if s.maxOff == u128Max {
		return u128Max
	}
	return s.maxOff.inc()
}

// poolState is a validated pool.
type poolState struct {
	cfg   Pool
	rank  int        // position in the preference order
	spans [2][]*span // per family, sorted, disjoint and non-adjacent
}

// spanAt returns the span of p containing x (raw bounds), or nil.
func (p *poolState) spanAt(fi int, x u128) *span {
	ss := p.spans[fi]
	i := sort.Search(len(ss), func(i int) bool { return !ss[i].last.less(x) })
	if i < len(ss) && !x.less(ss[i].first) {
		return ss[i]
	}
	return nil
}

// covers reports whether the canonical address a is a usable address of p.
func (p *poolState) covers(a netip.Addr) bool {
	fi, x := addrBits(a)
	s := p.spanAt(fi, x)
	if s == nil {
		return false
	}
	_, ok := s.offset(x)
	return ok
}

func (p *poolState) coversAll(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !p.covers(a) {
			return false
		}
	}
	return true
}

// hasFamily reports whether p has at least one usable address of family fi.
func (p *poolState) hasFamily(fi int) bool {
	for _, s := range p.spans[fi] {
		if !s.empty {
			return true
		}
	}
	return false
}

// firstFree returns the lowest free usable address of family fi in p.
func (p *poolState) firstFree(fi int) (netip.Addr, bool) {
	for _, s := range p.spans[fi] {
		if x, ok := s.firstFree(); ok {
			return bitsAddr(fi, x), true
		}
	}
	return netip.Addr{}, false
}

// eligible reports whether p's serviceAllocation admits the Service of r: its namespace is
// in Namespaces or matches one of NamespaceSelectors (when either is set), and its labels
// match one of ServiceSelectors (when set).
func (p *poolState) eligible(r *Request) bool {
	c := &p.cfg
	if len(c.Namespaces) > 0 || len(c.NamespaceSelectors) > 0 {
		ok := slices.Contains(c.Namespaces, r.Namespace)
		for _, m := range c.NamespaceSelectors {
			if ok {
				break
			}
			ok = m(r.NamespaceLabels)
		}
		if !ok {
			return false
		}
	}
	if len(c.ServiceSelectors) > 0 {
		for _, m := range c.ServiceSelectors {
			if m(r.ServiceLabels) {
				return true
			}
		}
		return false
	}
	return true
}

// poolBefore orders pools: positive (and negative) priorities ascending, then priority 0
// ("none"), ties by name.
func poolBefore(a, b *Pool) bool {
	if (a.Priority == 0) != (b.Priority == 0) {
		return b.Priority == 0
	}
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.Name < b.Name
}

// segment is a maximal piece of address space, of one family, covered (raw, ignoring
// avoidBuggyIPs) by the same non-empty list of pools, listed in preference order.
type segment struct {
	first, last u128
	pools       []*poolState
}

// poolSet is an immutable validated set of pools plus the indexes built from it. Only the
// spans' used sets change after construction.
type poolSet struct {
	byName map[string]*poolState
	order  []*poolState
	segs   [2][]segment
}

// buildPools validates pools and builds a fresh poolSet with empty used sets.
func buildPools(pools []Pool) (*poolSet, error) {
	ps := &poolSet{byName: make(map[string]*poolState, len(pools))}
	for i := range pools {
		p := &pools[i]
		if p.Name == "" {
			return nil, errorf(ErrInvalidPool, "pool #%d has no name", i)
		}
		if _, dup := ps.byName[p.Name]; dup {
			return nil, errorf(ErrInvalidPool, "pool %q is defined twice; pool names must be unique", p.Name)
		}
		for j, m := range p.NamespaceSelectors {
			if m == nil {
				return nil, errorf(ErrInvalidPool, "pool %q: namespace selector #%d is nil", p.Name, j)
			}
		}
		for j, m := range p.ServiceSelectors {
			if m == nil {
				return nil, errorf(ErrInvalidPool, "pool %q: service selector #%d is nil", p.Name, j)
			}
		}
		st := &poolState{cfg: *p}
		st.cfg.Addresses = slices.Clone(p.Addresses)
		st.cfg.Namespaces = slices.Clone(p.Namespaces)
		st.cfg.NamespaceSelectors = slices.Clone(p.NamespaceSelectors)
		st.cfg.ServiceSelectors = slices.Clone(p.ServiceSelectors)
		var raw [2][][2]u128
		for _, entry := range p.Addresses {
			r, err := ParseRange(entry)
			if err != nil {
				var e *Error
				errors.As(err, &e)
				return nil, &Error{msg: "pool " + quote(p.Name) + ": " + e.msg, sentinels: []error{ErrInvalidPool, ErrInvalidAddress}}
			}
			fi, first := addrBits(r.First)
			_, last := addrBits(r.Last)
			raw[fi] = append(raw[fi], [2]u128{first, last})
		}
		for fi := range raw {
			st.spans[fi] = mergeSpans(fi, raw[fi], p.AvoidBuggyIPs)
		}
		ps.byName[p.Name] = st
		ps.order = append(ps.order, st)
	}
	sort.Slice(ps.order, func(i, j int) bool { return poolBefore(&ps.order[i].cfg, &ps.order[j].cfg) })
	for i, p := range ps.order {
		p.rank = i
	}
	for fi := range ps.segs {
		ps.segs[fi] = buildSegments(fi, ps.order)
	}
	return ps, nil
}

func quote(s string) string { return `"` + s + `"` }

// mergeSpans sorts ranges and merges overlapping or adjacent ones into spans.
func mergeSpans(fi int, rs [][2]u128, avoidBuggy bool) []*span {
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0].less(rs[j][0]) })
	var out []*span
	cur := rs[0]
	for _, r := range rs[1:] {
		if cur[1] == u128Max || !cur[1].inc().less(r[0]) { // overlapping or adjacent
			if cur[1].less(r[1]) {
				cur[1] = r[1]
			}
			continue
		}
		out = append(out, newSpan(fi, cur[0], cur[1], avoidBuggy))
		cur = r
	}
	return append(out, newSpan(fi, cur[0], cur[1], avoidBuggy))
}

// buildSegments cuts the family's address space at every span boundary and records which
// pools cover each piece.
func buildSegments(fi int, order []*poolState) []segment {
	var pts []u128
	for _, p := range order {
		for _, s := range p.spans[fi] {
			pts = append(pts, s.first)
			if s.last != u128Max {
				pts = append(pts, s.last.inc())
			}
		}
	}
	slices.SortFunc(pts, u128.cmp)
	pts = slices.Compact(pts)
	var segs []segment
	for i, pt := range pts {
		last := u128Max
		if i+1 < len(pts) {
			last = pts[i+1].dec()
		}
		var cover []*poolState
		for _, p := range order {
			if p.spanAt(fi, pt) != nil {
				cover = append(cover, p)
			}
		}
		if len(cover) > 0 {
			segs = append(segs, segment{first: pt, last: last, pools: cover})
		}
	}
	return segs
}

// poolsAt returns the pools whose raw ranges contain the canonical address a, in
// preference order.
func (ps *poolSet) poolsAt(a netip.Addr) []*poolState {
	fi, x := addrBits(a)
	segs := ps.segs[fi]
	i := sort.Search(len(segs), func(i int) bool { return !segs[i].last.less(x) })
	if i < len(segs) && !x.less(segs[i].first) {
		return segs[i].pools
	}
	return nil
}

// firstCovering returns the first pool, in preference order, for which a is usable.
func (ps *poolSet) firstCovering(a netip.Addr) *poolState {
	for _, p := range ps.poolsAt(a) {
		if p.covers(a) {
			return p
		}
	}
	return nil
}

// setUsed marks the canonical address a used (or free) in every span that has it as a
// usable address.
func (ps *poolSet) setUsed(a netip.Addr, used bool) {
	fi, x := addrBits(a)
	for _, p := range ps.poolsAt(a) {
		s := p.spanAt(fi, x)
		off, ok := s.offset(x)
		if !ok {
			continue
		}
		if used {
			s.used.add(off)
		} else {
			s.used.remove(off)
		}
	}
}
