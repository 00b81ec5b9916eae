package dataplane

import (
	"net/http"
	"strings"
	"testing"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestAffinityMode pins affinity-mode on both forwarding paths: a forged cookie pins
// nothing it should not, a persistent session keeps its endpoint when endpoints are added,
// and a balanced one may move, but only onto a new endpoint (a consistent hash: no session
// moves between the old ones).
func TestAffinityMode(t *testing.T) {
	const sessions = 40
	for _, tc := range []struct {
		mode      string // affinity-mode; "" the default (balanced)
		wantMoves bool
	}{
		{mode: "persistent"},
		{mode: "balanced", wantMoves: true},
		{mode: "", wantMoves: true},
	} {
		name := tc.mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var eps []string
				names := map[string]string{} // endpoint → backend name
				for _, n := range []string{"a", "b", "c", "d"} {
					be := echoBackend(t, n)
					eps = append(eps, hostport(be))
					names[hostport(be)] = n
				}
				ann := map[string]string{ingress.PrefixNginx + "affinity": "cookie"}
				if tc.mode != "" {
					ann[ingress.PrefixNginx+"affinity-mode"] = tc.mode
				}
				s, addr, _ := startProxy(t, opts, buildTable(t, route{host: "s.test", path: "/", endpoints: eps[:2], annotations: ann}))
				cookieOf := func(resp *http.Response) string {
					for _, c := range resp.Cookies() {
						if c.Name == table.DefaultAffinityCookie {
							return c.Value
						}
					}
					return ""
				}
				// Hostile first: a forged value is replaced when it cannot be a session key (too
				// long) or, persistent, names no endpoint; a balanced key of the client's own
				// choosing only picks an endpoint, as a new one would.
				for _, forged := range []string{strings.Repeat("A", 200), "not-an-endpoint-name"} {
					resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "s.test", "Cookie": table.DefaultAffinityCookie + "=" + forged})
					replaced := len(forged) > maxSessionKey || tc.mode == "persistent"
					if v := cookieOf(resp); replaced && (v == "" || v == forged) || !replaced && v != "" {
						t.Errorf("forged cookie %.20q…: Set-Cookie %q; want a new value: %v", forged, v, replaced)
					}
					if e.Backend != "a" && e.Backend != "b" {
						t.Errorf("forged cookie sent the request to %q", e.Backend)
					}
				}
				before := make([]string, sessions)
				cookies := make([]string, sessions)
				for i := range cookies {
					resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "s.test"})
					if cookies[i] = cookieOf(resp); cookies[i] == "" {
						t.Fatalf("no affinity cookie: %v", resp.Header["Set-Cookie"])
					}
					before[i] = e.Backend
					// The session sticks while nothing changes, and is not given a new cookie.
					resp, e = get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "s.test", "Cookie": table.DefaultAffinityCookie + "=" + cookies[i]})
					if e.Backend != before[i] || cookieOf(resp) != "" {
						t.Fatalf("session %d: went to %s (was %s), Set-Cookie %q", i, e.Backend, before[i], resp.Header["Set-Cookie"])
					}
				}
				s.Swap(buildTable(t, route{host: "s.test", path: "/", endpoints: eps, annotations: ann})) // scale up: c and d
				moved := 0
				for i, c := range cookies {
					_, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "s.test", "Cookie": table.DefaultAffinityCookie + "=" + c})
					if e.Backend == before[i] {
						continue
					}
					moved++
					if e.Backend != "c" && e.Backend != "d" {
						t.Errorf("session %d moved from %s to %s, another old endpoint", i, before[i], e.Backend)
					}
				}
				switch {
				case tc.wantMoves && moved == 0:
					t.Errorf("no session of %d moved to the new endpoints; balanced mode should move some", sessions)
				case !tc.wantMoves && moved > 0:
					t.Errorf("%d sessions of %d moved; persistent mode keeps them", moved, sessions)
				}
			})
		})
	}
}
