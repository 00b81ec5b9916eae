package membership

import "slices"

// Quorum reports whether a speaker named self, seeing the speakers live as alive, may announce.
//
// expected is the set of speakers that should be running: from the API server, the speaker Pods
// that are not terminating on nodes that are Ready (a node that died drops out once the node
// controller marks it NotReady); in static mode, the configured peers. self always counts as
// expected and live.
//
// The rule is a strict majority of expected speakers alive in this speaker's view, with one
// tie-break for even sizes: exactly half is enough when the smallest expected name is among the
// live ones. Two sides of a partition can never both hold quorum (they would need more than
// half each, or half each with the smallest name on both sides), so at most one side answers
// ARP/NDP for an address. The price: when half or more of the speakers fail at once, the rest
// stop announcing until the API server marks the dead nodes NotReady, which shrinks expected.
func Quorum(self string, live map[string]bool, expected []string) bool {
	exp := append(slices.Clone(expected), self)
	slices.Sort(exp)
	exp = slices.Compact(exp)
	n, alive := len(exp), 0
	for _, e := range exp {
		if e == self || live[e] {
			alive++
		}
	}
	switch {
	case 2*alive > n:
		return true
	case 2*alive == n:
		return exp[0] == self || live[exp[0]]
	default:
		return false
	}
}
