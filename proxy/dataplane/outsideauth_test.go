package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// outsideTable builds routes with the install's --external-auth-hosts set to hosts.
func outsideTable(t *testing.T, hosts string, routes ...route) (*table.Table, []table.Problem) {
	t.Helper()
	in := tableInput(routes...)
	var err error
	if in.ExternalAuthHosts, err = table.ParseHostList(hosts); err != nil {
		t.Fatal(err)
	}
	return ingress.Build(in)
}

// testNames resolves the test's made-up names (the system resolver gets the others).
func testNames(names map[string][]string) func(string) ([]netip.Addr, bool) {
	return func(host string) ([]netip.Addr, bool) {
		list, ok := names[host]
		var out []netip.Addr
		for _, s := range list {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, ok
	}
}

// TestOutsideAuthRefused: an outside authentication service is never reached at an address
// it could use to reach the proxy's own host or network: an IP literal, user information and
// an unlisted host are refused when the table is built; a listed name that resolves (when
// the connection is made — DNS may change its answer after the build) to loopback, IPv4 in
// IPv6 loopback, link-local, unspecified or multicast addresses is refused by the dialer; a
// one-label name ("localhost") is a Service, listed or not. Every such request is answered
// 500 and the real loopback server standing by is never asked. Both forwarding paths.
func TestOutsideAuthRefused(t *testing.T) {
	var hits atomic.Int64
	auth := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) })) // would let anyone in
	t.Cleanup(auth.Close)
	_, port, _ := net.SplitHostPort(hostport(auth))
	app := echoBackend(t, "app")
	names := testNames(map[string][]string{
		"loop.example": {"127.0.0.1"}, "v6loop.example": {"::1"}, "mapped.example": {"::ffff:127.0.0.1"},
		"ll.example": {"169.254.169.254"}, "zero.example": {"0.0.0.0"}, "mc.example": {"224.0.0.1"},
		"many.example":         {"0.0.0.0", "::1", "127.0.0.2"},
		"unlisted.example.org": {"127.0.0.1"}, // never asked: no DNS query leaves the test, whatever the build says
	})
	// problem: what the build says; "" for a name refused when the connection is made.
	cases := []struct{ host, url, problem string }{
		{"literal.test", "http://127.0.0.1:" + port + "/check", `host "127.0.0.1" is an address`},
		{"literal6.test", "http://[::1]:" + port + "/check", `host "::1" is an address`},
		{"userinfo.test", "http://user:pw@loop.example:" + port + "/check", "has user information"},
		{"unlisted.test", "http://unlisted.example.org:" + port + "/check", `host "unlisted.example.org" is neither a Service`},
		// One label is a Service of the Ingress's namespace, listed or not: never the host.
		{"localhost.test", "http://localhost:" + port + "/check", "Service ns/localhost not found"},
		{"loop.test", "http://loop.example:" + port + "/check", ""},
		{"v6loop.test", "http://v6loop.example:" + port + "/check", ""},
		{"mapped.test", "http://mapped.example:" + port + "/check", ""},
		{"ll.test", "http://ll.example/latest/meta-data", ""},
		{"zero.test", "http://zero.example:" + port + "/check", ""},
		{"mc.test", "http://mc.example:" + port + "/check", ""},
		{"many.test", "https://many.example:" + port + "/check", ""},
	}
	var routes []route
	var want []string
	for _, c := range cases {
		routes = append(routes, route{host: c.host, path: "/", endpoints: []string{hostport(app)}, annotations: map[string]string{"metalgate.io/auth-url": c.url}})
		if c.problem != "" {
			want = append(want, c.problem)
		}
	}
	tab, problems := outsideTable(t, "localhost,*.example", routes...)
	if len(problems) != len(want) {
		t.Errorf("problems %v, want %d", problems, len(want))
	}
	for i := 0; i < len(problems) && i < len(want); i++ {
		if !strings.Contains(problems[i].Message, want[i]) {
			t.Errorf("problem %q, want one saying %q", problems[i].Message, want[i])
		}
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.externalAuthLookup = names
		var escaped []netip.Addr
		var mu sync.Mutex
		opts.externalAuthEscaped = func(a netip.Addr) {
			mu.Lock()
			defer mu.Unlock()
			escaped = append(escaped, a)
		}
		_, addr, _ := startProxy(t, opts, tab)
		for _, c := range cases {
			resp, _ := get(t, noFollow, "http://"+addr+"/", map[string]string{"Host": c.host})
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("%s (%s): %d, want 500", c.host, c.url, resp.StatusCode)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the loopback server was asked %d times", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(escaped) != 0 {
			t.Errorf("the policy allowed %v (the test guard refused them before connecting)", escaped)
		}
	})
}

