package dataplane

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// inNamespace moves route i of a tableInput (its Ingress, Service and EndpointSlices, all
// named r<i>) to namespace ns.
func inNamespace(in *ingress.Input, i int, ns string) {
	name := "r" + string(rune('0'+i))
	for _, ing := range in.Ingresses {
		if ing.Name == name {
			ing.Namespace = ns
		}
	}
	for _, svc := range in.Services {
		if svc.Name == name {
			svc.Namespace = ns
		}
	}
	for _, s := range in.Slices {
		if strings.HasPrefix(s.Name, name+"-") {
			s.Namespace = ns
		}
	}
}

// nsSecret is secret in namespace ns.
func nsSecret(ns, name string, data map[string][]byte) *corev1.Secret {
	s := secret(name, data)
	s.Namespace, s.UID = ns, s.UID+"-"+types.UID(ns)
	return s
}

// handshakeSeen is what one request to a sharedTLSBackend showed of its connection.
type handshakeSeen struct {
	host, sni string
	resumed   bool
}

// sharedTLSBackend is one HTTPS endpoint that several Services list: it records, per request,
// the Host and its connection's SNI and whether the session was resumed. With closeEach, it
// closes the connection after every response, so that each request makes a new handshake
// (and may resume a session from the proxy's cache).
type sharedTLSBackend struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []handshakeSeen
}

func newSharedTLSBackend(t *testing.T, cert tls.Certificate, closeEach bool) *sharedTLSBackend {
	t.Helper()
	b := &sharedTLSBackend{}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, handshakeSeen{host: r.Host, sni: r.TLS.ServerName, resumed: r.TLS.DidResume})
		b.mu.Unlock()
		if closeEach {
			w.Header().Set("Connection", "close")
		}
		_, _ = w.Write([]byte("ok"))
	}))
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *sharedTLSBackend) requests() []handshakeSeen {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]handshakeSeen(nil), b.seen...)
}

// TestBackendTLSIdentity: a TLS client configuration, its session cache and a pooled
// connection serve only backends whose settings are the same (table.BackendTLS.ID), on both
// paths, for https and grpcs. Hostile cases first: an endpoint of one Service presenting
// another Service's certificate; a Secret shared by two Services; two namespaces with the
// same annotations, one endpoint and SNI; a session that could be resumed across namespaces.
func TestBackendTLSIdentity(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	_, _, r0Cert := ca.issue(t, "r0.ns.svc")
	_, _, r1Cert := ca.issue(t, "r1.ns.svc")
	_, _, r1OtherCert := ca.issue(t, "r1.other.svc")
	caData := map[string][]byte{"ca.crt": ca.pem}
	ann := func(proto string, kv ...string) map[string]string {
		m := map[string]string{"metalgate.io/backend-protocol": proto}
		for i := 0; i < len(kv); i += 2 {
			m["metalgate.io/"+kv[i]] = kv[i+1]
		}
		return m
	}
	type want struct {
		status int
		sni    string // the SNI the backend saw; "-" not checked
	}
	for _, proto := range []string{"HTTPS", "GRPCS"} {
		h2 := proto == "GRPCS"
		for _, tc := range []struct {
			name    string
			certs   [2]tls.Certificate
			ann     map[string]string
			otherNS bool // r1 is in namespace "other" (with its own Secret "ca", same content)
			want    [2]want
		}{
			{name: "an endpoint of r1 presenting r0's certificate is refused", certs: [2]tls.Certificate{r0Cert, r0Cert},
				ann: ann(proto, "proxy-ssl-secret", "ca"), want: [2]want{{200, "-"}, {502, "-"}}},
			{name: "two Services sharing a Secret, each verified against its own name", certs: [2]tls.Certificate{r0Cert, r1Cert},
				ann: ann(proto, "proxy-ssl-secret", "ca"), want: [2]want{{200, "-"}, {200, "-"}}},
			{name: "two namespaces, the same annotations and SNI: each backend gets its own name", certs: [2]tls.Certificate{r0Cert, r1OtherCert}, otherNS: true,
				ann: ann(proto, "proxy-ssl-secret", "ca", "proxy-ssl-server-name", "on"), want: [2]want{{200, "r0.ns.svc"}, {200, "r1.other.svc"}}},
			{name: "two namespaces, SNI and the system's roots: each backend gets its own name", certs: [2]tls.Certificate{r0Cert, r1OtherCert}, otherNS: true,
				ann: ann(proto, "proxy-ssl-verify", "on", "proxy-ssl-server-name", "on"), want: [2]want{{502, "r0.ns.svc"}, {502, "r1.other.svc"}}},
		} {
			t.Run(proto+": "+tc.name, func(t *testing.T) {
				forEachPath(t, func(t *testing.T, opts Options) {
					var bes [2]*tlsBackend
					routes := make([]route, 2)
					for i := range bes {
						bes[i] = newTLSBackend(t, tc.certs[i], h2, nil)
						routes[i] = route{host: []string{"a.test", "b.test"}[i], path: "/", annotations: tc.ann, endpoints: []string{bes[i].addr()}}
					}
					routes[0].secrets = []*corev1.Secret{secret("ca", caData)}
					in := tableInput(routes...)
					if tc.otherNS {
						inNamespace(&in, 1, "other")
						in.Secrets = append(in.Secrets, nsSecret("other", "ca", caData))
					}
					tab, problems := ingress.Build(in)
					if len(problems) > 0 {
						t.Fatalf("build: %v", problems)
					}
					_, addr, _ := startProxy(t, opts, tab)
					client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
					defer client.CloseIdleConnections()
					// Each host twice, interleaved: a configuration or connection made for one
					// must not serve the other, whichever came first.
					for _, i := range []int{0, 1, 0, 1, 1, 0} {
						req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
						req.Host = routes[i].host
						resp, err := client.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						resp.Body.Close()
						if resp.StatusCode != tc.want[i].status {
							t.Fatalf("%s: status %d, want %d", req.Host, resp.StatusCode, tc.want[i].status)
						}
					}
					for i, be := range bes {
						if tc.want[i].status != 200 && be.requests.Load() != 0 {
							t.Errorf("backend %d got %d requests over a connection not verified as asked", i, be.requests.Load())
						}
						if w := tc.want[i].sni; w != "-" && load(&be.sni) != w {
							t.Errorf("backend %d saw SNI %q, want %q", i, load(&be.sni), w)
						}
					}
				})
			})
		}
	}
}

