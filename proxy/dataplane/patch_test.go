package dataplane

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// countingBackend is an echo backend that counts the requests it gets and its open
// connections.
type countingBackend struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	open     map[net.Conn]bool
}

func newCountingBackend(t *testing.T, name string) *countingBackend {
	t.Helper()
	b := &countingBackend{open: map[net.Conn]bool{}}
	echo := echoHandler(name)
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		echo.ServeHTTP(w, r)
	}))
	b.Config.ConnState = func(c net.Conn, st http.ConnState) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch st {
		case http.StateNew:
			b.open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(b.open, c)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

func (b *countingBackend) conns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.open)
}

// TestSwapPatchedTable: a table patched for an endpoint change (table.PatchEndpoints) is
// served from its new endpoints only; the endpoints it removed get no request and their
// pooled connections are closed (a pod IP is reused by other pods); and the backends it did
// not change keep their pools, round-robin position included.
func TestSwapPatchedTable(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		old1, old2 := newCountingBackend(t, "old1"), newCountingBackend(t, "old2")
		fresh := newCountingBackend(t, "fresh")
		b1, b2 := newCountingBackend(t, "b1"), newCountingBackend(t, "b2")
		in := tableInput(
			route{host: "a.test", path: "/", endpoints: []string{old1.addr(), old2.addr()}},
			route{host: "b.test", path: "/", endpoints: []string{b1.addr(), b2.addr()}},
		)
		prev, problems := ingress.Build(in)
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s, addr, _ := startProxy(t, opts, prev)
		c := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(c.CloseIdleConnections)
		ask := func(host string) string {
			t.Helper()
			resp, e := get(t, c, "http://"+addr+"/", map[string]string{"Host": host})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", host, resp.StatusCode)
			}
			return e.Backend
		}
		for range 4 { // keep-alive connections to both old endpoints, pooled by the proxy
			ask("a.test")
		}
		if old1.conns() == 0 || old2.conns() == 0 {
			t.Fatalf("no pooled connection to the old endpoints (old1 %d, old2 %d)", old1.conns(), old2.conns())
		}
		// Round robin over b1 and b2 in address order: one request moves it to the second.
		bOrder := []string{b1.addr(), b2.addr()}
		names := map[string]string{b1.addr(): "b1", b2.addr(): "b2"}
		sort.Strings(bOrder)
		if got := ask("b.test"); got != names[bOrder[0]] {
			t.Fatalf("first request to b.test went to %s, want %s", got, names[bOrder[0]])
		}

		// Service r0 (a.test) now has one endpoint, fresh.
		after := tableInput(
			route{host: "a.test", path: "/", endpoints: []string{fresh.addr()}},
			route{host: "b.test", path: "/", endpoints: []string{b1.addr(), b2.addr()}},
		)
		var r0 []*discoveryv1.EndpointSlice
		for _, sl := range after.Slices {
			if sl.Labels[discoveryv1.LabelServiceName] == "r0" {
				r0 = append(r0, sl)
			}
		}
		patched, ok := table.PatchEndpoints(prev, map[types.NamespacedName][]*discoveryv1.EndpointSlice{{Namespace: "ns", Name: "r0"}: r0})
		if !ok || patched == prev {
			t.Fatalf("PatchEndpoints: ok=%v, same table=%v", ok, patched == prev)
		}
		before := s.current.Load()
		oldReqs := old1.requests.Load() + old2.requests.Load()
		s.Swap(patched)

		// Only the replaced backend got a new pool; the other kept its own.
		now := s.current.Load()
		for _, be := range patched.Backends {
			kept := now.pools[be] == before.pools[be]
			if want := be.Service.Name != "r0"; kept != want {
				t.Errorf("backend %s: pool kept %v, want %v", be.Key, kept, want)
			}
		}
		if got := ask("b.test"); got != names[bOrder[1]] {
			t.Errorf("after the patch b.test went to %s, want %s: its round-robin position was lost", got, names[bOrder[1]])
		}
		for i := range 6 {
			if got := ask("a.test"); got != "fresh" {
				t.Fatalf("request %d to a.test after the patch went to %s, want fresh", i, got)
			}
		}
		if n := old1.requests.Load() + old2.requests.Load(); n != oldReqs {
			t.Errorf("removed endpoints got %d requests after the patch", n-oldReqs)
		}
		testenv.Eventually(t, 10*time.Second, "the proxy closes its pooled connections to the removed endpoints", func() error {
			if n := old1.conns() + old2.conns(); n > 0 {
				return fmt.Errorf("%d connections still open", n)
			}
			return nil
		})
		s.swapMu.Lock()
		for _, a := range []string{old1.addr(), old2.addr()} {
			if s.refs[a] != 0 {
				t.Errorf("endpoint %s still counted (%d) after no table routes to it", a, s.refs[a])
			}
		}
		if s.refs[fresh.addr()] != 1 || s.refs[b1.addr()] != 1 {
			t.Errorf("endpoint counts: fresh %d, b1 %d; want 1 each", s.refs[fresh.addr()], s.refs[b1.addr()])
		}
		// The removed endpoints' balancer state is forgotten: the registry makes a new one.
		for _, p := range before.pools {
			for _, e := range p.eps {
				if (e.Addr == old1.addr() || e.Addr == old2.addr()) && s.registry.Get(e.Addr) == e {
					t.Errorf("the registry still holds the endpoint of removed address %s", e.Addr)
				}
				if e.Addr == b1.addr() && s.registry.Get(e.Addr) != e {
					t.Errorf("the registry forgot the endpoint of address %s, which a backend still has", e.Addr)
				}
			}
		}
		s.swapMu.Unlock()
		if b1.conns() == 0 {
			t.Errorf("the unchanged backend's pooled connections were closed")
		}
	})
}

func (b *countingBackend) addr() string { return hostport(b.Server) }