// TestOutsideAuth: a listed outside host is asked over http or https (verified against its
// name) with the request's headers and its own Host; 2xx lets the request through with the
// auth-response-headers, 401 and 403 answer the client. The address policy is the test's:
// 127.0.0.1 stands in for the outside host's address (publicAddress refuses it:
// TestOutsideAuthRefused). Hostile: a certificate for another name, a response head larger
// than MaxResponseHeaderBytes and no answer within ResponseHeaderTimeout all answer 500.
func TestOutsideAuth(t *testing.T) {
	var mu sync.Mutex
	var seenHost string
	check := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenHost = r.Host
		mu.Unlock()
		switch c, _ := r.Cookie("session"); {
		case c == nil:
			w.WriteHeader(http.StatusUnauthorized)
		case c.Value == "alice":
			w.Header().Set("X-Auth-Request-User", "alice")
		default:
			w.WriteHeader(http.StatusForbidden)
		}
	})
	plain := httptest.NewServer(check)
	t.Cleanup(plain.Close)
	cert, err := SelfSignedCertificate("idp.example")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	secure := httptest.NewUnstartedServer(check)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 64<<10))
	}))
	t.Cleanup(huge.Close)
	// Answers nothing until the proxy gives up and closes the connection.
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(silent.Close)
	port := func(s *httptest.Server) string { _, p, _ := net.SplitHostPort(hostport(s)); return p }
	app := echoBackend(t, "app")
	ann := func(url string) map[string]string {
		return map[string]string{"metalgate.io/auth-url": url, "metalgate.io/auth-response-headers": "X-Auth-Request-User"}
	}
	tab, problems := outsideTable(t, "auth.example,*.idp.example,idp.example,big.example,slow.example",
		route{host: "http.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("http://auth.example:" + port(plain) + "/check")},
		route{host: "https.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("https://idp.example:" + port(secure) + "/check")},
		route{host: "wrongname.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("https://sso.idp.example:" + port(secure) + "/check")},
		route{host: "big.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("http://big.example:" + port(huge) + "/check")},
		route{host: "slow.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("http://slow.example:" + port(silent) + "/check")},
	)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.externalAuthLookup = testNames(map[string][]string{"auth.example": {"::1", "127.0.0.1"}, "idp.example": {"127.0.0.1"},
			"sso.idp.example": {"127.0.0.1"}, "big.example": {"127.0.0.1"}, "slow.example": {"127.0.0.1"}})
		opts.externalAuthRoots = roots
		opts.externalAuthAddrs = func(a netip.Addr) error {
			if a == netip.MustParseAddr("127.0.0.1") {
				return nil
			}
			return publicAddress(a)
		}
		opts.MaxResponseHeaderBytes = 16 << 10
		opts.ResponseHeaderTimeout = 300 * time.Millisecond
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			host, cookie string
			want         int
			wantHost     string
		}{
			{host: "wrongname.test", cookie: "alice", want: 500},
			{host: "big.test", cookie: "alice", want: 500},
			{host: "slow.test", cookie: "alice", want: 500},
			{host: "http.test", want: 401},
			{host: "http.test", cookie: "eve", want: 403},
			{host: "http.test", cookie: "alice", want: 200, wantHost: "auth.example:" + port(plain)},
			{host: "https.test", cookie: "eve", want: 403},
			{host: "https.test", cookie: "alice", want: 200, wantHost: "idp.example:" + port(secure)},
		} {
			hdr := map[string]string{"Host": tc.host, "X-Auth-Request-User": "mallory"}
			if tc.cookie != "" {
				hdr["Cookie"] = "session=" + tc.cookie
			}
			resp, e := get(t, noFollow, "http://"+addr+"/", hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("%s cookie %q: %d, want %d", tc.host, tc.cookie, resp.StatusCode, tc.want)
				continue
			}
			if tc.want != 200 {
				continue
			}
			if got := strings.Join(e.Header["X-Auth-Request-User"], ","); got != "alice" {
				t.Errorf("%s: the backend saw X-Auth-Request-User %q, want the service's alice", tc.host, got)
			}
			mu.Lock()
			if seenHost != tc.wantHost {
				t.Errorf("%s: the auth service saw Host %q, want %q", tc.host, seenHost, tc.wantHost)
			}
			mu.Unlock()
		}
	})
}

// TestPublicAddress: the production address policy of outside authentication services.
func TestPublicAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1", false}, {"127.255.0.9", false}, {"::1", false}, {"::ffff:127.0.0.1", false},
		{"169.254.169.254", false}, {"fe80::1", false}, {"0.0.0.0", false}, {"0.1.2.3", false}, {"::", false},
		{"224.0.0.1", false}, {"ff02::1", false}, {"255.255.255.255", false},
		{"203.0.113.7", true}, {"10.1.2.3", true}, {"2001:db8::1", true}, {"fd00::1", true},
	} {
		if err := publicAddress(netip.MustParseAddr(tc.addr)); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want allowed %v", tc.addr, err, tc.ok)
		}
	}
}
