package dataplane

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rawRequest sends raw bytes to addr and reads one response (its body too).
func rawRequest(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestPathNormalisation: a request is routed, and forwarded, by its normalised path, on
// both paths, so "/public/../admin" in any spelling reaches the /admin backend as "/admin"
// (never the /public backend, which would resolve the dots itself), and encoded slashes
// are refused.
func TestPathNormalisation(t *testing.T) {
	public, admin := echoBackend(t, "public"), echoBackend(t, "admin")
	tab := buildTable(t,
		route{host: "p.test", path: "/public", endpoints: []string{hostport(public)}},
		route{host: "p.test", path: "/admin", endpoints: []string{hostport(admin)}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, tc := range []struct {
			target      string
			wantStatus  int
			wantBackend string
			wantPath    string
		}{
			{"/public/../admin", 200, "admin", "/admin"},
			{"/public/%2e%2e/admin", 200, "admin", "/admin"},
			{"/public/%2E%2E/admin?x=1", 200, "admin", "/admin"},
			{"/public/..%2fadmin", 400, "", ""},
			{"/public%5C..%5Cadmin", 400, "", ""},
			{"/public\\..\\admin", 400, "", ""},
			{"/public//x", 200, "public", "/public/x"},
			{"/public/./x", 200, "public", "/public/x"},
			{"/%70ublic/x", 200, "public", "/public/x"},
		} {
			resp, body := rawRequest(t, addr, "GET "+tc.target+" HTTP/1.1\r\nHost: p.test\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("%s: status %d, want %d (%s)", tc.target, resp.StatusCode, tc.wantStatus, body)
				continue
			}
			if tc.wantStatus != 200 {
				continue
			}
			var e echoReply
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("%s: %v in %q", tc.target, err, body)
			}
			if e.Backend != tc.wantBackend || e.Path != tc.wantPath {
				t.Errorf("%s reached backend %q as %q, want %q as %q", tc.target, e.Backend, e.Path, tc.wantBackend, tc.wantPath)
			}
		}
	})
}

// TestRequestHeaderPolicy: headers with '_' (X_Forwarded_For would read as
// X-Forwarded-For behind CGI/WSGI servers), an h2c upgrade (a tunnel past routing) and
// Expect do not reach the backend; AllowUnderscoreHeaders lets the first through.
func TestRequestHeaderPolicy(t *testing.T) {
	be := echoBackend(t, "a")
	tab := buildTable(t, route{host: "u.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		for _, allow := range []bool{false, true} {
			opts.AllowUnderscoreHeaders = allow
			_, addr, _ := startProxy(t, opts, tab)
			_, body := rawRequest(t, addr, "GET / HTTP/1.1\r\nHost: u.test\r\nX_Forwarded_For: 6.6.6.6\r\nX-Plain: yes\r\n"+
				"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
			var e echoReply
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("%v in %q", err, body)
			}
			if got := e.Header["X_forwarded_for"]; allow != (len(got) == 1) {
				t.Errorf("allow=%v: backend saw X_Forwarded_For %q", allow, got)
			}
			for _, k := range []string{"Upgrade", "Http2-Settings", "Connection"} {
				if v := e.Header[k]; len(v) > 0 {
					t.Errorf("allow=%v: backend saw %s: %q", allow, k, v)
				}
			}
			if e.Header["X-Plain"] == nil || e.Header["X-Forwarded-For"][0] != "127.0.0.1" {
				t.Errorf("allow=%v: headers at the backend: %v", allow, e.Header)
			}
		}
		_, addr, _ := startProxy(t, opts, tab)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("body"))
		req.Host = "u.test"
		req.Header.Set("Expect", "100-continue")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e echoReply
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if e.Body != "body" || e.Header["Expect"] != nil {
			t.Errorf("Expect: backend saw body %q, Expect %q", e.Body, e.Header["Expect"])
		}
	})
}

// TestMalformedClientBody: a client whose chunked body breaks half-way gets 400, and the
// backend never sees a whole request (it reads an error, not a shorter body).
func TestMalformedClientBody(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	got := make(chan struct{}, 16)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		mu.Lock()
		if err != nil {
			seen = append(seen, "error after "+string(b))
		} else {
			seen = append(seen, "complete: "+string(b))
		}
		mu.Unlock()
		got <- struct{}{}
	}))
	defer be.Close()
	tab := buildTable(t, route{host: "c.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		_, addr, _ := startProxy(t, opts, tab)
		for _, raw := range []string{
			"POST / HTTP/1.1\r\nHost: c.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\nmore\r\n0\r\n\r\n",
			"POST / HTTP/1.1\r\nHost: c.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n",
		} {
			resp, _ := rawRequest(t, addr, raw)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
		}
		// The backend either never saw the requests, or saw them fail: wait for what it
		// saw (the proxy closes the backend connection, ending its read), then look.
		deadline := time.After(3 * time.Second)
		for n := 0; n < 2; n++ {
			select {
			case <-got:
			case <-deadline:
				n = 2
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if strings.HasPrefix(s, "complete") {
				t.Errorf("the backend took a truncated request as whole: %s", s)
			}
		}
		seen = nil
	})
}

