// Package allocator chooses, records and releases LoadBalancer addresses for Services from a
// set of address pools, as pure in-memory logic with no Kubernetes, I/O or logging dependencies.
//
// Layout:
//
//	doc.go        this comment
//	errors.go     sentinel errors (match them with errors.Is) and the error type that wraps them
//	addr.go       128-bit address arithmetic, Range and ParseRange
//	runset.go     runSet: a treap of runs of used offsets; first-free, add and remove in O(log n)
//	pool.go       validated pool state: merged per-family spans (with the avoidBuggyIPs offset
//	              mapping), pool ordering and the segment index used by PoolOf and Overlaps
//	allocator.go  Allocator: SetPools, Assign, Restore, Release and the sharing rules
//	query.go      read-only queries: Holding, HoldersOf, PoolOf, Stats, Overlaps
//
// Memory is proportional to the number of held addresses, never to the size of a pool: every
// pool range keeps only the set of its used offsets, stored as runs of consecutive offsets, so
// an IPv6 /48 costs as much as a /30 holding the same number of addresses.
package allocator
