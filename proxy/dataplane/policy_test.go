package dataplane

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// noFollow is a client that shows redirects instead of following them.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestPolicyRewriteAndHeaders: path rewrites (prefix, and regex with groups, in both
// annotation forms), upstream-vhost, X-Forwarded-Prefix and request and response header
// edits reach the backend and the client alike on both forwarding paths.
func TestPolicyRewriteAndHeaders(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend-Secret", "internal")
		w.Header().Set("X-Kept", "yes")
		_ = json.NewEncoder(w).Encode(echoReply{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header})
	}))
	t.Cleanup(be.Close)
	ep := []string{hostport(be)}
	tab := buildTable(t,
		route{host: "p.test", path: "/api", endpoints: ep, annotations: map[string]string{
			"metalgate.io/rewrite-target":          "/v2",
			"metalgate.io/upstream-vhost":          "internal.svc",
			"metalgate.io/x-forwarded-prefix":      "/api",
			"metalgate.io/request-headers-set":     "X-Tenant: one\nX-Forwarded-For: 192.0.2.99",
			"metalgate.io/request-headers-add":     "X-Multi: b",
			"metalgate.io/request-headers-remove":  "Cookie",
			"metalgate.io/response-headers-set":    "Cache-Control: no-store",
			"metalgate.io/response-headers-remove": "X-Backend-Secret",
		}},
		route{host: "r.test", path: "/something(/|$)(.*)", endpoints: ep, annotations: map[string]string{
			"nginx.ingress.kubernetes.io/rewrite-target": "/$2"}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		resp, e := get(t, http.DefaultClient, "http://"+addr+"/api/users?id=7", map[string]string{"Host": "p.test", "Cookie": "session=x", "X-Multi": "a"})
		for _, c := range []struct{ what, got, want string }{
			{"path", e.Path, "/v2/users"},
			{"query", e.Query, "id=7"},
			{"Host", e.Host, "internal.svc"},
			{"X-Forwarded-Host", strings.Join(e.Header["X-Forwarded-Host"], ","), "p.test"},
			{"X-Forwarded-Prefix", strings.Join(e.Header["X-Forwarded-Prefix"], ","), "/api"},
			{"X-Tenant", strings.Join(e.Header["X-Tenant"], ","), "one"},
			{"X-Forwarded-For (set)", strings.Join(e.Header["X-Forwarded-For"], ","), "192.0.2.99"},
			{"X-Multi", strings.Join(e.Header["X-Multi"], ","), "a,b"},
			{"Cookie", strings.Join(e.Header["Cookie"], ","), ""},
			{"response Cache-Control", resp.Header.Get("Cache-Control"), "no-store"},
			{"response X-Backend-Secret", resp.Header.Get("X-Backend-Secret"), ""},
			{"response X-Kept", resp.Header.Get("X-Kept"), "yes"},
		} {
			if c.got != c.want {
				t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
			}
		}
		for target, want := range map[string]string{"/something/new/x": "/new/x", "/something": "/", "/SOMETHING/up": "/up"} {
			_, e := get(t, http.DefaultClient, "http://"+addr+target, map[string]string{"Host": "r.test"})
			if e.Path != want {
				t.Errorf("nginx rewrite of %s: backend saw %q, want %q", target, e.Path, want)
			}
		}
	})
}

// TestPolicyRedirects: fixed redirects, app-root and the redirect to HTTPS (metalgate's
// always; ingress-nginx's only for hosts with TLS; force-ssl-redirect always).
func TestPolicyRedirects(t *testing.T) {
	be := echoBackend(t, "a")
	ep := []string{hostport(be)}
	tab := buildTable(t,
		route{host: "perm.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/permanent-redirect": "https://new.example/"}},
		route{host: "temp.test", path: "/", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/temporal-redirect": "/moved", "nginx.ingress.kubernetes.io/temporal-redirect-code": "307"}},
		route{host: "root.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/app-root": "/app"}},
		route{host: "mg-ssl.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/ssl-redirect": "true"}},
		route{host: "nginx-ssl.test", path: "/", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "true"}},
		route{host: "force.test", path: "/", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/force-ssl-redirect": "true"}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			host, path string
			code       int
			location   string
		}{
			{"perm.test", "/x", 301, "https://new.example/"},
			{"temp.test", "/x", 307, "/moved"},
			{"root.test", "/", 302, "/app"},
			{"root.test", "/other", 200, ""},
			{"mg-ssl.test", "/p?q=1", 308, "https://mg-ssl.test/p?q=1"},
			{"nginx-ssl.test", "/p", 200, ""}, // no TLS on this host: ingress-nginx does not redirect
			{"force.test", "/p", 308, "https://force.test/p"},
		} {
			resp, _ := get(t, noFollow, "http://"+addr+tc.path, map[string]string{"Host": tc.host})
			if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.location {
				t.Errorf("%s%s: %d Location %q, want %d %q", tc.host, tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.code, tc.location)
			}
		}
	})
}

