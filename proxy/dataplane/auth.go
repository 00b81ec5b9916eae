package dataplane

import (
	"context"
	"crypto/sha256"
	"runtime"
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
//     which users exist;
//   - with nice set, the checks of a namespace that has spent its budget of check time
//     (authslots.go) run on OS threads of their own at a lower priority (hash), so that a
//     namespace that keeps checking passwords takes the CPU only as far as requests leave it.
type basicAuth struct {
	slots *authSlots
	// compare checks a password against an htpasswd hash: table.CheckPassword (tests count
	// or hold the checks).
	compare func(hash, password string) bool
	// nice is the nice value of the threads that hash (1 to 19); 0: hash on the request's
	// goroutine, at the proxy's priority.
	nice int
	mu   sync.Mutex
	ok   map[string]map[[32]byte]struct{} // namespace → checked digests
}

// maxAuthCache bounds each namespace's cache of checked passwords.
const maxAuthCache = 1024

// newBasicAuth returns the checks' state; compare nil means table.CheckPassword; nice as
// basicAuth.nice.
func newBasicAuth(slots int, wait time.Duration, nice int, compare func(hash, password string) bool) *basicAuth {
	if compare == nil {
		compare = table.CheckPassword
	}
	return &basicAuth{slots: newAuthSlots(slots, wait), compare: compare, nice: nice, ok: map[string]map[[32]byte]struct{}{}}
}

// hash compares password with an htpasswd hash. With low (the namespace spent its budget)
// and c.nice set, it runs the comparison on a goroutine locked to its OS thread, raises that
// thread's nice value and lets the goroutine end still locked: the Go runtime then ends the
// thread, so no other goroutine ever runs at the lowered priority (lowering the nice value
// back would need CAP_SYS_NICE); the process's main thread, which the runtime never ends,
// it parks for good instead. The kernel then gives the thread CPU only as far as the proxy's
// other threads (and other processes of the same scheduling group) leave it: a flood's
// bcrypt no longer takes a core from other namespaces' requests, while a namespace that
// logs in now and then keeps the proxy's priority. A thread whose nice value cannot be set
// still hashes, at the proxy's priority: slower for others, never a wrong answer.
func (c *basicAuth) hash(hash, password string, low bool) bool {
	if !low || c.nice == 0 {
		return c.compare(hash, password)
	}
	good := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		_ = setThreadNice(c.nice)
		good <- c.compare(hash, password)
	}()
	return <-good
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
		_ = c.hash(ba.Decoy, pass, t.low)
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
	good := c.hash(hash, pass, t.low)
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

// probeThreadNice sets nice on a thread of its own, as hash does, and reports whether it
// could.
func probeThreadNice(nice int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, as in hash
		errc <- setThreadNice(nice)
	}()
	return <-errc
}
