package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestMaxConnectionsPerProxiedClient: behind a load balancer that speaks the PROXY protocol,
// --max-connections-per-client counts each client its headers name, not the load balancer:
// a second client is served while the first holds its one connection, the first client's
// second connection is closed, and its place comes back when its first connection ends.
func TestMaxConnectionsPerProxiedClient(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "pp.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		opts.MaxConnectionsPerClient = 1
		opts.ProxyProtocolHTTP, opts.ProxyProtocolFrom = ProxyProtocolRequired, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		_, addr, _ := startProxy(t, opts, tab)

		// Client A's one connection: a request answered, the connection kept open.
		held, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		_ = held.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := held.Write(append(proxyHeader(t, 1, "203.0.113.1:1000"), "GET / HTTP/1.1\r\nHost: pp.test\r\n\r\n"...)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(held), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("client A's first connection: %d", resp.StatusCode)
		}

		// hostile first: A again, over its one place
		if _, status, err := proxiedGET(t, addr, proxyHeader(t, 1, "203.0.113.1:1001"), false, "pp.test"); err == nil && status != 0 {
			t.Errorf("client A's second connection served %d, want it closed", status)
		}
		if n := testutil.ToFloat64(opts.Metrics.LimitHits.WithLabelValues(limitMaxConnectionsPerClient)); n != 1 {
			t.Errorf("max_connections_per_client counted %v times, want 1", n)
		}
		// client B, from the same load balancer
		for _, client := range []string{"203.0.113.2:1000", "[2001:db8::2]:1000"} {
			if _, status, err := proxiedGET(t, addr, proxyHeader(t, 2, client), false, "pp.test"); err != nil || status != 200 {
				t.Errorf("client %s while A holds its place: %d, %v; want 200", client, status, err)
			}
		}
		held.Close()
		testenv.Eventually(t, 5*time.Second, "client A's place back", func() error {
			if _, status, err := proxiedGET(t, addr, proxyHeader(t, 1, "203.0.113.1:1002"), false, "pp.test"); err != nil || status != 200 {
				return fmt.Errorf("%d, %v", status, err)
			}
			return nil
		})
	})
}

// TestRateLimitIPv6Prefix: rate limits key an IPv6 client by its /64 (one host has the whole
// /64 to change addresses in), or by the prefix RateLimitIPv6Prefix sets.
func TestRateLimitIPv6Prefix(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "v6.test", path: "/", endpoints: []string{hostport(be)},
		annotations: map[string]string{"metalgate.io/limit-rps": "0.01", "metalgate.io/limit-burst": "1"}})
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		_, addr, _ := startProxy(t, opts, tab)
		served := 0
		for i := range 1000 {
			if code, _ := forwardedGET(t, addr, "v6.test", []string{fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1)}); code == 200 {
				served++
			}
		}
		if served != 1 {
			t.Errorf("1000 addresses of one /64: %d served, want 1 (one bucket)", served)
		}
		if code, _ := forwardedGET(t, addr, "v6.test", []string{"2001:db8:1:3::1"}); code != 200 {
			t.Errorf("another /64: %d, want 200", code)
		}

		opts.RateLimitIPv6Prefix = 128
		_, addr, _ = startProxy(t, opts, tab)
		for _, c := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2"} {
			if code, _ := forwardedGET(t, addr, "v6.test", []string{c}); code != 200 {
				t.Errorf("prefix 128, %s: %d, want 200 (a bucket of its own)", c, code)
			}
		}
	})
	if _, err := New(Options{RateLimitIPv6Prefix: 129}); err == nil || !strings.Contains(err.Error(), "prefix length 129") {
		t.Errorf("prefix length 129: %v, want an error naming it", err)
	}
}

// TestRateLimitNamespaces: each namespace's rate-limit state is bounded on its own. A flood of
// addresses in one namespace fills only that namespace's table, where it never drops a
// drained bucket (that would hand its client a full one): the flood's new clients share one
// overflow bucket. Another namespace's drained clients stay drained, and its new clients get
// buckets of their own.
func TestRateLimitNamespaces(t *testing.T) {
	be := echoBackend(t, "a")
	limit := map[string]string{"metalgate.io/limit-rps": "0.01", "metalgate.io/limit-burst": "1"}
	in := tableInput(
		route{host: "a.test", path: "/", endpoints: []string{hostport(be)}, annotations: limit},
		route{host: "b.test", path: "/", endpoints: []string{hostport(be)}, annotations: limit},
	)
	moveToNamespace(in, "r1", "b")
	tab, problems := ingress.Build(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	const bound = 10
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		opts.rateLimitClients = bound
		_, addr, _ := startProxy(t, opts, tab)
		expect := func(what, host, client string, want int) {
			t.Helper()
			if code, _ := forwardedGET(t, addr, host, []string{client}); code != want {
				t.Errorf("%s (%s on %s): %d, want %d", what, client, host, code, want)
			}
		}
		expect("namespace b's client", "b.test", "203.0.113.1", 200)
		expect("namespace b's client, drained", "b.test", "203.0.113.1", 429)

		served := 0
		for i := range 50 {
			if code, _ := forwardedGET(t, addr, "a.test", []string{fmt.Sprintf("198.51.100.%d", i+1)}); code == 200 {
				served++
			}
		}
		if served != bound+1 {
			t.Errorf("a flood of 50 clients in namespace ns: %d served, want %d (%d buckets, then one shared overflow bucket)", served, bound+1, bound)
		}
		expect("the flood's first client, after the flood", "a.test", "198.51.100.1", 429)
		expect("namespace b's drained client, after the flood", "b.test", "203.0.113.1", 429)
		expect("namespace b's new client", "b.test", "203.0.113.2", 200)
		expect("namespace b's other new client", "b.test", "203.0.113.3", 200)
	})
}

// moveToNamespace moves the Ingress named name, its Service and its EndpointSlices to
// namespace ns.
func moveToNamespace(in ingress.Input, name, ns string) {
	for _, o := range in.Ingresses {
		if o.Name == name {
			o.Namespace = ns
		}
	}
	for _, o := range in.Services {
		if o.Name == name {
			o.Namespace = ns
		}
	}
	for _, o := range in.Slices {
		if strings.HasPrefix(o.Name, name+"-") {
			o.Namespace = ns
		}
	}
}