// TestMisdirectedRequest: on TLS, a request whose Host has another certificate than the
// one the connection was made for (its SNI) gets 421, over HTTP/1.1 and HTTP/2; hosts that
// share the certificate may share the connection.
func TestMisdirectedRequest(t *testing.T) {
	be := echoBackend(t, "a")
	secret := func(name string) *corev1.Secret {
		crt, key := pemCert(t, name)
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	}
	tab := buildTable(t,
		route{host: "a.test", path: "/", endpoints: []string{hostport(be)}, tlsSecret: secret("a.test")},
		route{host: "b.test", path: "/", endpoints: []string{hostport(be)}, tlsSecret: secret("b.test")},
		route{host: "plain.test", path: "/", endpoints: []string{hostport(be)}},
		route{host: "plain2.test", path: "/", endpoints: []string{hostport(be)}},
	)
	forEachPath(t, func(t *testing.T, opts Options) {
		_, _, tlsAddr := startProxy(t, opts, tab)
		for _, h2 := range []bool{false, true} {
			for _, tc := range []struct {
				sni, host string
				want      int
			}{
				{"a.test", "a.test", 200},
				{"a.test", "A.TEST:443", 200},
				{"a.test", "b.test", 421},
				{"a.test", "plain.test", 421},
				{"plain.test", "a.test", 421},
				{"plain.test", "plain2.test", 200}, // both served by the default certificate
			} {
				tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}, ForceAttemptHTTP2: h2}
				if !h2 {
					tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				resp, _ := get(t, &http.Client{Transport: tr}, "https://"+tlsAddr+"/", map[string]string{"Host": tc.host})
				tr.CloseIdleConnections()
				if resp.StatusCode != tc.want || (resp.ProtoMajor == 2) != h2 {
					t.Errorf("h2=%v SNI %s Host %s: %s %d, want %d", h2, tc.sni, tc.host, resp.Proto, resp.StatusCode, tc.want)
				}
			}
		}
	})
}

// TestResponseHeaderTruth: X-Forwarded-Port is the port clients connect to (the Service's
// 80 and 443 by default), not the listener's; responses carry Server: metalgate (the
// backend's own is replaced; "-" sends none), generated responses included.
func TestResponseHeaderTruth(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "evil/1.0")
		w.Header().Set("X-Request-Id", "backend-chose-this")
		_ = json.NewEncoder(w).Encode(echoReply{Header: r.Header})
	}))
	defer be.Close()
	tab := buildTable(t, route{host: "s.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		for _, tc := range []struct {
			name                  string
			server                string
			httpPort, httpsPort   int
			wantServer            string
			wantPlain, wantSecure string
		}{
			{"defaults", "", 0, 0, "metalgate", "80", "443"},
			{"custom", "edge", 8000, 8443, "edge", "8000", "8443"},
			{"hidden", "-", 0, 0, "", "80", "443"},
		} {
			o := opts
			o.ServerHeader, o.PublicHTTPPort, o.PublicHTTPSPort = tc.server, tc.httpPort, tc.httpsPort
			_, addr, tlsAddr := startProxy(t, o, tab)
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
			for _, u := range []struct{ url, wantPort string }{{"http://" + addr, tc.wantPlain}, {"https://" + tlsAddr, tc.wantSecure}} {
				resp, e := get(t, &http.Client{Transport: tr}, u.url+"/", map[string]string{"Host": "s.test"})
				if got := e.Header["X-Forwarded-Port"]; len(got) != 1 || got[0] != u.wantPort {
					t.Errorf("%s %s: X-Forwarded-Port %q, want %s", tc.name, u.url, got, u.wantPort)
				}
				if got := resp.Header.Values("Server"); strings.Join(got, ",") != tc.wantServer {
					t.Errorf("%s %s: Server %q, want %q", tc.name, u.url, got, tc.wantServer)
				}
				if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] == "backend-chose-this" {
					t.Errorf("%s: X-Request-Id %q, want this hop's one", tc.name, got)
				}
			}
			tr.CloseIdleConnections()
			resp, _ := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "unknown.test"})
			if resp.StatusCode != 404 || resp.Header.Get("Server") != tc.wantServer {
				t.Errorf("%s: 404 with Server %q", tc.name, resp.Header.Get("Server"))
			}
		}
	})
}