// TestPolicySourceRanges: allow and deny lists judge the client's own address, or, behind a
// trusted proxy, the right-most untrusted X-Forwarded-For address.
func TestPolicySourceRanges(t *testing.T) {
	be := echoBackend(t, "a")
	ep := []string{hostport(be)}
	tab := buildTable(t,
		route{host: "allow.test", path: "/", endpoints: ep, annotations: map[string]string{"metalgate.io/allowlist-source-range": "10.0.0.0/8"}},
		route{host: "deny.test", path: "/", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/denylist-source-range": "127.0.0.0/8"}},
		route{host: "both.test", path: "/", endpoints: ep, annotations: map[string]string{"nginx.ingress.kubernetes.io/whitelist-source-range": "192.0.2.0/24", "metalgate.io/denylist-source-range": "192.0.2.66"}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		_, addr, _ := startProxy(t, opts, tab)
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		_, trustedAddr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			via, host, xff string
			want           int
		}{
			{addr, "allow.test", "", 403},
			{addr, "deny.test", "", 403},
			{addr, "both.test", "", 403},
			{addr, "allow.test", "10.1.2.3", 403}, // an untrusted client's X-Forwarded-For counts for nothing
			{trustedAddr, "allow.test", "10.1.2.3", 200},
			{trustedAddr, "allow.test", "10.1.2.3, 203.0.113.9", 403}, // the right-most untrusted address
			{trustedAddr, "deny.test", "198.51.100.1", 200},
			{trustedAddr, "both.test", "192.0.2.5", 200},
			{trustedAddr, "both.test", "192.0.2.66", 403},
		} {
			hdr := map[string]string{"Host": tc.host}
			if tc.xff != "" {
				hdr["X-Forwarded-For"] = tc.xff
			}
			if resp, _ := get(t, http.DefaultClient, "http://"+tc.via+"/", hdr); resp.StatusCode != tc.want {
				t.Errorf("%s from %q (trusted %v): %d, want %d", tc.host, tc.xff, tc.via == trustedAddr, resp.StatusCode, tc.want)
			}
		}
		if n := testutil.ToFloat64(opts.Metrics.LimitHits.WithLabelValues(limitSourceRange)); n != 6 {
			t.Errorf("source_range counted %v times, want 6 (4 + 2: the two proxies count into one registry)", n)
		}
	})
}

// TestPolicyRateLimit: a client over its rate gets 429 with Retry-After; other Ingresses and
// clients have buckets of their own; a client with as many requests in flight as allowed
// gets 429 for the next one, and its place back when one ends.
func TestPolicyRateLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	t.Cleanup(slow.Close)
	fast := echoBackend(t, "a")
	tab := buildTable(t,
		route{host: "rps.test", path: "/", endpoints: []string{hostport(fast)}, annotations: map[string]string{"metalgate.io/limit-rps": "1", "metalgate.io/limit-burst": "2"}},
		route{host: "other.test", path: "/", endpoints: []string{hostport(fast)}, annotations: map[string]string{"nginx.ingress.kubernetes.io/limit-rpm": "60"}},
		route{host: "conn.test", path: "/", endpoints: []string{hostport(slow)}, annotations: map[string]string{"metalgate.io/limit-connections": "1"}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for i, want := range []int{200, 200, 429} {
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "rps.test"})
			if resp.StatusCode != want {
				t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
			}
			if want == 429 {
				if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
				}
			}
		}
		if resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "other.test"}); resp.StatusCode != 200 {
			t.Errorf("another Ingress shares the bucket: %d", resp.StatusCode)
		}

		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := statusOf(t, "http://"+addr+"/", "conn.test"); code != 200 {
				t.Errorf("first request in flight: %d", code)
			}
		}()
		<-entered
		if code := statusOf(t, "http://"+addr+"/", "conn.test"); code != 429 {
			t.Errorf("second request while one is in flight: %d, want 429", code)
		}
		release <- struct{}{}
		wg.Wait()
		go func() { <-entered; release <- struct{}{} }()
		if code := statusOf(t, "http://"+addr+"/", "conn.test"); code != 200 {
			t.Errorf("after the first ended: %d, want 200", code)
		}
	})
}

