package allocator

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Holding returns what key holds.
func (a *Allocator) Holding(key string) (Assignment, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.keys[key]
	if h == nil {
		return Assignment{}, false
	}
	return h.assignment(), true
}

// HoldersOf returns the keys holding addr, sorted; nil if none. IPv4-mapped IPv6 addresses
// are looked up as IPv4.
func (a *Allocator) HoldersOf(addr netip.Addr) []string {
	c, err := canonical(addr)
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.holders[addrKey(c)])
}

// PoolOf returns the pool covering addr, the first in preference order (Priority, then
// name) if several overlap. An address excluded by a pool's avoidBuggyIPs is not covered by
// that pool.
func (a *Allocator) PoolOf(addr netip.Addr) (string, bool) {
	c, err := canonical(addr)
	if err != nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.ps.firstCovering(c); p != nil {
		return p.cfg.Name, true
	}
	return "", false
}

// PoolStats counts a pool's addresses. Assigned counts the distinct held addresses inside
// the pool (an address shared by several keys counts once; with overlapping pools an
// address counts in every pool containing it). Available is the number of usable addresses
// (after avoidBuggyIPs) minus Assigned, saturating at math.MaxInt64.
type PoolStats struct {
	AssignedV4, AssignedV6, AvailableV4, AvailableV6 int64
}

// Stats returns the counters of the named pool, and false if there is no such pool.
func (a *Allocator) Stats(pool string) (PoolStats, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.ps.byName[pool]
	if p == nil {
		return PoolStats{}, false
	}
	var assigned, avail [2]u128
	for fi, spans := range p.spans {
		for _, s := range spans {
			used := u128{0, s.used.count}
			assigned[fi] = satAdd(assigned[fi], used)
			avail[fi] = satAdd(avail[fi], freeCount(s))
		}
	}
	return PoolStats{
		AssignedV4:  assigned[fi4].satInt64(),
		AssignedV6:  assigned[fi6].satInt64(),
		AvailableV4: avail[fi4].satInt64(),
		AvailableV6: avail[fi6].satInt64(),
	}, true
}

// freeCount returns the number of usable addresses of s not held, saturating.
func freeCount(s *span) u128 {
	if s.empty {
		return u128{}
	}
	used := u128{0, s.used.count}
	if used == (u128{}) {
		return s.size() // saturates only for a span of all 2^128 addresses
	}
	// maxOff+1-used without overflowing
	return s.maxOff.sub(used.dec())
}

func satAdd(x, y u128) u128 {
	r, over := x.add(y)
	if over {
		return u128Max
	}
	return r
}

// Overlap is a pair of distinct pools whose address ranges intersect.
type Overlap struct {
	PoolA, PoolB string // PoolA < PoolB
	// Prefix is the human-readable intersection: "first-last" pieces joined by ", ", e.g.
	// "192.0.2.0-192.0.2.255".
	Prefix string
}

// Overlaps returns one entry per pair of distinct pools whose address ranges intersect,
// sorted by PoolA then PoolB. Ranges are compared as configured (avoidBuggyIPs is ignored),
// IPv4 pieces before IPv6 ones.
func (a *Allocator) Overlaps() []Overlap {
	a.mu.Lock()
	defer a.mu.Unlock()
	type pair struct{ a, b string }
	type piece struct {
		fi          int
		first, last u128
	}
	pieces := make(map[pair][]piece)
	for fi, segs := range a.ps.segs {
		for _, sg := range segs {
			for i, p := range sg.pools {
				for _, q := range sg.pools[i+1:] {
					k := pair{p.cfg.Name, q.cfg.Name}
					if k.b < k.a {
						k.a, k.b = k.b, k.a
					}
					ps := pieces[k]
					if n := len(ps); n > 0 && ps[n-1].fi == fi && ps[n-1].last != u128Max && ps[n-1].last.inc() == sg.first {
						ps[n-1].last = sg.last
					} else {
						ps = append(ps, piece{fi, sg.first, sg.last})
					}
					pieces[k] = ps
				}
			}
		}
	}
	out := make([]Overlap, 0, len(pieces))
	for k, ps := range pieces {
		s := make([]string, len(ps))
		for i, pc := range ps {
			s[i] = Range{bitsAddr(pc.fi, pc.first), bitsAddr(pc.fi, pc.last)}.String()
		}
		out = append(out, Overlap{PoolA: k.a, PoolB: k.b, Prefix: strings.Join(s, ", ")})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PoolA != out[j].PoolA {
			return out[i].PoolA < out[j].PoolA
		}
		return out[i].PoolB < out[j].PoolB
	})
	return out
}
