package dataplane

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/metalgate/metalgate/proxy/table"
)

// rawGET sends GET path with the Host header exactly as given (no client library checks
// it) over HTTP/1.1, and returns the status and Location.
func rawGET(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("Host %q: %v", host, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// h2cGET sends GET path with :authority exactly as given over HTTP/2 with prior knowledge
// (Go's HTTP/2 server checks an authority for '@' only), and returns the status and
// Location.
func h2cGET(t *testing.T, addr, authority, path string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", authority}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf(":authority %q: %v", authority, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			return 0, "" // refused before any handler
		case *http2.GoAwayFrame:
			return 0, ""
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			code, _ := strconv.Atoi(f.PseudoValue("status"))
			var loc string
			for _, hf := range f.RegularFields() {
				if hf.Name == "location" {
					loc = hf.Value
				}
			}
			return code, loc
		}
	}
}

// TestRedirectHostPolicy: a Location the proxy builds from the request names only a host
// the rule serves. On a host-less rule the Host must be a host name or address literal with
// an optional port; on a wildcard rule, one label over the wildcard's domain; anything else
// gets 400 without a Location, over HTTP/1.1 (where Go refuses the worst bytes itself) and
// HTTP/2 (where it does not). Redirects to fixed targets never name the Host.
func TestRedirectHostPolicy(t *testing.T) {
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	t.Cleanup(auth.Close)
	be := echoBackend(t, "a")
	ep := []string{hostport(be)}
	signin := func(v string) map[string]string {
		return map[string]string{"metalgate.io/auth-url": "http://r0.ns.svc.cluster.local/", "metalgate.io/auth-signin": v}
	}
	tab := buildTable(t,
		route{host: "auth.test", path: "/", endpoints: []string{hostport(auth)}}, // r0: the auth Service
		route{host: "", path: "/ssl", endpoints: ep, annotations: map[string]string{"metalgate.io/ssl-redirect": "true"}},
		route{host: "", path: "/force", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/force-ssl-redirect": "true"}},
		route{host: "", path: "/signin", endpoints: ep, annotations: signin("https://login.example/start?host=$host")},
		route{host: "", path: "/rd", endpoints: ep, annotations: signin("https://login.example/start")},
		route{host: "", path: "/perm", endpoints: ep, annotations: map[string]string{"metalgate.io/permanent-redirect": "https://new.example/"}},
		route{host: "", path: "/temp", endpoints: ep, annotations: map[string]string{"metalgate.io/temporary-redirect": "/moved"}},
		route{host: "", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/app-root": "/app"}},
		route{host: "*.wild.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/ssl-redirect": "true"}},
		route{host: "exact.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/ssl-redirect": "true"}},
		route{host: "", path: "/gw", endpoints: ep},
	)
	for _, r := range tab.Routes() {
		if r.Path == "/gw" {
			r.Options.Policy.RequestRedirect = &table.RequestRedirect{Scheme: "https", Code: http.StatusFound}
		}
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.H2C = true
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			name, host, path string
			code             int    // 0: refused before the handler (Go's own Host check)
			location         string // "" for none
		}{
			// hostile first: no Location off the rule
			{"host-less: a path in the Host", "evil.com/x", "/ssl", 400, ""},
			{"host-less: a user in the Host", "a@evil.com", "/ssl", 400, ""},
			{"host-less: a backslash", `evil.com\x`, "/ssl", 400, ""},
			{"host-less: a space", "evil.com x", "/ssl", 400, ""},
			{"host-less: percent-encoding", "evil.com%2fx", "/ssl", 400, ""},
			{"host-less: a comma", "evil.com,x", "/force", 400, ""},
			{"host-less: not a port", "ok.example:x", "/force", 400, ""},
			{"host-less: a port out of range", "ok.example:99999", "/force", 400, ""},
			{"host-less: two ports", "ok.example:1:2", "/force", 400, ""},
			{"host-less: an open bracket", "[2001:db8::1", "/force", 400, ""},
			{"host-less: a v6 zone", "[fe80::1%25eth0]", "/force", 400, ""},
			{"auth-signin $host", "evil.com%2f", "/signin", 400, ""},
			{"auth-signin rd=", "evil.com;x", "/rd", 400, ""},
			{"RequestRedirect", "evil.com/x", "/gw", 400, ""},
			{"a wildcard's domain after a path: host-less", "evil.com/x.wild.test", "/ssl", 400, ""},
			{"wildcard: a path in the label", "evil/x.wild.test", "/p", 400, ""},
			{"wildcard: percent-encoding", "evil%2f.wild.test", "/p", 400, ""},
			{"wildcard: a user", "a@evil.wild.test", "/p", 400, ""},
			// fixed targets never name the Host
			{"permanent-redirect", "evil.com%2f", "/perm", 301, "https://new.example/"},
			{"temporary-redirect", "evil.com%2f", "/temp", 302, "/moved"},
			{"app-root", "evil.com%2f", "/", 302, "/app"},
			// what clients send
			{"host-less", "ok.example", "/ssl?q=1", 308, "https://ok.example/ssl?q=1"},
			{"host-less with a port", "OK.example:8080", "/force", 308, "https://ok.example/force"},
			{"host-less, v6 literal", "[2001:db8::1]:8080", "/ssl", 308, "https://[2001:db8::1]/ssl"},
			{"host-less, v4 literal", "192.0.2.1", "/ssl", 308, "https://192.0.2.1/ssl"},
			{"auth-signin $host", "ok.example:8080", "/signin", 302, "https://login.example/start?host=ok.example%3A8080"},
			{"auth-signin rd=", "ok.example", "/rd?x=1", 302, "https://login.example/start?rd=http%3A%2F%2Fok.example%2Frd%3Fx%3D1"},
			{"RequestRedirect", "ok.example", "/gw", 302, "https://ok.example/gw"},
			{"wildcard", "a.wild.test", "/p", 308, "https://a.wild.test/p"},
			{"exact", "EXACT.test:80", "/p", 308, "https://exact.test/p"},
		} {
			for _, via := range []struct {
				name string
				get  func(*testing.T, string, string, string) (int, string)
			}{{"HTTP/1.1", rawGET}, {"HTTP/2", h2cGET}} {
				code, loc := via.get(t, addr, tc.host, tc.path)
				if code == 0 || code == 400 && tc.code == 400 {
					if loc != "" {
						t.Errorf("%s over %s (Host %q): %d with Location %q", tc.name, via.name, tc.host, code, loc)
					}
					continue
				}
				if code != tc.code || loc != tc.location {
					t.Errorf("%s over %s (Host %q): %d Location %q, want %d %q", tc.name, via.name, tc.host, code, loc, tc.code, tc.location)
				}
			}
		}
	})
}

