package dataplane

import (
	"math/rand/v2"

	"github.com/metalgate/metalgate/proxy/table"
)

// pickWeighted chooses one backend of a route's split, each with the probability of its
// share of the weights (every weight is at least 1; a Gateway rule has at most 16).
func pickWeighted(ws []table.Weighted) *table.Weighted {
	total := 0
	for _, w := range ws {
		total += w.Weight
	}
	n := rand.IntN(total)
	for i := range ws {
		if n < ws[i].Weight {
			return &ws[i]
		}
		n -= ws[i].Weight
	}
	return &ws[len(ws)-1]
}