// TestAffinityCookieKeyed: the persistent affinity cookie is an HMAC under the install's key, not a
// hash anyone can compute from an address: replicas with one key agree, another key gives
// other values, and the value is not the endpoint's address in any form.
func TestAffinityCookieKeyed(t *testing.T) {
	eps := []string{hostport(echoBackend(t, "b0")), hostport(echoBackend(t, "b1"))}
	tab := buildTable(t, route{host: "k.test", path: "/", endpoints: eps, annotations: map[string]string{"metalgate.io/affinity": "cookie", "metalgate.io/affinity-mode": "persistent"}})
	cookieOf := func(t *testing.T, opts Options) (*http.Cookie, string) {
		_, addr, _ := startProxy(t, opts, tab)
		resp, e := get(t, http.DefaultClient, "http://"+addr+"/", map[string]string{"Host": "k.test"})
		for _, c := range resp.Cookies() {
			if c.Name == "metalgate-affinity" {
				return c, e.Backend
			}
		}
		t.Fatalf("no affinity cookie: %v", resp.Header["Set-Cookie"])
		return nil, ""
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		key := []byte("0123456789abcdef0123456789abcdef")
		opts.AffinityKey = key
		c1, be1 := cookieOf(t, opts)
		if len(c1.Value) != 22 || strings.Contains(c1.Value, "127.0.0.1") {
			t.Errorf("cookie value %q: want 22 characters of HMAC", c1.Value)
		}
		// A second replica with the same key honours the first one's cookie.
		_, addr2, _ := startProxy(t, opts, tab)
		for i := 0; i < 6; i++ {
			_, e := get(t, http.DefaultClient, "http://"+addr2+"/", map[string]string{"Host": "k.test", "Cookie": c1.String()})
			if e.Backend != be1 {
				t.Fatalf("replica 2 sent the cookie for %s to %s", be1, e.Backend)
			}
		}
		opts.AffinityKey = []byte("another key, another install....")
		c3, be3 := cookieOf(t, opts)
		if be3 == be1 && c3.Value == c1.Value {
			t.Errorf("two keys gave the same cookie %q", c1.Value)
		}
	})
}

// TestClientCertHeadersNeverForwarded: a client's own ingress-nginx client-certificate
// headers (ssl-client-verify: SUCCESS is what a backend written for ingress-nginx trusts) never
// reach a backend or an authentication service, in any case, with '_' for '-' even when
// AllowUnderscoreHeaders lets other such names through; headers with similar names do.
func TestClientCertHeadersNeverForwarded(t *testing.T) {
	var mu sync.Mutex
	var authSaw http.Header
	auth := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		authSaw = r.Header.Clone()
		mu.Unlock()
	}))
	t.Cleanup(auth.Close)
	be := echoBackend(t, "a")
	tab := buildTable(t,
		route{host: "auth.test", path: "/", endpoints: []string{hostport(auth)}}, // r0: the auth Service
		route{host: "c.test", path: "/", endpoints: []string{hostport(be)}},
		route{host: "x.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{"metalgate.io/auth-url": "http://r0/check"}})
	forged := "Ssl-Client-Verify: SUCCESS\r\nssl-client-verify: FORGED\r\nSSL-CLIENT-CERT: -----BEGIN%20CERTIFICATE-----\r\n" +
		"ssl-client-subject-dn: CN=admin\r\nSsl-Client-Issuer-Dn: CN=Trusted CA\r\nssl_client_verify: SUCCESS\r\nSSL_CLIENT_S_DN_x: kept\r\n" +
		"X-Ssl-Client-Verify: kept\r\nSsl-Client-Verified: kept\r\n"
	leaked := func(h http.Header) []string {
		var out []string
		for k := range h {
			switch strings.ReplaceAll(strings.ToLower(k), "_", "-") {
			case "ssl-client-cert", "ssl-client-verify", "ssl-client-subject-dn", "ssl-client-issuer-dn":
				out = append(out, k)
			}
		}
		return out
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		for _, allow := range []bool{false, true} {
			opts.AllowUnderscoreHeaders = allow
			_, addr, _ := startProxy(t, opts, tab)
			for _, host := range []string{"c.test", "x.test"} {
				resp, body := rawRequest(t, addr, "GET / HTTP/1.1\r\nHost: "+host+"\r\n"+forged+"\r\n")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("allow=%v %s: %d %q", allow, host, resp.StatusCode, body)
				}
				var e echoReply
				if err := json.Unmarshal([]byte(body), &e); err != nil {
					t.Fatalf("%v in %q", err, body)
				}
				if l := leaked(e.Header); len(l) > 0 {
					t.Errorf("allow=%v %s: the backend saw the client's %v", allow, host, l)
				}
				for _, k := range []string{"X-Ssl-Client-Verify", "Ssl-Client-Verified"} {
					if e.Header[k] == nil {
						t.Errorf("allow=%v %s: %s was dropped too", allow, host, k)
					}
				}
				if got := e.Header["Ssl_client_s_dn_x"]; allow != (got != nil) {
					t.Errorf("allow=%v %s: Ssl_client_s_dn_x %q", allow, host, got)
				}
			}
			mu.Lock()
			if l := leaked(authSaw); authSaw == nil || len(l) > 0 {
				t.Errorf("allow=%v: the authentication service saw the client's %v (asked: %v)", allow, l, authSaw != nil)
			}
			authSaw = nil
			mu.Unlock()
		}
	})
}
