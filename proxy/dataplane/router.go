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
	table  *table.Table
	pools  map[*table.Backend]*pool
	series *tableSeries // the routes' metrics (nil without Metrics)
}

// pool is one backend ready to serve.
type pool struct {
	backend  *table.Backend
	eps      []*balancer.Endpoint
	bal      balancer.Balancer
	byCookie map[string]*balancer.Endpoint // affinity cookie value → endpoint
	cookieOf map[*balancer.Endpoint]string // and back
	ring     *balancer.Hash                // session key → endpoint, for balanced affinity (affinitymode.go)
	tls      *tlsDest                      // https and grpcs backends (set by Swap)
}

// compile makes the router of t. A backend of t that prev serves already (the same
// *table.Backend: a table is immutable, so the same pointer is the same endpoints and
// policy) keeps its pool, balancer state and affinity maps included: a table patched for an
// endpoint change (table.PatchEndpoints) recompiles only the backends it replaced. added and
// removed are the pools that t has and prev had not, and the other way round.
func compile(t *table.Table, prev *router, reg *balancer.Registry, affinityKey []byte) (r *router, added, removed []*pool) {
	r = &router{table: t, pools: make(map[*table.Backend]*pool, len(t.Backends))}
	for _, be := range t.Backends {
		if p := prev.pool(be); p != nil {
			r.pools[be] = p
			continue
		}
		p := newPool(be, reg, affinityKey)
		r.pools[be] = p
		added = append(added, p)
	}
	if prev != nil {
		for be, p := range prev.pools {
			if r.pools[be] == nil {
				removed = append(removed, p)
			}
		}
	}
	return r, added, removed
}

// pool returns the pool of be, or nil (r may be nil: no table yet).
func (r *router) pool(be *table.Backend) *pool {
	if r == nil {
		return nil
	}
	return r.pools[be]
}

func newPool(be *table.Backend, reg *balancer.Registry, affinityKey []byte) *pool {
	p := &pool{backend: be, eps: make([]*balancer.Endpoint, len(be.Endpoints))}
	for i, a := range be.Endpoints {
		p.eps[i] = reg.Get(a)
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
	if be.Balance.AffinityCookie != "" && !persistentAffinity(be) {
		p.ring = balancer.NewHash(p.eps)
	} else if be.Balance.AffinityCookie != "" {
		p.byCookie = make(map[string]*balancer.Endpoint, len(p.eps))
		p.cookieOf = make(map[*balancer.Endpoint]string, len(p.eps))
		for _, e := range p.eps {
			v := cookieValue(affinityKey, e.Addr)
			p.byCookie[v], p.cookieOf[e] = e, v
		}
	}
	return p
}

// endpointRefs counts, per endpoint address, the pools of the current router that hold it.
// An address no pool holds any more is forgotten: its balancer state and its pooled
// connections go (a pod IP is reused by other pods, maybe another tenant's, and a connection
// kept to it must never carry a request the new owner was not meant to get).
type endpointRefs map[string]int

// update counts the added pools in and the removed ones out, and returns the addresses no
// pool holds any more. Added pools count first: an address moving from one pool to another
// is never dropped on the way.
func (refs endpointRefs) update(added, removed []*pool) (dropped map[string]bool) {
	for _, p := range added {
		for _, e := range p.eps {
			refs[e.Addr]++
		}
	}
	for _, p := range removed {
		for _, e := range p.eps {
			if refs[e.Addr]--; refs[e.Addr] <= 0 {
				delete(refs, e.Addr)
				if dropped == nil {
					dropped = map[string]bool{}
				}
				dropped[e.Addr] = true
			}
		}
	}
	return dropped
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
