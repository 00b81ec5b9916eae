package dataplane

import (
	"crypto/tls"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// anySessionCache is a hostile client's session cache: it offers the last session it was
// given whatever server name it connects to (crypto/tls's own cache is keyed by server name,
// so an honest client never does).
type anySessionCache struct {
	mu   sync.Mutex
	last *tls.ClientSessionState
}

func (c *anySessionCache) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.last != nil
}

func (c *anySessionCache) Put(_ string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs != nil {
		c.last = cs
	}
}

// sessionGet makes one request to name on a new TLS connection to addr (version: the only
// TLS version offered), with cache; it returns whether the handshake resumed a session and
// which backend answered.
func sessionGet(t *testing.T, addr, name string, version uint16, cache tls.ClientSessionCache) (resumed bool, backend string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		ServerName: name, InsecureSkipVerify: true, MinVersion: version, MaxVersion: version, ClientSessionCache: cache,
	}}
	defer tr.CloseIdleConnections()
	resp, reply := get(t, &http.Client{Transport: tr}, "https://"+addr+"/", map[string]string{"Host": name})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, want 200", name, resp.StatusCode)
	}
	if resp.TLS == nil || resp.TLS.Version != version {
		t.Fatalf("%s: connection state %+v, want TLS version %x", name, resp.TLS, version)
	}
	return resp.TLS.DidResume, reply.Backend
}

// TestSessionTicketsBoundToServerName pins RFC 6066's rule for resumption on both TLS
// versions: a session resumes only at the server name it was made for (case aside); a
// hostile client offering one host's session at another host gets a full handshake with that
// host's own certificate, never the first host's session. Replicas given the same ticket
// keys resume each other's sessions, those with other keys do not, and a key taken out of
// use stops its tickets. Each outcome is counted.
func TestSessionTicketsBoundToServerName(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		routes := []route{
			{host: "a.example", path: "/", endpoints: []string{hostport(echoBackend(t, "a"))}, tlsSecret: tlsSecretOf(t, "a.example")},
			{host: "b.example", path: "/", endpoints: []string{hostport(echoBackend(t, "b"))}, tlsSecret: tlsSecretOf(t, "b.example")},
		}
		m1, m2 := NewMetrics(prometheus.NewRegistry()), NewMetrics(prometheus.NewRegistry())
		o1, o2 := opts, opts
		o1.Metrics, o2.Metrics = m1, m2
		p1, _, addr1 := startProxy(t, o1, buildTable(t, routes...))
		p2, _, addr2 := startProxy(t, o2, buildTable(t, routes...))
		count := func(m *Metrics, outcome string) float64 {
			return testutil.ToFloat64(m.SessionTickets.WithLabelValues(outcome))
		}

		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(tls.VersionName(version), func(t *testing.T) {
				p1.SetSessionTicketKeys(nil)
				p2.SetSessionTicketKeys(nil)
				before := map[string]float64{}
				for _, o := range []string{ticketResumed, ticketOtherServerName, ticketUnknownKey} {
					before[o] = count(m1, o) + count(m2, o)
				}
				step := func(what, addr, name string, cache tls.ClientSessionCache, wantResumed bool, wantBackend string) {
					t.Helper()
					resumed, backend := sessionGet(t, addr, name, version, cache)
					if resumed != wantResumed || backend != wantBackend {
						t.Fatalf("%s: resumed %t, backend %q; want resumed %t, backend %q", what, resumed, backend, wantResumed, wantBackend)
					}
				}

				cache := &anySessionCache{}
				step("first connection to a", addr1, "a.example", cache, false, "a")
				step("a again, its own session", addr1, "a.example", cache, true, "a")
				step("a in capitals, its session", addr1, "A.EXAMPLE", cache, true, "a")
				step("b offered a's session", addr1, "b.example", cache, false, "b")
				// The full handshake with b gave the client b's session: b resumes it.
				step("b again, its own session", addr1, "b.example", cache, true, "b")
				step("a offered b's session", addr1, "a.example", cache, false, "a")

				step("another replica, keys of its own", addr2, "a.example", cache, false, "a")

				k1, k2 := [32]byte{1}, [32]byte{2}
				p1.SetSessionTicketKeys([][32]byte{k1})
				p2.SetSessionTicketKeys([][32]byte{k1})
				shared := &anySessionCache{}
				step("replica 1, shared keys", addr1, "a.example", shared, false, "a")
				step("replica 2 resumes replica 1's session", addr2, "a.example", shared, true, "a")

				p1.SetSessionTicketKeys([][32]byte{k2, k1})
				rotated := &anySessionCache{}
				step("a session under k1", addr2, "a.example", rotated, false, "a")
				step("k2 new, k1 still accepted", addr1, "a.example", rotated, true, "a")
				// The resumption's new ticket is under k2 on TLS 1.3; on TLS 1.2 crypto/tls
				// issues one (under k2, for the resumed session) because k1 is no longer first.
				step("the ticket the resumption gave", addr1, "a.example", rotated, true, "a")
				p2.SetSessionTicketKeys([][32]byte{k1})
				step("a ticket under k2 at a replica without k2", addr2, "a.example", rotated, false, "a")
				p1.SetSessionTicketKeys([][32]byte{k2})
				step("k1 retired: a ticket under k1", addr1, "a.example", rotated, false, "a")

				want := map[string]float64{ticketResumed: 6, ticketOtherServerName: 2, ticketUnknownKey: 3}
				for o, n := range want {
					if got := count(m1, o) + count(m2, o) - before[o]; got != n {
						t.Errorf("metalgate_proxy_tls_session_tickets_total{outcome=%q} rose by %v, want %v", o, got, n)
					}
				}
			})
		}
	})
}

// TestSessionTicketsKeysAtOnce changes the keys while handshakes run (for -race): every
// request still succeeds, resumed or not.
func TestSessionTicketsKeysAtOnce(t *testing.T) {
	leakCheck(t)
	ep := []string{hostport(echoBackend(t, "a"))}
	p, _, addr := startProxy(t, Options{}, buildTable(t, route{host: "a.example", path: "/", endpoints: ep, tlsSecret: tlsSecretOf(t, "a.example")}))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := byte(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%5 == 0 {
				p.SetSessionTicketKeys(nil)
			} else {
				p.SetSessionTicketKeys([][32]byte{{i}, {i - 1}})
			}
		}
	}()
	cache := tls.NewLRUClientSessionCache(4)
	for i := range 40 {
		if _, backend := sessionGet(t, addr, "a.example", []uint16{tls.VersionTLS12, tls.VersionTLS13}[i%2], cache); backend != "a" {
			t.Fatalf("request %d: backend %q", i, backend)
		}
	}
	close(done)
	wg.Wait()
}
