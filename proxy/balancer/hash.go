package balancer

import (
	"hash/fnv"
	"sort"
	"strconv"
	"time"
)

// replicas is the number of points each endpoint has on the ring. More points spread keys more
// evenly; 100 keeps the spread within a few percent for small backends.
const replicas = 100

// Hash is a consistent-hash ring (Karger et al.): a key goes to the first endpoint point at or
// after its hash. Adding or removing one endpoint of n moves only about 1/n of the keys. The
// hash is FNV-1a, fixed, so every proxy replica maps a key to the same endpoint.
type Hash struct {
	eps    []*Endpoint
	points []uint64
	owner  []int32 // index into eps of each point
}

// NewHash builds a ring over eps.
func NewHash(eps []*Endpoint) *Hash {
	h := &Hash{eps: eps}
	type pt struct {
		h uint64
		i int32
	}
	pts := make([]pt, 0, len(eps)*replicas)
	for i, e := range eps {
		for r := 0; r < replicas; r++ {
			pts = append(pts, pt{hash64(e.Addr + "#" + strconv.Itoa(r)), int32(i)})
		}
	}
	sort.Slice(pts, func(a, b int) bool { return pts[a].h < pts[b].h })
	h.points = make([]uint64, len(pts))
	h.owner = make([]int32, len(pts))
	for i, p := range pts {
		h.points[i], h.owner[i] = p.h, p.i
	}
	return h
}

func hash64(s string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(s))
	// FNV-1a's high bits mix poorly for short, similar inputs; finish with a 64-bit mixer
	// (the murmur3 finalizer) so ring points spread evenly.
	x := f.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Pick implements Balancer: the owner of the first point at or after hash(key), walking on
// past unusable endpoints.
func (h *Hash) Pick(key string, skip func(*Endpoint) bool) *Endpoint {
	if len(h.points) == 0 {
		return nil
	}
	now := time.Now()
	k := hash64(key)
	start := sort.Search(len(h.points), func(i int) bool { return h.points[i] >= k })
	for i := 0; i < len(h.points); i++ {
		e := h.eps[h.owner[(start+i)%len(h.points)]]
		if usable(e, skip, now) {
			return e
		}
		if i > len(h.eps)*2 && i > 64 {
			break // every endpoint seen many times over: all unusable
		}
	}
	return fallback(h.eps, skip)
}
