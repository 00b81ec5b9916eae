package dataplane

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strconv"
	"sync"

	"github.com/metalgate/metalgate/proxy/table"
)

// basicAuth checks a request's credentials against the route's users. bcrypt is slow on
// purpose (tens of milliseconds at usual costs), so a password already checked is
// remembered (a bounded cache of SHA-256 digests of secret version, user and password, never
// the password itself), and at most a few checks run at once, so that a stream of wrong
// passwords cannot take every core.
type basicAuth struct {
	slots chan struct{}
	mu    sync.Mutex
	ok    map[[32]byte]struct{}
}

const maxAuthCache = 10_000

func newBasicAuth() *basicAuth {
	return &basicAuth{slots: make(chan struct{}, 4), ok: map[[32]byte]struct{}{}}
}

// check reports whether r carries a user and password of ba; an error when ctx ended while
// waiting for a slot.
func (c *basicAuth) check(ctx context.Context, r *http.Request, ba *table.BasicAuth) (bool, error) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false, nil
	}
	hash, known := ba.Users[user]
	if !known {
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
	_, seen := c.ok[key]
	c.mu.Unlock()
	if seen {
		return true, nil
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	good := table.CheckPassword(hash, pass)
	<-c.slots
	if good {
		c.mu.Lock()
		if len(c.ok) >= maxAuthCache {
			clear(c.ok) // users log in again at bcrypt's cost; simpler than an LRU and rare
		}
		c.ok[key] = struct{}{}
		c.mu.Unlock()
	}
	return good, nil
}
