package dataplane

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestAffinityCookieAttributes pins the affinity cookie's attributes as a client receives
// them: Secure whenever the request came over HTTPS (whatever a client's header claims) and,
// by default, not over plain HTTP; the session-cookie-* annotations' Path, Max-Age, Expires,
// SameSite and Secure; SameSite=None always Secure; HttpOnly always.
func TestAffinityCookieAttributes(t *testing.T) {
	type want struct {
		secure   bool
		path     string
		maxAge   int
		expires  time.Duration // from now, 0: none
		sameSite http.SameSite
	}
	lax := want{path: "/", sameSite: http.SameSiteLaxMode}
	for _, tc := range []struct {
		name  string
		host  string
		https bool
		hdr   map[string]string
		want  want
	}{
		// Hostile first: the connection decides, never a client's header.
		{name: "HTTPS claiming http: Secure", host: "default.test", https: true, hdr: map[string]string{"X-Forwarded-Proto": "http"},
			want: want{secure: true, path: "/", sameSite: http.SameSiteLaxMode}},
		{name: "plain HTTP claiming https: not Secure by default", host: "default.test", hdr: map[string]string{"X-Forwarded-Proto": "https"}, want: lax},
		{name: "SameSite None over plain HTTP is Secure", host: "none.test", want: want{secure: true, path: "/", sameSite: http.SameSiteNoneMode}},
		{name: "default over plain HTTP", host: "default.test", want: lax},
		{name: "every attribute, over plain HTTP", host: "attrs.test",
			want: want{secure: true, path: "/app", maxAge: 3600, expires: 2 * time.Hour, sameSite: http.SameSiteStrictMode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := echoBackend(t, "a")
				aff := func(kv ...string) map[string]string {
					m := map[string]string{ingress.PrefixMetalgate + "affinity": "cookie"}
					for i := 0; i < len(kv); i += 2 {
						m[ingress.PrefixNginx+kv[i]] = kv[i+1]
					}
					return m
				}
				tab := buildTable(t,
					route{host: "default.test", path: "/", endpoints: []string{hostport(be)}, tlsSecret: tlsSecretOf(t, "default.test"), annotations: aff()},
					route{host: "none.test", path: "/", endpoints: []string{hostport(be)}, annotations: aff("session-cookie-samesite", "None")},
					route{host: "attrs.test", path: "/", endpoints: []string{hostport(be)}, annotations: aff("session-cookie-path", "/app",
						"session-cookie-max-age", "3600", "session-cookie-expires", "7200", "session-cookie-samesite", "Strict", "session-cookie-secure", "true")},
				)
				_, httpAddr, httpsAddr := startProxy(t, opts, tab)
				url, c := "http://"+httpAddr+"/", http.DefaultClient
				if tc.https {
					tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.host, InsecureSkipVerify: true}}
					t.Cleanup(tr.CloseIdleConnections)
					url, c = "https://"+httpsAddr+"/", &http.Client{Transport: tr}
				}
				hdr := map[string]string{"Host": tc.host}
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				before := time.Now()
				resp, _ := get(t, c, url, hdr)
				sc := resp.Header.Values("Set-Cookie")
				if resp.StatusCode != http.StatusOK || len(sc) != 1 {
					t.Fatalf("status %d, Set-Cookie %q; want 200 and one cookie", resp.StatusCode, sc)
				}
				ck, err := http.ParseSetCookie(sc[0])
				if err != nil {
					t.Fatalf("parse %q: %v", sc[0], err)
				}
				if ck.Name != table.DefaultAffinityCookie || !ck.HttpOnly || ck.Secure != tc.want.secure || ck.Path != tc.want.path ||
					ck.MaxAge != tc.want.maxAge || ck.SameSite != tc.want.sameSite {
					t.Errorf("Set-Cookie %q: want %+v, HttpOnly", sc[0], tc.want)
				}
				switch {
				case tc.want.expires == 0 && !ck.Expires.IsZero():
					t.Errorf("Set-Cookie %q: Expires, want none", sc[0])
				case tc.want.expires != 0:
					// Expires has second precision: within a second of the request's span.
					lo, hi := before.Add(tc.want.expires-time.Second), time.Now().Add(tc.want.expires+time.Second)
					if ck.Expires.Before(lo) || ck.Expires.After(hi) {
						t.Errorf("Set-Cookie %q: Expires %v, want about %v from now", sc[0], ck.Expires, tc.want.expires)
					}
				}
			})
		})
	}
}
