package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

const (
	// victimHash is alice's ("secret1") at bcrypt cost 5.
	victimHash = "$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"
	// floodHash is a cost-12 hash (the cap) whose checks the tests hold in gatedCompare.
	floodHash = "$2y$12$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"
)

// gatedCompare is a password comparer whose checks against hash block until open is closed
// (and then fail), so that a test holds slots for as long as it likes; other hashes are
// checked for real.
type gatedCompare struct {
	hash string
	open chan struct{}
}

func (g *gatedCompare) compare(hash, password string) bool {
	if hash == g.hash {
		<-g.open
		return false
	}
	return table.CheckPassword(hash, password)
}

// authRoutes are two tenants on two hosts: victim (v.test, alice at cost 5) and flood
// (f.test, mallory at cost 12), each with an Ingress, a Service and a Secret of its own
// namespace.
func authRoutes(backend string) []route {
	secret := func(ns, text string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users", UID: types.UID("uid-" + ns)}, Data: map[string][]byte{"auth": []byte(text)}}
	}
	ann := map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "users"}
	return []route{
		{host: "v.test", path: "/", namespace: "victim", endpoints: []string{backend}, annotations: ann, secrets: []*corev1.Secret{secret("victim", "alice:"+victimHash)}},
		{host: "f.test", path: "/", namespace: "flood", endpoints: []string{backend}, annotations: ann, secrets: []*corev1.Secret{secret("flood", "mallory:"+floodHash)}},
	}
}

// authGet sends one request as user:pass (none when user is "") and returns its status and
// Retry-After.
func authGet(t *testing.T, c *http.Client, addr, host, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s as %q: %v", host, user, err)
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// slotState is what namespace ns holds and queues in a's slots.
func slotState(a *authSlots, ns string) (held, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tn := a.tenant[ns]; tn != nil {
		return tn.held, len(tn.waiting)
	}
	return 0, 0
}

// slotHolding is how many refusals of namespace ns a's slots hold (queue full, answered after
// the wait).
func slotHolding(a *authSlots, ns string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tn := a.tenant[ns]; tn != nil {
		return tn.holding
	}
	return 0
}

// flood sends n requests with wrong passwords (every other one as a user the Secret does not
// know) to f.test at once; wait returns their statuses.
func flood(t *testing.T, c *http.Client, addr string, n int) (wait func() []int) {
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		user := "mallory"
		if i%2 == 1 {
			user = fmt.Sprintf("nobody%d", i)
		}
		wg.Go(func() { codes[i], _ = authGet(t, c, addr, "f.test", user, "wrong") })
	}
	return func() []int { wg.Wait(); return codes }
}

// TestBasicAuthFairness: the hostile case of issue 23. One namespace floods wrong passwords
// (and unknown users) against a cost-12 hash, with more checks than there are slots; its
// checks hold their namespace's share (half the slots) and queue, and another namespace's
// cost-5 check is admitted and answered while the flood holds all it may — it does not wait
// for a single flood check to end. Before, four process-wide slots served everyone, and the
// victim waited behind the flood (5.7 s instead of 6 ms).
func TestBasicAuthFairness(t *testing.T) {
	be := echoBackend(t, "app")
	tab := buildTable(t, authRoutes(hostport(be))...)
	forEachPath(t, func(t *testing.T, opts Options) {
		gate := &gatedCompare{hash: floodHash, open: make(chan struct{})}
		opts.AuthCheckSlots, opts.AuthCheckWait = 4, time.Minute // share 2; the flood never times out here
		opts.authCompare = gate.compare
		s, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)

		const floods = 6
		done := flood(t, c, addr, floods)
		testenv.Eventually(t, 5*time.Second, "the flood holds its share (2) and queues the rest (4)", func() error {
			if held, waiting := slotState(s.auth.slots, "flood"); held != 2 || waiting != floods-2 {
				return fmt.Errorf("flood holds %d, queues %d", held, waiting)
			}
			return nil
		})
		for _, tc := range []struct {
			user, pass string
			want       int
		}{
			{"alice", "secret1", http.StatusOK},
			{"alice", "wrong", http.StatusUnauthorized},
			{"eve", "secret1", http.StatusUnauthorized}, // unknown: hashed against alice's, under the victim's share
		} {
			if got, _ := authGet(t, c, addr, "v.test", tc.user, tc.pass); got != tc.want {
				t.Errorf("victim as %q while the flood holds its share: %d, want %d", tc.user, got, tc.want)
			}
		}
		if held, waiting := slotState(s.auth.slots, "flood"); held != 2 || waiting != floods-2 {
			t.Errorf("the flood holds %d and queues %d after the victim's checks, want 2 and %d: it was not what held the victim up", held, waiting, floods-2)
		}
		close(gate.open)
		for i, code := range done() {
			if code != http.StatusUnauthorized {
				t.Errorf("flood request %d: %d, want 401", i, code)
			}
		}
	})
}