// TestPolicyCORS: preflights are answered by the proxy for allowed origins; responses carry
// the CORS headers for an allowed origin and none for another.
func TestPolicyCORS(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "c.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{
		"nginx.ingress.kubernetes.io/enable-cors":        "true",
		"nginx.ingress.kubernetes.io/cors-allow-origin":  "https://app.example",
		"nginx.ingress.kubernetes.io/cors-allow-methods": "GET, POST",
		"metalgate.io/cors-expose-headers":               "X-Total",
		"metalgate.io/cors-max-age":                      "600",
	}})
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		req, _ := http.NewRequest(http.MethodOptions, "http://"+addr+"/x", nil)
		req.Host = "c.test"
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]string{"Access-Control-Allow-Origin": "https://app.example", "Access-Control-Allow-Methods": "GET, POST",
			"Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true"}
		if resp.StatusCode != 204 {
			t.Errorf("preflight: %d, want 204", resp.StatusCode)
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("preflight %s: %q, want %q", k, got, v)
			}
		}
		for origin, wantAllow := range map[string]string{"https://app.example": "https://app.example", "https://evil.example": ""} {
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "c.test", "Origin": origin})
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != wantAllow {
				t.Errorf("GET from %s: Allow-Origin %q, want %q", origin, got, wantAllow)
			}
			if wantAllow != "" && resp.Header.Get("Access-Control-Expose-Headers") != "X-Total" {
				t.Errorf("GET from %s: Expose-Headers %q", origin, resp.Header.Get("Access-Control-Expose-Headers"))
			}
		}
	})
}

// TestPolicyTimeouts: a route's proxy-read-timeout bounds the wait for the backend's answer
// (504) while the proxy's own is long; proxy-connect-timeout bounds the dial.
func TestPolicyTimeouts(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	tab := buildTable(t, route{host: "t.test", path: "/", endpoints: []string{hostport(slow)}, annotations: map[string]string{
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "1"}})
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.ResponseHeaderTimeout = time.Minute
		_, addr, _ := startProxy(t, opts, tab)
		start := time.Now()
		resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "t.test"})
		if took := time.Since(start); resp.StatusCode != 504 || took > 10*time.Second {
			t.Errorf("status %d after %v, want 504 after about 1s", resp.StatusCode, took)
		}
	})
}

// TestNginxAnnotationsProblems: through the table builder, unsupported nginx annotations and
// snippets are problems of the Ingress (Warning events), never silently ignored.
func TestNginxAnnotationsProblems(t *testing.T) {
	be := echoBackend(t, "a")
	r := route{host: "n.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{
		"nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers 'X: y';",
		"nginx.ingress.kubernetes.io/mirror-target":         "http://m/",
	}}
	_, problems := buildTableProblems(t, r)
	var got []string
	for _, p := range problems {
		got = append(got, fmt.Sprintf("%s %s", p.Reason, strings.SplitN(p.Message, " ", 3)[1]))
	}
	want := "RefusedAnnotation nginx.ingress.kubernetes.io/configuration-snippet,UnsupportedAnnotation nginx.ingress.kubernetes.io/mirror-target"
	if strings.Join(got, ",") != want {
		t.Errorf("problems %v, want %s", got, want)
	}
}

