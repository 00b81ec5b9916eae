package dataplane

import (
	"context"
	"crypto/sha256"
	"strconv"
	"sync"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// basicAuth checks credentials against a route's users. bcrypt is slow on purpose (up to a
// few hundred milliseconds at table.MaxBcryptCost), so:
//   - a password already checked is remembered (a bounded cache per namespace of SHA-256
//     digests of Secret version, user and password, never the password itself), so that one
//     namespace's logins cannot evict another's;
//   - every check that hashes goes through slots, which share the checks running at once
//     fairly between namespaces and bound the wait (authslots.go);
//   - a user the Secret does not know is checked against the Secret's decoy hash (the most
//     expensive of its own) under the same slots, so that the answer's time does not tell
//     which users exist.
type basicAuth struct {
	slots *authSlots
	// compare checks a password against an htpasswd hash: table.CheckPassword (tests count
	// or hold the checks).
	compare func(hash, password string) bool
	mu      sync.Mutex
	ok      map[string]map[[32]byte]struct{} // namespace → checked digests
}

// maxAuthCache bounds each namespace's cache of checked passwords.
const maxAuthCache = 1024

// newBasicAuth returns the checks' state; compare nil means table.CheckPassword.
func newBasicAuth(slots int, wait time.Duration, compare func(hash, password string) bool) *basicAuth {
	if compare == nil {
		compare = table.CheckPassword
	}
	return &basicAuth{slots: newAuthSlots(slots, wait), compare: compare, ok: map[string]map[[32]byte]struct{}{}}
}

// check reports whether user and password (hasAuth: the request carried them) are one of
// ba's users, for a route of namespace ns. Errors: errAuthQueueFull and errAuthWait (no slot:
// the caller answers 429 and 503), or ctx's when the client went away while waiting.
func (c *basicAuth) check(ctx context.Context, ns string, ba *table.BasicAuth, user, pass string, hasAuth bool) (bool, error) {
	if !hasAuth || len(ba.Users) == 0 {
		return false, nil
	}
	hash, known := ba.Users[user]
	if !known {
		// The same work as a known user with a wrong password; the result is never used.
		t, err := c.slots.acquire(ctx, ns)
		if err != nil {
			return false, err
		}
		_ = c.compare(ba.Decoy, pass)
		c.slots.done(t)
		return false, nil
	}
	h := sha256.New()
	for _, s := range []string{ba.Version, user, pass} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	var key [32]byte
	h.Sum(key[:0])
	c.mu.Lock()
	_, seen := c.ok[ns][key]
	c.mu.Unlock()
	if seen {
		return true, nil
	}
	t, err := c.slots.acquire(ctx, ns)
	if err != nil {
		return false, err
	}
	good := c.compare(hash, pass)
	c.slots.done(t)
	if good {
		c.mu.Lock()
		seen := c.ok[ns]
		if seen == nil || len(seen) >= maxAuthCache {
			// Users log in again at bcrypt's cost; simpler than an LRU and rare.
			seen = make(map[[32]byte]struct{})
			c.ok[ns] = seen
		}
		seen[key] = struct{}{}
		c.mu.Unlock()
	}
	return good, nil
}
