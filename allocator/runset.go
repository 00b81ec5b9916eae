package allocator

// runSet is a set of u128 values (offsets inside a span) stored as maximal runs of
// consecutive values, kept in a treap ordered by run start. Memory is O(number of runs) ≤
// O(number of values); a span filled sequentially is a single run. add, remove, contains
// and firstAbsent cost O(log runs) expected; priorities come from a deterministic generator,
// so behaviour is reproducible.
type runSet struct {
	root  *run
	seed  uint64
	count uint64 // number of values in the set
	runs  int    // number of runs (tree nodes)
}

type run struct {
	start, end  u128 // inclusive
	prio        uint64
	left, right *run
}

// nextPrio is splitmix64.
func (s *runSet) nextPrio() uint64 {
	s.seed += 0x9e3779b97f4a7c15
	z := s.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// floor returns the run with the greatest start ≤ k, or nil.
func (s *runSet) floor(k u128) *run {
	var best *run
	for n := s.root; n != nil; {
		if k.less(n.start) {
			n = n.left
		} else {
			best = n
			n = n.right
		}
	}
	return best
}

// ceil returns the run with the smallest start ≥ k, or nil.
func (s *runSet) ceil(k u128) *run {
	var best *run
	for n := s.root; n != nil; {
		if n.start.less(k) {
			n = n.right
		} else {
			best = n
			n = n.left
		}
	}
	return best
}

func (s *runSet) contains(k u128) bool {
	r := s.floor(k)
	return r != nil && !r.end.less(k)
}

// firstAbsent returns the smallest value ≥ 0 not in the set, and false if every u128 is in
// the set.
func (s *runSet) firstAbsent() (u128, bool) {
	n := s.root
	if n == nil {
		return u128{}, true
	}
	for n.left != nil {
		n = n.left
	}
	if n.start != (u128{}) {
		return u128{}, true
	}
	if n.end == u128Max {
		return u128{}, false
	}
	return n.end.inc(), true
}

// add inserts k; it reports false if k was already present.
func (s *runSet) add(k u128) bool {
	prev := s.floor(k)
	if prev != nil && !prev.end.less(k) {
		return false
	}
	next := s.ceil(k) // no run starts at k, so this is the first run after k
	joinPrev := prev != nil && prev.end.inc() == k
	joinNext := next != nil && k.inc() == next.start
	switch {
	case joinPrev && joinNext:
		end := next.end
		s.root = deleteRun(s.root, next.start)
		s.runs--
		prev.end = end
	case joinPrev:
		prev.end = k
	case joinNext:
		// No run starts in (prev.start, next.start), so moving next's start down to k keeps
		// the tree ordered.
		next.start = k
	default:
		s.root = insertRun(s.root, &run{start: k, end: k, prio: s.nextPrio()})
		s.runs++
	}
	s.count++
	return true
}

// remove deletes k; it reports false if k was absent.
func (s *runSet) remove(k u128) bool {
	r := s.floor(k)
	if r == nil || r.end.less(k) {
		return false
	}
	switch {
	case r.start == k && r.end == k:
		s.root = deleteRun(s.root, k)
		s.runs--
	case r.start == k:
		r.start = k.inc() // still ≤ r.end < the next run's start
	case r.end == k:
		r.end = k.dec()
	default:
		end := r.end
		r.end = k.dec()
		s.root = insertRun(s.root, &run{start: k.inc(), end: end, prio: s.nextPrio()})
		s.runs++
	}
	s.count--
	return true
}

// walk calls fn for every run in ascending order until fn returns false.
func (s *runSet) walk(fn func(start, end u128) bool) {
	var rec func(n *run) bool
	rec = func(n *run) bool {
		if n == nil {
			return true
		}
		return rec(n.left) && fn(n.start, n.end) && rec(n.right)
	}
	rec(s.root)
}

func insertRun(t, n *run) *run {
	if t == nil {
		return n
	}
	if n.prio > t.prio {
		n.left, n.right = splitRuns(t, n.start)
		return n
	}
	if n.start.less(t.start) {
		t.left = insertRun(t.left, n)
	} else {
		t.right = insertRun(t.right, n)
	}
	return t
}

// splitRuns splits t into the runs starting before k and the runs starting at or after k.
func splitRuns(t *run, k u128) (lo, hi *run) {
	if t == nil {
		return nil, nil
	}
	if t.start.less(k) {
		t.right, hi = splitRuns(t.right, k)
		return t, hi
	}
	lo, t.left = splitRuns(t.left, k)
	return lo, t
}

func mergeRuns(lo, hi *run) *run {
	switch {
	case lo == nil:
		return hi
	case hi == nil:
		return lo
	case lo.prio > hi.prio:
		lo.right = mergeRuns(lo.right, hi)
		return lo
	default:
		hi.left = mergeRuns(lo, hi.left)
		return hi
	}
}

func deleteRun(t *run, k u128) *run {
	if t == nil {
		return nil
	}
	switch k.cmp(t.start) {
	case -1:
		t.left = deleteRun(t.left, k)
	case 1:
		t.right = deleteRun(t.right, k)
	default:
		return mergeRuns(t.left, t.right)
	}
	return t
}