// TestSigninEscapes: the variables of an auth-signin URL are escaped for where they stand: a
// request URI in the query cannot add a parameter (a second rd=), in the path it cannot
// start the query.
func TestSigninEscapes(t *testing.T) {
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	t.Cleanup(auth.Close)
	be := echoBackend(t, "a")
	ep := []string{hostport(be)}
	signin := func(v string) map[string]string {
		return map[string]string{"metalgate.io/auth-url": "http://r0.ns.svc.cluster.local/", "metalgate.io/auth-signin": v}
	}
	tab := buildTable(t,
		route{host: "auth.test", path: "/", endpoints: []string{hostport(auth)}},
		route{host: "q.test", path: "/", endpoints: ep, annotations: signin("https://login.example/start?rd=$request_uri")},
		route{host: "p.test", path: "/", endpoints: ep, annotations: signin("https://login.example/back$request_uri")},
		route{host: "e.test", path: "/", endpoints: ep, annotations: signin("$scheme://$host/oauth2/start?rd=$escaped_request_uri")},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		const uri = "/a?x=1&rd=https://evil.example/"
		for _, tc := range []struct {
			host      string
			wantPath  string
			wantQuery url.Values
		}{
			{"q.test", "/start", url.Values{"rd": {"/a?x=1&rd=https://evil.example/"}}},
			{"p.test", "/back/a?x=1&rd=https://evil.example/", url.Values{}},
			{"e.test", "/oauth2/start", url.Values{"rd": {"/a?x=1&rd=https://evil.example/"}}},
		} {
			code, loc := rawGET(t, addr, tc.host, uri)
			u, err := url.Parse(loc)
			if code != http.StatusFound || err != nil {
				t.Errorf("%s: %d Location %q (%v), want 302", tc.host, code, loc, err)
				continue
			}
			if u.Path != tc.wantPath || u.Query().Encode() != tc.wantQuery.Encode() {
				t.Errorf("%s: Location %q: path %q query %v, want %q %v", tc.host, loc, u.Path, u.Query(), tc.wantPath, tc.wantQuery)
			}
		}
	})
}
