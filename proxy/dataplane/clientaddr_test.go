package dataplane

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"testing"
)

// forwardedGET sends GET / for host with the X-Forwarded-For header lines xff (nil: none)
// and returns the status and, for a 200, the echo's reply.
func forwardedGET(t *testing.T, addr, host string, xff []string) (int, echoReply) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if xff != nil {
		req.Header["X-Forwarded-For"] = xff
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e echoReply
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
	}
	return resp.StatusCode, e
}

// TestClientAddress: behind a trusted proxy (the test client, on 127.0.0.0/8), the client is
// the right-most X-Forwarded-For hop that is not a trusted proxy, in the forms load
// balancers write (ip:port, [v6]:port, bare v6, spaces, several header lines). A hop that is
// missing or does not parse makes the client unknown, never the trusted proxy: an allow-list
// that covers the proxy's range refuses it, a deny-list does not let it pass, the backend
// gets no X-Real-Ip naming the proxy.
func TestClientAddress(t *testing.T) {
	be := echoBackend(t, "a")
	ep := []string{hostport(be)}
	tab := buildTable(t,
		route{host: "who.test", path: "/", endpoints: ep},
		route{host: "lb.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/allowlist-source-range": "127.0.0.0/8"}},
		route{host: "only.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/allowlist-source-range": "1.2.3.0/24,2001:db8::/32"}},
		route{host: "deny.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/denylist-source-range": "198.51.100.0/24"}},
	)
	lb := netip.MustParsePrefix("127.0.0.0/8")
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.TrustedProxies = []netip.Prefix{lb}
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			name string
			xff  []string
			want string // the client; "" unknown
		}{
			// hostile first
			{"garbage from a trusted proxy", []string{"not-an-ip"}, ""},
			{"no X-Forwarded-For from a trusted proxy", nil, ""},
			{"an empty X-Forwarded-For", []string{""}, ""},
			{"garbage right of a good hop", []string{"1.2.3.4, unknown"}, ""},
			{"a port out of range", []string{"1.2.3.4:99999"}, ""},
			{"a v6 address with a zone", []string{"fe80::1%eth0"}, ""},
			{"a bracketed IPv4 address", []string{"[1.2.3.4]:80"}, ""},
			{"an RFC 7239 obfuscated identifier", []string{"_hidden"}, ""},
			{"garbage left of the client is not looked at", []string{"bogus, 1.2.3.4"}, "1.2.3.4"},
			{"a forged hop left of the client is not looked at", []string{"127.0.0.1, 1.2.3.4"}, "1.2.3.4"},
			// what load balancers send
			{"ip:port", []string{"1.2.3.4:5678"}, "1.2.3.4"},
			{"bracketed v6 with a port", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
			{"bracketed v6", []string{"[2001:db8::7]"}, "2001:db8::7"},
			{"bare v6", []string{"2001:db8::7"}, "2001:db8::7"},
			{"spaces around", []string{"  1.2.3.4  "}, "1.2.3.4"},
			{"IPv4-mapped v6", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},
			{"several lines joined, trusted hops skipped", []string{"9.9.9.9", "1.2.3.4, 127.0.0.5:80"}, "1.2.3.4"},
			{"every hop trusted: the left-most", []string{"127.0.0.9, 127.0.0.5"}, "127.0.0.9"},
		} {
			want := func(in bool) int {
				if in {
					return http.StatusOK
				}
				return http.StatusForbidden
			}
			client, _ := netip.ParseAddr(tc.want)
			code, e := forwardedGET(t, addr, "who.test", tc.xff)
			if got := e.Header["X-Real-Ip"]; code != 200 || tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
				t.Errorf("%s: %d, backend saw X-Real-Ip %q, want %q", tc.name, code, got, tc.want)
			}
			for _, h := range []struct {
				host string
				want int
			}{
				{"lb.test", want(lb.Contains(client))},
				{"only.test", want(client.IsValid() && !lb.Contains(client))},
				{"deny.test", want(client.IsValid())},
			} {
				if code, _ := forwardedGET(t, addr, h.host, tc.xff); code != h.want {
					t.Errorf("%s: %s answered %d, want %d", tc.name, h.host, code, h.want)
				}
			}
		}
	})
}

// TestClientAddressUnknownRateLimit: clients whose address is unknown share one bucket; a
// known client keeps its own, whatever form its address came in.
func TestClientAddressUnknownRateLimit(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "rate.test", path: "/", endpoints: []string{hostport(be)},
		annotations: map[string]string{"metalgate.io/limit-rps": "0.01", "metalgate.io/limit-burst": "1"}})
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		_, addr, _ := startProxy(t, opts, tab)
		for _, step := range []struct {
			xff  []string
			want int
		}{
			{[]string{"garbage"}, 200},
			{[]string{"other garbage"}, 429}, // the same unknown client
			{nil, 429},
			{[]string{"1.2.3.4"}, 200},
			{[]string{"1.2.3.4:5678"}, 429}, // the same client, another form
			{[]string{"[2001:db8::1]:80"}, 200},
		} {
			if code, _ := forwardedGET(t, addr, "rate.test", step.xff); code != step.want {
				t.Errorf("X-Forwarded-For %q: %d, want %d", step.xff, code, step.want)
			}
		}
	})
}
