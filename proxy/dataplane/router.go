package dataplane

import (
	"encoding/hex"
	"hash/fnv"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// router is a table compiled for serving: each backend with its endpoints and balancer. Like
// the table it is immutable; Swap builds a new one.
type router struct {
	table *table.Table
	pools map[*table.Backend]*pool
}

// pool is one backend ready to serve.
type pool struct {
	backend  *table.Backend
	eps      []*balancer.Endpoint
	bal      balancer.Balancer
	byCookie map[string]*balancer.Endpoint // affinity cookie value → endpoint
}

func compile(t *table.Table, reg *balancer.Registry) *router {
	r := &router{table: t, pools: make(map[*table.Backend]*pool, len(t.Backends))}
	keep := map[string]bool{}
	for _, be := range t.Backends {
		p := &pool{backend: be, eps: make([]*balancer.Endpoint, len(be.Endpoints))}
		for i, a := range be.Endpoints {
			p.eps[i] = reg.Get(a)
			keep[a] = true
		}
		switch be.Balance.Algorithm {
		case table.LeastRequest:
			p.bal = balancer.NewLeastRequest(p.eps)
		case table.EWMA:
			p.bal = balancer.NewEWMA(p.eps)
		case table.Hash:
			p.bal = balancer.NewHash(p.eps)
		default:
			p.bal = balancer.NewRoundRobin(p.eps)
		}
		if be.Balance.AffinityCookie != "" {
			p.byCookie = make(map[string]*balancer.Endpoint, len(p.eps))
			for _, e := range p.eps {
				p.byCookie[cookieValue(e.Addr)] = e
			}
		}
		r.pools[be] = p
	}
	reg.Retain(keep)
	return r
}

// cookieValue names an endpoint in an affinity cookie without revealing its address.
func cookieValue(addr string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(addr))
	return hex.EncodeToString(h.Sum(nil))
}