// TestBackendTLSIdentitySharedEndpoint: one endpoint listed by Services of two namespaces
// with the same annotations. Neither a pooled connection nor a TLS session made for one
// namespace's backend serves the other's: each request reaches the endpoint with its own
// Service's SNI, and a namespace's first handshake resumes no session of the other's — even
// when both name the same proxy-ssl-name, so that only the namespace tells them apart.
func TestBackendTLSIdentitySharedEndpoint(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	_, _, cert := ca.issue(t, "r0.ns.svc", "r1.other.svc")
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		closeEach bool
		order     []int
		check     func(t *testing.T, seen []handshakeSeen)
	}{
		{name: "pooled connections: each request carries its own Service's SNI",
			ann:   map[string]string{"metalgate.io/backend-protocol": "HTTPS", "metalgate.io/proxy-ssl-server-name": "on"},
			order: []int{0, 1, 0, 1},
			check: func(t *testing.T, seen []handshakeSeen) {
				for _, s := range seen {
					want := map[string]string{"a.test": "r0.ns.svc", "b.test": "r1.other.svc"}[s.host]
					if s.sni != want {
						t.Errorf("a request for %s reached the endpoint with SNI %q, want %q", s.host, s.sni, want)
					}
				}
			}},
		{name: "sessions: a namespace's first handshake resumes nothing of the other's, even with the same proxy-ssl-name",
			ann:       map[string]string{"metalgate.io/backend-protocol": "HTTPS", "metalgate.io/proxy-ssl-name": "shared.internal"},
			closeEach: true, order: []int{0, 0, 1, 1},
			check: func(t *testing.T, seen []handshakeSeen) {
				if !seen[1].resumed {
					t.Fatalf("a.test's second handshake did not resume a.test's session: the test proves nothing (%+v)", seen)
				}
				if seen[2].resumed {
					t.Errorf("b.test's first handshake resumed a session made for namespace ns (%+v)", seen)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				be := newSharedTLSBackend(t, cert, tc.closeEach)
				addrs := []string{be.srv.Listener.Addr().String()}
				in := tableInput(route{host: "a.test", path: "/", annotations: tc.ann, endpoints: addrs},
					route{host: "b.test", path: "/", annotations: tc.ann, endpoints: addrs})
				inNamespace(&in, 1, "other")
				tab, problems := ingress.Build(in)
				if len(problems) > 0 {
					t.Fatalf("build: %v", problems)
				}
				_, addr, _ := startProxy(t, opts, tab)
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer client.CloseIdleConnections()
				for _, i := range tc.order {
					req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
					req.Host = []string{"a.test", "b.test"}[i]
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("%s: status %d", req.Host, resp.StatusCode)
					}
				}
				seen := be.requests()
				if len(seen) != len(tc.order) {
					t.Fatalf("the endpoint saw %d requests, want %d", len(seen), len(tc.order))
				}
				tc.check(t, seen)
			})
		})
	}
}
