package dataplane

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"

	"github.com/metalgate/metalgate/proxy/table"
)

// Cookie affinity has two modes (ingress-nginx's affinity-mode):
//
//   - persistent: the cookie names the endpoint (an HMAC of its address, cookieValue); a
//     session stays on it for as long as it exists and is healthy. Scaling up moves no
//     session: new endpoints get only new sessions.
//   - balanced (the default): the cookie holds a random session key, which a consistent hash
//     ring over the endpoints (pool.ring) maps to one. Adding endpoints moves about 1/n of
//     the sessions onto the new ones, so that a scale-up takes load at once; removing one
//     moves only its own sessions. Every replica maps a key alike (the ring's hash is fixed).
//
// Either way, a session whose endpoint is unhealthy goes elsewhere for that request: a
// persistent one is given a new cookie, a balanced one keeps its key.

// maxSessionKey bounds the session keys a balanced cookie may carry; longer ones are
// replaced.
const maxSessionKey = 64

// affinity reads the affinity cookie of r for pool p into a: the endpoint it pins, and, for
// a balanced pool, its session key (a new one, to be set, when it has none usable).
func affinity(r *http.Request, p *pool, a *attempt) {
	bal := &p.backend.Balance
	c, err := r.Cookie(bal.AffinityCookie)
	if p.ring == nil {
		if err == nil {
			a.pinned = p.byCookie[c.Value]
		}
		return
	}
	if err == nil && validSessionKey(c.Value) {
		a.session = c.Value
	} else {
		a.session, a.setCookie = newSessionKey(), true
	}
	a.pinned = p.ring.Pick(a.session, nil)
}

// validSessionKey accepts the keys newSessionKey makes, and any other short base64url text
// (another replica's, or one made by an older version).
func validSessionKey(k string) bool {
	if k == "" || len(k) > maxSessionKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// newSessionKey is 128 random bits, base64url.
func newSessionKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// affinityValue is the affinity cookie's value for the endpoint chosen: the session key of a
// balanced pool, else the endpoint's name.
func (a *attempt) affinityValue() string {
	if a.pool.ring != nil {
		return a.session
	}
	return a.pool.cookieOf[a.chosen]
}

// persistentAffinity reports whether be names endpoints in its affinity cookie.
func persistentAffinity(be *table.Backend) bool {
	return be.Balance.AffinityCookie != "" && be.Balance.AffinityMode == table.AffinityPersistent
}