// statusOf sends GET url with Host host and returns the status (the body is discarded).
func statusOf(t *testing.T, url, host string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s (Host %s): %v", url, host, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCanary: a canary Ingress takes the requests its rule selects — by header (always,
// never, a value), by cookie, by weight — and the main Ingress's backend the others.
func TestCanary(t *testing.T) {
	stable, canary := hostport(echoBackend(t, "stable")), hostport(echoBackend(t, "canary"))
	tab := buildTable(t,
		route{host: "c.test", path: "/", endpoints: []string{stable}},
		route{host: "c.test", path: "/", endpoints: []string{canary}, annotations: map[string]string{
			"nginx.ingress.kubernetes.io/canary": "true", "nginx.ingress.kubernetes.io/canary-by-header": "X-Canary",
			"nginx.ingress.kubernetes.io/canary-by-cookie": "beta"}},
		route{host: "v.test", path: "/", endpoints: []string{stable}},
		route{host: "v.test", path: "/", endpoints: []string{canary}, annotations: map[string]string{
			"metalgate.io/canary": "true", "metalgate.io/canary-by-header": "X-Version", "metalgate.io/canary-by-header-value": "2",
			"metalgate.io/canary-weight": "100"}},
		route{host: "w.test", path: "/", endpoints: []string{stable}},
		route{host: "w.test", path: "/", endpoints: []string{canary}, annotations: map[string]string{
			"metalgate.io/canary": "true", "metalgate.io/canary-weight": "30", "metalgate.io/canary-weight-total": "60"}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			host string
			hdr  map[string]string
			want string
		}{
			{"c.test", nil, "stable"},
			{"c.test", map[string]string{"X-Canary": "always"}, "canary"},
			{"c.test", map[string]string{"X-Canary": "never", "Cookie": "beta=always"}, "stable"}, // the header first
			{"c.test", map[string]string{"X-Canary": "maybe", "Cookie": "beta=always"}, "canary"}, // another value: ignored
			{"c.test", map[string]string{"Cookie": "beta=never"}, "stable"},
			{"v.test", map[string]string{"X-Version": "2"}, "canary"},
			{"v.test", map[string]string{"X-Version": "1"}, "canary"}, // not the value: the weight (100) decides
		} {
			hdr := map[string]string{"Host": tc.host}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			if _, e := get(t, http.DefaultClient, "http://"+addr+"/", hdr); e.Backend != tc.want {
				t.Errorf("%s %v: %s, want %s", tc.host, tc.hdr, e.Backend, tc.want)
			}
		}
		seen := map[string]int{}
		for i := 0; i < 200; i++ {
			_, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "w.test"})
			seen[e.Backend]++
		}
		// Half of the requests by weight: both see traffic (a miss has odds of 2^-200).
		if seen["canary"] == 0 || seen["stable"] == 0 {
			t.Errorf("weight 30 of 60: %v", seen)
		}
	})
}

// TestBasicAuth: users of an htpasswd Secret (bcrypt, $apr1$) get through, anyone else gets
// 401 with a challenge and never reaches the backend; a route whose Secret is missing
// refuses everyone (it never fails open) and says why.
func TestBasicAuth(t *testing.T) {
	var mu sync.Mutex
	reached := 0
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(echoReply{Backend: "a"})
	}))
	t.Cleanup(be.Close)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "users"}, Data: map[string][]byte{
		"auth": []byte("alice:$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm\ncarol:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n")}}
	r := []route{
		{host: "a.test", path: "/", endpoints: []string{hostport(be)}, secrets: []*corev1.Secret{secret}, annotations: map[string]string{
			"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": "users", "nginx.ingress.kubernetes.io/auth-realm": "Staff"}},
		{host: "gone.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{
			"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "nope"}},
	}
	tab, problems := buildTableProblems(t, r...)
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "Secret ns/nope not found") {
		t.Fatalf("problems %v, want the missing Secret", problems)
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		mu.Lock()
		reached = 0
		mu.Unlock()
		for _, tc := range []struct {
			host, user, pass string
			want             int
		}{
			{"a.test", "alice", "secret1", 200},
			{"a.test", "alice", "secret1", 200}, // from the cache this time
			{"a.test", "carol", "myPassword", 200},
			{"a.test", "alice", "wrong", 401},
			{"a.test", "mallory", "secret1", 401},
			{"a.test", "", "", 401},
			{"gone.test", "alice", "secret1", 401},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			req.Host = tc.host
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s as %q: %d, want %d", tc.host, tc.user, resp.StatusCode, tc.want)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s as %q: 401 without a challenge", tc.host, tc.user)
			}
		}
		if got := resp401Realm(t, addr); got != `Basic realm="Staff", charset="UTF-8"` {
			t.Errorf("challenge %q", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if reached != 3 {
			t.Errorf("the backend saw %d requests, want the 3 authenticated ones", reached)
		}
	})
}

func resp401Realm(t *testing.T, addr string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = "a.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("WWW-Authenticate")
}