// TestBasicAuthBusy: a check that finds its namespace's share taken waits at most
// --auth-check-wait, then 503 with Retry-After; past the namespace's queue it gets 429 with
// Retry-After, after the same wait (TestBasicAuthRefusalHeld). Another namespace is served
// all along.
func TestBasicAuthBusy(t *testing.T) {
	be := echoBackend(t, "app")
	tab := buildTable(t, authRoutes(hostport(be))...)
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		queued int // flood checks queued before the one that is refused
		want   int
		// queuedEnd is what the queued flood checks may get: 503 when their wait ended
		// first, 401 when the gate opened first.
		queuedEnd []int
	}{
		{"wait bound: 503", 50 * time.Millisecond, 0, http.StatusServiceUnavailable, nil},
		// The wait is long enough for all the flood's checks to be queued on a loaded machine.
		{"queue full: 429", 2 * time.Second, authQueuePerShare, http.StatusTooManyRequests, []int{http.StatusServiceUnavailable, http.StatusUnauthorized}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				gate := &gatedCompare{hash: floodHash, open: make(chan struct{})}
				opts.AuthCheckSlots, opts.AuthCheckWait = 2, tc.wait // share 1
				opts.authCompare = gate.compare
				s, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second}
				t.Cleanup(c.CloseIdleConnections)

				done := flood(t, c, addr, 1+tc.queued)
				testenv.Eventually(t, 5*time.Second, "the flood holds its slot and queues", func() error {
					if held, waiting := slotState(s.auth.slots, "flood"); held != 1 || waiting != tc.queued {
						return fmt.Errorf("flood holds %d, queues %d", held, waiting)
					}
					return nil
				})
				code, retry := authGet(t, c, addr, "f.test", "mallory", "again")
				if code != tc.want || retry != "1" {
					t.Errorf("one more flood check: %d with Retry-After %q, want %d with 1", code, retry, tc.want)
				}
				if code, _ := authGet(t, c, addr, "v.test", "alice", "secret1"); code != http.StatusOK {
					t.Errorf("victim meanwhile: %d, want 200", code)
				}
				close(gate.open)
				unauthorized := 0
				for i, code := range done() {
					switch {
					case code == http.StatusUnauthorized:
						unauthorized++
					case !slices.Contains(tc.queuedEnd, code):
						t.Errorf("flood request %d: %d, want 401 or one of %v", i, code, tc.queuedEnd)
					}
				}
				if unauthorized == 0 {
					t.Errorf("no flood check answered 401: the one that held the slot was not checked")
				}
			})
		})
	}
}

// TestBasicAuthRefusalHeld: the hostile case of issue 23's closed-loop flood. A namespace
// whose share is taken and whose queue is full gets its next check refused — but the refusal
// is held, not answered at once, so a client that retries as soon as it is answered cannot
// turn refusals into thousands of requests a second; the held refusal holds no slot and no
// place in a queue (another namespace is served meanwhile), and it ends when its client goes
// away, leaving nothing behind. Its answer after the wait (429, Retry-After) is
// TestBasicAuthBusy's.
func TestBasicAuthRefusalHeld(t *testing.T) {
	be := echoBackend(t, "app")
	tab := buildTable(t, authRoutes(hostport(be))...)
	forEachPath(t, func(t *testing.T, opts Options) {
		gate := &gatedCompare{hash: floodHash, open: make(chan struct{})}
		opts.AuthCheckSlots, opts.AuthCheckWait = 2, time.Minute // share 1; nothing times out here
		opts.authCompare = gate.compare
		s, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)

		done := flood(t, c, addr, 1+authQueuePerShare)
		testenv.Eventually(t, 5*time.Second, "the flood holds its slot and fills its queue", func() error {
			if held, waiting := slotState(s.auth.slots, "flood"); held != 1 || waiting != authQueuePerShare {
				return fmt.Errorf("flood holds %d, queues %d", held, waiting)
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "f.test"
		req.SetBasicAuth("mallory", "again")
		answered := make(chan error, 1)
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("answered %d", resp.StatusCode)
			}
			answered <- err
		}()
		testenv.Eventually(t, 5*time.Second, "the refusal is held", func() error {
			if n := slotHolding(s.auth.slots, "flood"); n != 1 {
				return fmt.Errorf("%d refusals held", n)
			}
			return nil
		})
		select {
		case err := <-answered:
			t.Fatalf("the refused check was answered at once: %v", err)
		default:
		}
		if code, _ := authGet(t, c, addr, "v.test", "alice", "secret1"); code != http.StatusOK {
			t.Errorf("victim while the flood's refusal is held: %d, want 200", code)
		}
		if held, waiting := slotState(s.auth.slots, "flood"); held != 1 || waiting != authQueuePerShare {
			t.Errorf("the flood holds %d and queues %d with a refusal held, want 1 and %d", held, waiting, authQueuePerShare)
		}
		cancel()
		if err := <-answered; !errors.Is(err, context.Canceled) {
			t.Errorf("the held request after its client went away: %v, want %v", err, context.Canceled)
		}
		testenv.Eventually(t, 5*time.Second, "the held refusal ends with its client", func() error {
			if n := slotHolding(s.auth.slots, "flood"); n != 0 {
				return fmt.Errorf("%d refusals held", n)
			}
			return nil
		})
		close(gate.open)
		for i, code := range done() {
			if code != http.StatusUnauthorized {
				t.Errorf("flood request %d: %d, want 401", i, code)
			}
		}
	})
}

