package dataplane

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

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
	cookieOf map[*balancer.Endpoint]string // and back
	tls      *tlsDest                      // https and grpcs backends (set by Swap)
}

func compile(t *table.Table, reg *balancer.Registry, affinityKey []byte) *router {
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
			p.cookieOf = make(map[*balancer.Endpoint]string, len(p.eps))
			for _, e := range p.eps {
				v := cookieValue(affinityKey, e.Addr)
				p.byCookie[v], p.cookieOf[e] = e, v
			}
		}
		r.pools[be] = p
	}
	reg.Retain(keep)
	return r
}

// cookieValue names an endpoint in an affinity cookie: an HMAC-SHA256 of its address under
// the install's key, cut to 128 bits. A plain hash of "ip:port" could be reversed by trying
// the pod network's few million addresses; without the key neither the address nor the
// cookie of a chosen endpoint can be computed.
func cookieValue(key []byte, addr string) string {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write([]byte(addr))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