// TestExternalAuth: the authentication service (a Service of the same namespace) sees the
// request's headers and where it was going; 2xx lets it through with the service's
// auth-response-headers (a client's own copy of them never reaches the backend); 401 sends
// the client to auth-signin or answers 401; 403 answers 403; an auth-url outside the
// namespace is refused and the route then refuses everything.
func TestExternalAuth(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		switch c, _ := r.Cookie("session"); {
		case c == nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="app"`)
			w.WriteHeader(http.StatusUnauthorized)
		case c.Value == "alice":
			w.Header().Set("X-Auth-Request-User", "alice")
		case c.Value == "nobody":
			// 200 without the user header
		default:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(auth.Close)
	app := echoBackend(t, "app")
	ann := func(extra ...string) map[string]string {
		m := map[string]string{"nginx.ingress.kubernetes.io/auth-url": "http://r0.ns.svc.cluster.local/check?x=1",
			"nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-Request-User"}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	routes := []route{
		{host: "auth.test", path: "/", endpoints: []string{hostport(auth)}}, // r0: the auth Service
		{host: "a.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann()},
		{host: "s.test", path: "/", endpoints: []string{hostport(app)}, annotations: ann("nginx.ingress.kubernetes.io/auth-signin", "https://login.example/start")},
		{host: "far.test", path: "/", endpoints: []string{hostport(app)}, annotations: map[string]string{"metalgate.io/auth-url": "http://auth.other.svc.cluster.local/check"}},
		{host: "out.test", path: "/", endpoints: []string{hostport(app)}, annotations: map[string]string{"metalgate.io/auth-url": "http://169.254.169.254/latest"}},
	}
	tab, problems := buildTableProblems(t, routes...)
	if len(problems) != 2 {
		t.Fatalf("problems %v, want the two refused auth-urls", problems)
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			host, cookie, clientUser string
			want                     int
			wantUser, wantLocation   string
		}{
			{host: "a.test", want: 401},
			{host: "a.test", cookie: "alice", clientUser: "mallory", want: 200, wantUser: "alice"},
			{host: "a.test", cookie: "nobody", clientUser: "mallory", want: 200, wantUser: ""},
			{host: "a.test", cookie: "eve", want: 403},
			{host: "s.test", want: 302, wantLocation: "https://login.example/start?rd=http%3A%2F%2Fs.test%2Fdeep%3Fq%3D1"},
			{host: "far.test", cookie: "alice", want: 500},
			{host: "out.test", cookie: "alice", want: 500},
		} {
			hdr := map[string]string{"Host": tc.host}
			if tc.cookie != "" {
				hdr["Cookie"] = "session=" + tc.cookie
			}
			if tc.clientUser != "" {
				hdr["X-Auth-Request-User"] = tc.clientUser
			}
			resp, e := get(t, noFollow, "http://"+addr+"/deep?q=1", hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("%s cookie %q: %d, want %d", tc.host, tc.cookie, resp.StatusCode, tc.want)
				continue
			}
			if got := strings.Join(e.Header["X-Auth-Request-User"], ","); tc.want == 200 && got != tc.wantUser {
				t.Errorf("%s cookie %q: backend saw X-Auth-Request-User %q, want %q", tc.host, tc.cookie, got, tc.wantUser)
			}
			if tc.wantLocation != "" && resp.Header.Get("Location") != tc.wantLocation {
				t.Errorf("%s: Location %q, want %q", tc.host, resp.Header.Get("Location"), tc.wantLocation)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") != `Bearer realm="app"` {
				t.Errorf("%s: challenge %q", tc.host, resp.Header.Get("WWW-Authenticate"))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for k, want := range map[string]string{"X-Original-Url": "http://s.test/deep?q=1", "X-Original-Method": "GET", "X-Auth-Request-Redirect": "/deep?q=1", "X-Forwarded-Host": "s.test"} {
			if got := seen.Get(k); got != want {
				t.Errorf("the auth service saw %s %q, want %q", k, got, want)
			}
		}
	})
}

// TestUnenforceableProtectionRefused: an Ingress asking for a protection the proxy cannot
// enforce — client certificates without a CA Secret it can read (auth-tls-*, verify on or
// optional), an address list it cannot read — is refused (403) with a Warning, whoever asks: without a certificate, with one from
// another CA, over HTTP or HTTPS; its backend never sees a request. The Ingress beside it is
// served.
func TestUnenforceableProtectionRefused(t *testing.T) {
	var hits atomic.Int64
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(guarded.Close)
	open := echoBackend(t, "open")
	tlsSecret := func(name string) *corev1.Secret {
		crt, key := pemCert(t, name)
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	}
	ng := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m["nginx.ingress.kubernetes.io/"+kv[i]] = kv[i+1]
		}
		return m
	}
	tab, problems := buildTableProblems(t,
		route{host: "mtls.test", path: "/", endpoints: []string{hostport(guarded)}, tlsSecret: tlsSecret("mtls.test"),
			annotations: ng("auth-tls-verify-client", "on", "auth-tls-secret", "ns/client-ca")},
		route{host: "optional.test", path: "/", endpoints: []string{hostport(guarded)}, annotations: ng("auth-tls-verify-client", "optional")},
		route{host: "secret.test", path: "/", endpoints: []string{hostport(guarded)}, annotations: ng("auth-tls-secret", "client-ca")},
		route{host: "badlist.test", path: "/", endpoints: []string{hostport(guarded)}, annotations: ng("allowlist-source-range", "10.0.0.0/8, intranet")},
		route{host: "open.test", path: "/", endpoints: []string{hostport(open)}},
	)
	warned := map[string]bool{}
	for _, p := range problems {
		if strings.Contains(p.Message, "every request is refused (403)") {
			warned[p.Object.Name] = true
		}
	}
	if want := map[string]bool{"r0": true, "r1": true, "r2": true, "r3": true}; !maps.Equal(warned, want) {
		t.Errorf("Ingresses warned of the refusal: %v, want %v (problems %v)", warned, want, problems)
	}
	_, _, foreign := newTestCA(t, "another CA").issue(t, "client")
	forEachPath(t, func(t *testing.T, opts Options) {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		_, addr, tlsAddr := startProxy(t, opts, tab)
		for _, host := range []string{"mtls.test", "optional.test", "secret.test", "badlist.test"} {
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": host, "Ssl-Client-Verify": "SUCCESS"})
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s over HTTP: %d, want 403", host, resp.StatusCode)
			}
		}
		for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's certificate": {foreign}} {
			tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "mtls.test", InsecureSkipVerify: true, Certificates: certs}, ForceAttemptHTTP2: true}
			resp, _ := get(t, &http.Client{Transport: tr}, "https://"+tlsAddr+"/", map[string]string{"Host": "mtls.test"})
			tr.CloseIdleConnections()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("mtls.test over HTTPS with %s: %d, want 403", name, resp.StatusCode)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the protected backend saw %d requests", n)
		}
		if resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "open.test"}); resp.StatusCode != 200 || e.Backend != "open" {
			t.Errorf("open.test: %d from %q, want 200 from open", resp.StatusCode, e.Backend)
		}
		if n := testutil.ToFloat64(opts.Metrics.LimitHits.WithLabelValues(limitRefusedRoute)); n != 6 {
			t.Errorf("limit_hits{refused_route} = %v, want 6", n)
		}
	})
}

// TestPolicyCORSWildcard: an Ingress's cors-allow-origin is matched by the Gateway filter's
// matcher (ingress-nginx semantics): https://*.example.org allows one or more labels before
// example.org, in any case, never the bare domain, a look-alike, another scheme or port, or
// "null" — on preflights and on forwarded responses.
func TestPolicyCORSWildcard(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "w.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{
		"nginx.ingress.kubernetes.io/enable-cors":       "true",
		"nginx.ingress.kubernetes.io/cors-allow-origin": "https://*.example.org, http://localhost:3000",
	}})
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			origin string
			allow  bool
		}{
			{"https://example.org", false},
			{"https://evilexample.org", false},
			{"https://example.org.evil.test", false},
			{"https://a.example.org.evil.test", false},
			{"http://a.example.org", false},
			{"https://a.example.org:8443", false},
			{"https://*.example.org", false},
			{"null", false},
			{"http://localhost:3001", false},
			{"https://a.example.org", true},
			{"https://a.b.example.org", true},
			{"HTTPS://A.Example.ORG", true},
			{"https://a.example.org:443", true},
			{"http://localhost:3000", true},
		} {
			want := ""
			if tc.allow {
				want = tc.origin
			}
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "w.test", "Origin": tc.origin})
			if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != 200 || got != want {
				t.Errorf("GET from %s: %d, Allow-Origin %q, want %q", tc.origin, resp.StatusCode, got, want)
			}
			req, _ := http.NewRequest(http.MethodOptions, "http://"+addr+"/", nil)
			req.Host = "w.test"
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Access-Control-Request-Method", "PUT")
			pre, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			pre.Body.Close()
			if got := pre.Header.Get("Access-Control-Allow-Origin"); pre.StatusCode != 204 || got != want {
				t.Errorf("preflight from %s: %d, Allow-Origin %q, want %q", tc.origin, pre.StatusCode, got, want)
			}
		}
	})
}