// TestBasicAuthUnknownUserHashed: a user the Secret does not know costs one hash comparison,
// against the Secret's decoy (its most expensive hash), as a known user with a wrong
// password does; so the time of a 401 does not tell which users exist. Counted through an
// injected comparer, not timed.
func TestBasicAuthUnknownUserHashed(t *testing.T) {
	be := echoBackend(t, "app")
	cheap := "carol:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/"
	r := route{host: "a.test", path: "/", endpoints: []string{hostport(be)},
		annotations: map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "users"},
		secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "users"},
			Data: map[string][]byte{"auth": []byte("alice:" + victimHash + "\n" + cheap)}}}}
	tab := buildTable(t, r)
	forEachPath(t, func(t *testing.T, opts Options) {
		var mu sync.Mutex
		var hashes []string
		opts.authCompare = func(hash, password string) bool {
			mu.Lock()
			hashes = append(hashes, hash)
			mu.Unlock()
			return table.CheckPassword(hash, password)
		}
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			name, user, pass string
			want             int
			compared         []string
		}{
			{"known user, wrong password", "alice", "wrong", 401, []string{victimHash}},
			{"unknown user: the decoy (the costliest hash)", "mallory", "wrong", 401, []string{victimHash}},
			{"unknown user with a known user's password", "mallory", "secret1", 401, []string{victimHash}},
			{"known user", "alice", "secret1", 200, []string{victimHash}},
			{"known user again: cached", "alice", "secret1", 200, nil},
			{"no credentials: nothing to compare", "", "", 401, nil},
		} {
			mu.Lock()
			hashes = nil
			mu.Unlock()
			if got, _ := authGet(t, http.DefaultClient, addr, "a.test", tc.user, tc.pass); got != tc.want {
				t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
			}
			mu.Lock()
			if diff := cmp.Diff(tc.compared, hashes); diff != "" {
				t.Errorf("%s: hashes compared (-want +got):\n%s", tc.name, diff)
			}
			mu.Unlock()
		}
	})
}

// TestBasicAuthCachePerNamespace: one namespace's logins (here enough distinct passwords to
// fill its cache) never evict another namespace's: the other's user is still not hashed again.
func TestBasicAuthCachePerNamespace(t *testing.T) {
	var calls atomic.Int64
	c := newBasicAuth(2, time.Second, 0, func(string, string) bool { calls.Add(1); return true })
	ba := &table.BasicAuth{Users: map[string]string{"u": victimHash}, Decoy: victimHash, Version: "1"}
	ctx := context.Background()
	if ok, err := c.check(ctx, "b", ba, "u", "pw", true); !ok || err != nil {
		t.Fatalf("b's login: %v, %v", ok, err)
	}
	for i := range maxAuthCache + 1 {
		if ok, err := c.check(ctx, "a", ba, "u", fmt.Sprint(i), true); !ok || err != nil {
			t.Fatalf("a's login %d: %v, %v", i, ok, err)
		}
	}
	before := calls.Load()
	if ok, err := c.check(ctx, "b", ba, "u", "pw", true); !ok || err != nil {
		t.Fatalf("b's login again: %v, %v", ok, err)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("b's cached login was hashed again (%d comparisons) after a's logins", n)
	}
}

// TestBasicAuthCostOverCap: a Secret with a bcrypt cost over the cap is a Problem naming the
// Secret, and its route fails closed: every request, the right password included, gets 401
// without reaching the backend.
func TestBasicAuthCostOverCap(t *testing.T) {
	var reached atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1); echoHandler("app").ServeHTTP(w, r) }))
	t.Cleanup(be.Close)
	r := route{host: "a.test", path: "/", endpoints: []string{hostport(be)},
		annotations: map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "slow"},
		secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "slow"},
			Data: map[string][]byte{"auth": []byte("alice:" + victimHash + "\nhal:$2y$13$" + victimHash[7:])}}}}
	tab, problems := buildTableProblems(t, r)
	if len(problems) != 1 || problems[0].Reason != table.ReasonInvalidAnnotation ||
		!strings.Contains(problems[0].Message, "Secret ns/slow") || !strings.Contains(problems[0].Message, "bcrypt cost 13 is over 12") {
		t.Fatalf("problems %+v, want one InvalidAnnotation naming Secret ns/slow and the cost", problems)
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, user := range []string{"alice", "hal", ""} {
			if got, _ := authGet(t, http.DefaultClient, addr, "a.test", user, "secret1"); got != http.StatusUnauthorized {
				t.Errorf("as %q: %d, want 401", user, got)
			}
		}
	})
	if n := reached.Load(); n != 0 {
		t.Errorf("the backend saw %d requests", n)
	}
}
