package ingress

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

// Invariant 10, "Tenants are walls", for the routing table: a host belongs to one namespace,
// a known host never falls to another namespace's rules, default backend or certificate, a
// broken default backend never shadows a working one, and endpoints are pod IPs.

func nsIngress(ns, name string, age int, paths ...path) *networkingv1.Ingress {
	ing := ingress(name, age, paths...)
	ing.Namespace = ns
	return ing
}

// deleting marks an Ingress as being deleted (a finalizer holds it).
func deleting(ing *networkingv1.Ingress) *networkingv1.Ingress {
	t := metav1.NewTime(time.Unix(9000, 0))
	ing.DeletionTimestamp, ing.Finalizers = &t, []string{"example.com/hold"}
	return ing
}

func withDefault(ing *networkingv1.Ingress, svcName string) *networkingv1.Ingress {
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svcName, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	return ing
}

func withTLS(ing *networkingv1.Ingress, secret string, hosts ...string) *networkingv1.Ingress {
	ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: secret})
	return ing
}

// hostOnly adds a rule that names a host without any path.
func hostOnly(ing *networkingv1.Ingress, host string) *networkingv1.Ingress {
	ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: host})
	return ing
}

func managedSlice(ns, svcName, name string, eps ...ep) *discoveryv1.EndpointSlice {
	s := slice(svcName, name, 8080, eps...)
	s.Namespace = ns
	return s
}

// world is the Input the Ingresses need: a Service (ports 80 "http" and 9000 "admin") for
// every backend they name, each with a managed EndpointSlice of one ready endpoint, and a TLS
// Secret for every secretName. Names say otherwise: a Service "gone…" or Secret "gone…" does
// not exist, a Service "empty…" has no endpoint, a Service "draining…" only one serving while
// terminating. certs maps each certificate (DER) to its Secret's "namespace/name".
func world(t testing.TB, ings ...*networkingv1.Ingress) (in Input, certs map[string]string) {
	t.Helper()
	in = Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: ings}
	certs = map[string]string{}
	seen := map[string]bool{}
	n := 0
	addSvc := func(ns string, b *networkingv1.IngressBackend) {
		if b == nil || b.Service == nil || seen[ns+"/"+b.Service.Name] {
			return
		}
		name := b.Service.Name
		seen[ns+"/"+name] = true
		if strings.HasPrefix(name, "gone") {
			return
		}
		s := svc(name)
		s.Namespace = ns
		in.Services = append(in.Services, s)
		n++
		ip := fmt.Sprintf("10.1.%d.%d", n/250, n%250+1)
		switch {
		case strings.HasPrefix(name, "empty"):
			in.Slices = append(in.Slices, managedSlice(ns, name, name+"-1"))
		case strings.HasPrefix(name, "draining"):
			in.Slices = append(in.Slices, managedSlice(ns, name, name+"-1", ep{ip, false, true, true}))
		default:
			in.Slices = append(in.Slices, managedSlice(ns, name, name+"-1", ep{ip, true, true, false}))
		}
	}
	for _, ing := range ings {
		addSvc(ing.Namespace, ing.Spec.DefaultBackend)
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for i := range r.HTTP.Paths {
				addSvc(ing.Namespace, &r.HTTP.Paths[i].Backend)
			}
		}
		for _, tl := range ing.Spec.TLS {
			id := ing.Namespace + "/" + tl.SecretName
			if tl.SecretName == "" || strings.HasPrefix(tl.SecretName, "gone") || seen["secret "+id] {
				continue
			}
			seen["secret "+id] = true
			crt, key := testenv.SelfSigned(t, tl.SecretName)
			blk, _ := pem.Decode(crt)
			certs[string(blk.Bytes)] = id
			in.Secrets = append(in.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ing.Namespace, Name: tl.SecretName}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
		}
	}
	return in, certs
}

type lookup struct{ host, path, want string } // want: "namespace/service", "" for 404

type tenancyCase struct {
	name      string
	ingresses []*networkingv1.Ingress
	lookups   []lookup
	certs     map[string]string // SNI server name → "namespace/secret", "" for the default certificate
	problems  []string          // "namespace/name Reason: message", sorted
}

func runTenancy(t *testing.T, cases []tenancyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, certs := world(t, tc.ingresses...)
			tab, problems := Build(in)
			var gotProblems []string
			for _, p := range problems {
				gotProblems = append(gotProblems, p.Object.NamespacedName.String()+" "+p.Reason+": "+p.Message)
			}
			sort.Strings(gotProblems)
			if diff := cmp.Diff(tc.problems, gotProblems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, l := range tc.lookups {
				got := ""
				if r := tab.Lookup(l.host, l.path); r != nil {
					got = r.Backend.Service.String()
				}
				if diff := cmp.Diff(l.want, got); diff != "" {
					t.Errorf("Lookup(%q, %q) (-want +got):\n%s", l.host, l.path, diff)
				}
			}
			for name, want := range tc.certs {
				got := ""
				if c := tab.Certificate(name); c != nil {
					if got = certs[string(c.Certificate[0])]; got == "" {
						got = "unknown certificate"
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Certificate(%q) (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestHostOwnership(t *testing.T) {
	runTenancy(t, []tenancyCase{
		{
			name: "a newer tenant cannot take Exact / or Prefix /login of an older tenant's host",
			ingresses: []*networkingv1.Ingress{
				nsIngress("shop", "web", 0, path{"shop.com", "/", "Prefix", "web"}),
				nsIngress("evil", "steal", 1, path{"shop.com", "/", "Exact", "phish"}, path{"Shop.com", "/login", "Prefix", "phish"}),
			},
			lookups: []lookup{{"shop.com", "/", "shop/web"}, {"shop.com", "/login", "shop/web"}, {"SHOP.com:443", "/login/x", "shop/web"}},
			problems: []string{
				`evil/steal HostConflict: spec.rules[0].host "shop.com" ignored: the host belongs to namespace shop, where Ingress shop/web named it first`,
			},
		},
		{
			name: "the oldest Ingress decides, not the namespaces' names",
			ingresses: []*networkingv1.Ingress{
				nsIngress("zeta", "web", 0, path{"x.com", "/", "Prefix", "web"}),
				nsIngress("alpha", "web", 1, path{"x.com", "/api", "Prefix", "api"}),
			},
			lookups: []lookup{{"x.com", "/api", "zeta/web"}},
			problems: []string{
				`alpha/web HostConflict: spec.rules[0].host "x.com" ignored: the host belongs to namespace zeta, where Ingress zeta/web named it first`,
			},
		},
		{
			name: "created at the same time: namespace/name order decides",
			ingresses: []*networkingv1.Ingress{
				nsIngress("b", "web", 0, path{"x.com", "/", "Prefix", "web"}),
				nsIngress("a", "web", 0, path{"x.com", "/api", "Prefix", "api"}),
			},
			lookups: []lookup{{"x.com", "/", ""}, {"x.com", "/api", "a/api"}},
			problems: []string{
				`b/web HostConflict: spec.rules[0].host "x.com" ignored: the host belongs to namespace a, where Ingress a/web named it first`,
			},
		},
		{
			name: "an Ingress being deleted loses its host",
			ingresses: []*networkingv1.Ingress{
				deleting(nsIngress("old", "web", 0, path{"x.com", "/", "Prefix", "web"})),
				nsIngress("new", "web", 1, path{"x.com", "/", "Prefix", "web"}),
			},
			lookups: []lookup{{"x.com", "/", "new/web"}},
			problems: []string{
				`old/web HostConflict: spec.rules[0].host "x.com" ignored: the host belongs to namespace new, where Ingress new/web named it first`,
			},
		},
		{
			name: "a rule without paths claims its host",
			ingresses: []*networkingv1.Ingress{
				hostOnly(nsIngress("shop", "claim", 0), "shop.com"),
				nsIngress("evil", "steal", 1, path{"shop.com", "/", "Prefix", "phish"}),
			},
			lookups: []lookup{{"shop.com", "/", ""}},
			problems: []string{
				`evil/steal HostConflict: spec.rules[0].host "shop.com" ignored: the host belongs to namespace shop, where Ingress shop/claim named it first`,
			},
		},
		{
			name: "Ingresses of one namespace share a host",
			ingresses: []*networkingv1.Ingress{
				nsIngress("shop", "web", 0, path{"shop.com", "/", "Prefix", "web"}),
				nsIngress("shop", "api", 1, path{"shop.com", "/api", "Prefix", "api"}),
			},
			lookups: []lookup{{"shop.com", "/", "shop/web"}, {"shop.com", "/api/v1", "shop/api"}},
		},
		{
			name: "an exact host and a wildcard over it are different hosts, each with its owner",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}),
				nsIngress("b", "app", 1, path{"app.foo.com", "/api", "Prefix", "api"}),
			},
			lookups: []lookup{{"app.foo.com", "/api", "b/api"}, {"app.foo.com", "/", ""}, {"www.foo.com", "/api", "a/wild"}},
		},
		{
			name: "an exact host older than the wildcard over it",
			ingresses: []*networkingv1.Ingress{
				nsIngress("b", "app", 0, path{"app.foo.com", "/api", "Prefix", "api"}),
				nsIngress("a", "wild", 1, path{"*.foo.com", "/", "Prefix", "wild"}),
			},
			lookups: []lookup{{"app.foo.com", "/api", "b/api"}, {"app.foo.com", "/", ""}, {"www.foo.com", "/", "a/wild"}},
		},
		{
			name: "a wildcard host belongs to one namespace",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}),
				nsIngress("b", "wild", 1, path{"*.foo.com", "/x", "Prefix", "steal"}),
			},
			lookups: []lookup{{"www.foo.com", "/x", "a/wild"}},
			problems: []string{
				`b/wild HostConflict: spec.rules[0].host "*.foo.com" ignored: the host belongs to namespace a, where Ingress a/wild named it first`,
			},
		},
		{
			name: "an exact host falls to the wildcard of its own namespace",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}),
				nsIngress("a", "app", 1, path{"app.foo.com", "/api", "Prefix", "api"}),
			},
			lookups: []lookup{{"app.foo.com", "/api", "a/api"}, {"app.foo.com", "/", "a/wild"}},
		},
	})
}

func TestKnownHostFallThrough(t *testing.T) {
	runTenancy(t, []tenancyCase{
		{
			name: "a known host never falls to another namespace's host-less rule",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "app", 0, path{"a.com", "/app", "Prefix", "app"}, path{"", "/health", "Prefix", "health"}),
				nsIngress("b", "catchall", 1, path{"", "/", "Prefix", "catch"}),
			},
			lookups: []lookup{
				{"a.com", "/app/x", "a/app"},
				{"a.com", "/health", "a/health"}, // its own namespace's host-less rule
				{"a.com", "/other", ""},
				{"unknown.com", "/other", "b/catch"}, // unknown hosts: every namespace's host-less rules
				{"unknown.com", "/health", "a/health"},
				{"", "/other", "b/catch"},
			},
		},
		{
			name: "a namespace's host-less rule serves its own hosts though another namespace's takes the path for unknown hosts",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "catchall", 0, path{"", "/", "Prefix", "catch"}),
				nsIngress("b", "app", 1, path{"b.com", "/app", "Prefix", "app"}, path{"", "/", "Prefix", "catch"}),
				nsIngress("b", "again", 2, path{"", "/", "Prefix", "again"}),
			},
			lookups: []lookup{{"b.com", "/app", "b/app"}, {"b.com", "/x", "b/catch"}, {"unknown.com", "/x", "a/catch"}},
			problems: []string{
				`b/again PathConflict: Prefix path "/" on host "*" ignored: Ingress b/app already routes it`,
				`b/app PathConflict: Prefix path "/" without a host serves only hosts of namespace b: Ingress a/catchall routes it for other hosts`,
			},
		},
		{
			name: "a known host never falls to another namespace's default backend",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("b", "fallback", 0, path{"", "/b", "Prefix", "bsite"}), "bdef"),
				withDefault(nsIngress("a", "app", 1, path{"a.com", "/app", "Prefix", "app"}), "adef"),
				nsIngress("c", "app", 2, path{"c.com", "/app", "Prefix", "app"}),
			},
			lookups: []lookup{
				{"a.com", "/other", "a/adef"},
				{"a.com", "/b", "a/adef"},
				{"c.com", "/other", ""},
				{"unknown.com", "/other", "b/bdef"},
				{"unknown.com", "/b", "b/bsite"},
			},
			problems: []string{
				`a/app PathConflict: spec.defaultBackend serves only hosts of namespace a: requests for other hosts go to the default backend of Ingress b/fallback (it is older)`,
			},
		},
		{
			name: "a wildcard host falls only within its own namespace",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "wild", 0, path{"*.w.com", "/app", "Prefix", "app"}),
				withDefault(nsIngress("b", "catchall", 1, path{"", "/", "Prefix", "catch"}), "bdef"),
			},
			lookups: []lookup{{"x.w.com", "/app", "a/app"}, {"x.w.com", "/other", ""}, {"other.com", "/x", "b/catch"}},
		},
		{
			name: "a host named only under spec.tls is known",
			ingresses: []*networkingv1.Ingress{
				withTLS(nsIngress("a", "site", 0, path{"", "/", "Prefix", "site"}), "", "t.com"),
				nsIngress("b", "other", 1, path{"", "/b", "Prefix", "bsite"}),
			},
			lookups: []lookup{{"t.com", "/b", "a/site"}, {"unknown.com", "/b", "b/bsite"}},
		},
	})
}

func TestDefaultBackendPrecedence(t *testing.T) {
	runTenancy(t, []tenancyCase{
		{
			name: "a missing Service never shadows a working default backend",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("old", "def", 0), "gone"),
				withDefault(nsIngress("new", "def", 1), "web"),
			},
			lookups: []lookup{{"unknown.com", "/", "new/web"}},
			problems: []string{
				`old/def MissingService: Service old/gone not found`,
				`old/def PathConflict: spec.defaultBackend serves only hosts of namespace old: requests for other hosts go to the default backend of Ingress new/def (Service old/gone port 80 has no endpoint)`,
			},
		},
		{
			name: "a Service without endpoints never shadows a working default backend",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("old", "def", 0), "empty"),
				withDefault(nsIngress("new", "def", 1), "web"),
			},
			lookups: []lookup{{"unknown.com", "/", "new/web"}},
			problems: []string{
				`old/def PathConflict: spec.defaultBackend serves only hosts of namespace old: requests for other hosts go to the default backend of Ingress new/def (Service old/empty port 80 has no endpoint)`,
			},
		},
		{
			name: "a Service with only terminating endpoints yields to one with ready endpoints",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("old", "def", 0), "draining"),
				withDefault(nsIngress("new", "def", 1), "web"),
			},
			lookups: []lookup{{"unknown.com", "/", "new/web"}},
			problems: []string{
				`old/def PathConflict: spec.defaultBackend serves only hosts of namespace old: requests for other hosts go to the default backend of Ingress new/def (Service old/draining port 80 has no ready endpoint)`,
			},
		},
		{
			name: "an Ingress being deleted never wins",
			ingresses: []*networkingv1.Ingress{
				deleting(withDefault(nsIngress("old", "def", 0), "web")),
				withDefault(nsIngress("new", "def", 1), "empty"),
			},
			lookups: []lookup{{"unknown.com", "/", "new/empty"}},
			problems: []string{
				`old/def PathConflict: spec.defaultBackend serves only hosts of namespace old: requests for other hosts go to the default backend of Ingress new/def (this Ingress is being deleted)`,
			},
		},
		{
			name: "in one namespace the loser serves nothing",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("ns", "a", 0), "gone"),
				withDefault(nsIngress("ns", "b", 1), "web"),
			},
			lookups: []lookup{{"unknown.com", "/", "ns/web"}},
			problems: []string{
				`ns/a MissingService: Service ns/gone not found`,
				`ns/a PathConflict: spec.defaultBackend ignored: the default backend of Ingress ns/b is preferred (Service ns/gone port 80 has no endpoint)`,
			},
		},
		{
			name: "among working default backends the oldest wins",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("old", "def", 0), "web"),
				withDefault(nsIngress("new", "def", 1), "web"),
			},
			lookups: []lookup{{"unknown.com", "/", "old/web"}},
			problems: []string{
				`new/def PathConflict: spec.defaultBackend serves only hosts of namespace new: requests for other hosts go to the default backend of Ingress old/def (it is older)`,
			},
		},
		{
			name: "when none works the oldest still answers (503, not 404)",
			ingresses: []*networkingv1.Ingress{
				withDefault(nsIngress("old", "def", 0), "gone"),
				withDefault(nsIngress("new", "def", 1), "empty"),
			},
			lookups: []lookup{{"unknown.com", "/", "old/gone"}},
			problems: []string{
				`new/def PathConflict: spec.defaultBackend serves only hosts of namespace new: requests for other hosts go to the default backend of Ingress old/def (it is older)`,
				`old/def MissingService: Service old/gone not found`,
			},
		},
	})
}

func TestCertificateOwnership(t *testing.T) {
	runTenancy(t, []tenancyCase{
		{
			name: "a newer tenant's Secret never serves an older tenant's host",
			ingresses: []*networkingv1.Ingress{
				nsIngress("shop", "web", 0, path{"shop.com", "/", "Prefix", "web"}),
				withTLS(nsIngress("evil", "steal", 1), "evil-cert", "shop.com"),
			},
			certs: map[string]string{"shop.com": ""},
			problems: []string{
				`evil/steal HostConflict: spec.tls[0].hosts[0] "shop.com" ignored: the host belongs to namespace shop, where Ingress shop/web named it first`,
			},
		},
		{
			name: "the owner's Secret is missing: the default certificate, not another tenant's",
			ingresses: []*networkingv1.Ingress{
				withTLS(nsIngress("shop", "web", 0, path{"shop.com", "/", "Prefix", "web"}), "gone-cert", "shop.com"),
				withTLS(nsIngress("evil", "steal", 1), "evil-cert", "shop.com"),
			},
			certs: map[string]string{"shop.com": ""},
			problems: []string{
				`evil/steal HostConflict: spec.tls[0].hosts[0] "shop.com" ignored: the host belongs to namespace shop, where Ingress shop/web named it first`,
				`shop/web InvalidTLSSecret: TLS Secret shop/gone-cert not found; the default certificate is served for [shop.com]`,
			},
		},
		{
			name: "the owner's certificate",
			ingresses: []*networkingv1.Ingress{
				withTLS(nsIngress("shop", "web", 0, path{"shop.com", "/", "Prefix", "web"}), "shop-cert", "shop.com"),
				withTLS(nsIngress("shop", "api", 1, path{"shop.com", "/api", "Prefix", "api"}), "api-cert", "shop.com"),
			},
			certs: map[string]string{"shop.com": "shop/shop-cert"},
		},
		{
			name: "a wildcard certificate never serves another tenant's exact host",
			ingresses: []*networkingv1.Ingress{
				withTLS(nsIngress("a", "wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}), "wild-cert", "*.foo.com"),
				nsIngress("b", "app", 1, path{"app.foo.com", "/", "Prefix", "app"}),
			},
			certs: map[string]string{"app.foo.com": "", "www.foo.com": "a/wild-cert"},
		},
		{
			name: "a wildcard certificate from the wildcard's owner only",
			ingresses: []*networkingv1.Ingress{
				nsIngress("a", "wild", 0, path{"*.foo.com", "/", "Prefix", "wild"}),
				withTLS(nsIngress("b", "wild", 1), "b-cert", "*.foo.com"),
			},
			certs: map[string]string{"www.foo.com": ""},
			problems: []string{
				`b/wild HostConflict: spec.tls[0].hosts[0] "*.foo.com" ignored: the host belongs to namespace a, where Ingress a/wild named it first`,
			},
		},
		{
			name: "an Ingress being deleted loses its certificate",
			ingresses: []*networkingv1.Ingress{
				withTLS(deleting(nsIngress("old", "web", 0, path{"x.com", "/", "Prefix", "web"})), "old-cert", "x.com"),
				withTLS(nsIngress("new", "web", 1, path{"x.com", "/", "Prefix", "web"}), "new-cert", "x.com"),
			},
			certs:   map[string]string{"x.com": "new/new-cert"},
			lookups: []lookup{{"x.com", "/", "new/web"}},
			problems: []string{
				`old/web HostConflict: spec.rules[0].host "x.com" ignored: the host belongs to namespace new, where Ingress new/web named it first`,
			},
		},
		{
			name: "a host named under spec.tls is owned like one in a rule",
			ingresses: []*networkingv1.Ingress{
				withTLS(nsIngress("a", "site", 0, path{"", "/", "Prefix", "site"}), "a-cert", "t.com"),
				nsIngress("b", "steal", 1, path{"t.com", "/", "Prefix", "phish"}),
			},
			certs:   map[string]string{"t.com": "a/a-cert"},
			lookups: []lookup{{"t.com", "/", "a/site"}},
			problems: []string{
				`b/steal HostConflict: spec.rules[0].host "t.com" ignored: the host belongs to namespace a, where Ingress a/site named it first`,
			},
		},
	})
}

func TestEndpointSliceTrust(t *testing.T) {
	const mgr = discoveryv1.LabelManagedBy
	mk := func(name string, at discoveryv1.AddressType, managedBy string, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: at,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
		}
		if managedBy != "" {
			s.Labels[mgr] = managedBy
		}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
		}
		return s
	}
	const ctrl, mirror = "endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io"
	v4, v6, fqdn := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN
	ok := func(addr string) table.EndpointState {
		return table.EndpointState{Addr: addr, Ready: true, Serving: true}
	}
	refused := func(addr, why string) table.EndpointState {
		return table.EndpointState{Addr: addr, Ready: true, Serving: true, Refused: why}
	}
	problem := func(msg string) []string { return []string{"ns/web RefusedEndpoint: " + msg} }
	for _, tc := range []struct {
		name           string
		slices         []*discoveryv1.EndpointSlice
		allowUnmanaged bool
		allowLoopback  bool
		endpoints      []string
		states         []table.EndpointState
		problems       []string
	}{
		{
			name:     "FQDN slice",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", fqdn, ctrl, "metadata.google.internal")},
			states:   []table.EndpointState{refused("metadata.google.internal:8080", "EndpointSlice ns/web-1 has addressType FQDN (only IPv4 and IPv6 are served)")},
			problems: problem(`Service ns/web port 80: 1 of 1 endpoint addresses refused: EndpointSlice ns/web-1 has addressType FQDN (only IPv4 and IPv6 are served)`),
		},
		{
			name:      "IPv4 loopback",
			slices:    []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "10.0.0.1", "127.0.0.1")},
			endpoints: []string{"10.0.0.1:8080"},
			states:    []table.EndpointState{ok("10.0.0.1:8080"), refused("127.0.0.1:8080", "loopback address")},
			problems:  problem(`Service ns/web port 80: 1 of 2 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[1].addresses[0] "127.0.0.1": loopback address`),
		},
		{
			name:     "IPv6 loopback",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", v6, ctrl, "::1")},
			states:   []table.EndpointState{refused("[::1]:8080", "loopback address")},
			problems: problem(`Service ns/web port 80: 1 of 1 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "::1": loopback address`),
		},
		{
			name:     "IPv4 link-local (cloud metadata)",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "169.254.169.254")},
			states:   []table.EndpointState{refused("169.254.169.254:8080", "link-local address")},
			problems: problem(`Service ns/web port 80: 1 of 1 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "169.254.169.254": link-local address`),
		},
		{
			name:     "IPv6 link-local",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", v6, ctrl, "fe80::1")},
			states:   []table.EndpointState{refused("[fe80::1]:8080", "link-local address")},
			problems: problem(`Service ns/web port 80: 1 of 1 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "fe80::1": link-local address`),
		},
		{
			name:     "unspecified",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "0.0.0.0"), mk("web-2", v6, ctrl, "::")},
			states:   []table.EndpointState{refused("0.0.0.0:8080", "unspecified address"), refused("[::]:8080", "unspecified address")},
			problems: problem(`Service ns/web port 80: 2 of 2 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "0.0.0.0": unspecified address; EndpointSlice ns/web-2 endpoints[0].addresses[0] "::": unspecified address`),
		},
		{
			name:   "multicast and broadcast",
			slices: []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "224.0.0.1", "239.1.2.3", "255.255.255.255"), mk("web-2", v6, ctrl, "ff02::1")},
			states: []table.EndpointState{refused("224.0.0.1:8080", "multicast address"), refused("239.1.2.3:8080", "multicast address"),
				refused("255.255.255.255:8080", "broadcast address"), refused("[ff02::1]:8080", "multicast address")},
			problems: problem(`Service ns/web port 80: 4 of 4 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "224.0.0.1": multicast address; EndpointSlice ns/web-1 endpoints[1].addresses[0] "239.1.2.3": multicast address; EndpointSlice ns/web-1 endpoints[2].addresses[0] "255.255.255.255": broadcast address; and 1 more`),
		},
		{
			name:   "address family does not match the slice's addressType",
			slices: []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "2001:db8::1"), mk("web-2", v6, ctrl, "10.0.0.1", "::ffff:10.0.0.2")},
			states: []table.EndpointState{refused("10.0.0.1:8080", "IPv4 address in an IPv6 EndpointSlice"), refused("[2001:db8::1]:8080", "IPv6 address in an IPv4 EndpointSlice"),
				refused("[::ffff:10.0.0.2]:8080", "IPv4 address in an IPv6 EndpointSlice")},
			problems: problem(`Service ns/web port 80: 3 of 3 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "2001:db8::1": IPv6 address in an IPv4 EndpointSlice; EndpointSlice ns/web-2 endpoints[0].addresses[0] "10.0.0.1": IPv4 address in an IPv6 EndpointSlice; EndpointSlice ns/web-2 endpoints[1].addresses[0] "::ffff:10.0.0.2": IPv4 address in an IPv6 EndpointSlice`),
		},
		{
			name:     "not an IP address",
			slices:   []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "kubernetes.default.svc", "010.0.0.1")},
			states:   []table.EndpointState{refused("010.0.0.1:8080", "not an IP address"), refused("kubernetes.default.svc:8080", "not an IP address")},
			problems: problem(`Service ns/web port 80: 2 of 2 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[0].addresses[0] "kubernetes.default.svc": not an IP address; EndpointSlice ns/web-1 endpoints[1].addresses[0] "010.0.0.1": not an IP address`),
		},
		{
			name:      "unmanaged slice",
			slices:    []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "10.0.0.1"), mk("web-hand", v4, "", "10.96.0.1")},
			endpoints: []string{"10.0.0.1:8080"},
			states:    []table.EndpointState{ok("10.0.0.1:8080"), refused("10.96.0.1:8080", `EndpointSlice ns/web-hand is not managed by endpointslice-controller.k8s.io (no label endpointslice.kubernetes.io/managed-by)`)},
			problems:  problem(`Service ns/web port 80: 1 of 2 endpoint addresses refused: EndpointSlice ns/web-hand is not managed by endpointslice-controller.k8s.io (no label endpointslice.kubernetes.io/managed-by)`),
		},
		{
			name:     "slice mirrored from a hand-written Endpoints object",
			slices:   []*discoveryv1.EndpointSlice{mk("web-m", v4, mirror, "10.0.0.1")},
			states:   []table.EndpointState{refused("10.0.0.1:8080", `EndpointSlice ns/web-m is not managed by endpointslice-controller.k8s.io (managed-by "endpointslicemirroring-controller.k8s.io")`)},
			problems: problem(`Service ns/web port 80: 1 of 1 endpoint addresses refused: EndpointSlice ns/web-m is not managed by endpointslice-controller.k8s.io (managed-by "endpointslicemirroring-controller.k8s.io")`),
		},
		{
			name:           "unmanaged slices allowed: addresses are still checked",
			slices:         []*discoveryv1.EndpointSlice{mk("web-hand", v4, "", "10.96.0.1", "127.0.0.1"), mk("web-m", v4, mirror, "10.0.0.2")},
			allowUnmanaged: true,
			endpoints:      []string{"10.0.0.2:8080", "10.96.0.1:8080"},
			states:         []table.EndpointState{ok("10.0.0.2:8080"), ok("10.96.0.1:8080"), refused("127.0.0.1:8080", "loopback address")},
			problems:       problem(`Service ns/web port 80: 1 of 3 endpoint addresses refused: EndpointSlice ns/web-hand endpoints[1].addresses[0] "127.0.0.1": loopback address`),
		},
		{
			name:          "loopback allowed (static config): link-local is still refused",
			slices:        []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "127.0.0.1", "169.254.169.254"), mk("web-2", v6, ctrl, "::1")},
			allowLoopback: true,
			endpoints:     []string{"127.0.0.1:8080", "[::1]:8080"},
			states:        []table.EndpointState{ok("127.0.0.1:8080"), refused("169.254.169.254:8080", "link-local address"), ok("[::1]:8080")},
			problems:      problem(`Service ns/web port 80: 1 of 3 endpoint addresses refused: EndpointSlice ns/web-1 endpoints[1].addresses[0] "169.254.169.254": link-local address`),
		},
		{
			name:      "an address refused in one slice and served by a managed one is served",
			slices:    []*discoveryv1.EndpointSlice{mk("web-hand", v4, "", "10.0.0.1"), mk("web-1", v4, ctrl, "10.0.0.1", "2001:db8::1")},
			endpoints: []string{"10.0.0.1:8080"},
			states:    []table.EndpointState{ok("10.0.0.1:8080"), refused("[2001:db8::1]:8080", "IPv6 address in an IPv4 EndpointSlice")},
			problems:  problem(`Service ns/web port 80: 2 of 3 endpoint addresses refused: EndpointSlice ns/web-hand is not managed by endpointslice-controller.k8s.io (no label endpointslice.kubernetes.io/managed-by); EndpointSlice ns/web-1 endpoints[1].addresses[0] "2001:db8::1": IPv6 address in an IPv4 EndpointSlice`),
		},
		{
			name:      "managed pod IPs",
			slices:    []*discoveryv1.EndpointSlice{mk("web-1", v4, ctrl, "10.0.0.1"), mk("web-2", v6, ctrl, "2001:DB8::1")},
			endpoints: []string{"10.0.0.1:8080", "[2001:db8::1]:8080"},
			states:    []table.EndpointState{ok("10.0.0.1:8080"), ok("[2001:db8::1]:8080")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Two routes of one Ingress share the backend: one problem for it, not one per
			// route or per address.
			ing := nsIngress("ns", "web", 0, path{"web.test", "/", "Prefix", "web"}, path{"web.test", "/b", "Prefix", "web"})
			tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{ing},
				Services: []*corev1.Service{svc("web")}, Slices: tc.slices, AllowUnmanagedSlices: tc.allowUnmanaged, AllowLoopbackEndpoints: tc.allowLoopback})
			var got []string
			for _, p := range problems {
				got = append(got, p.Object.NamespacedName.String()+" "+p.Reason+": "+p.Message)
			}
			if diff := cmp.Diff(tc.problems, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			be := tab.Lookup("web.test", "/").Backend
			if diff := cmp.Diff(tc.endpoints, be.Endpoints); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.states, be.States); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
		})
	}
}

// A hostile slice's refusal is reported on every Ingress that routes to the backend, once.
func TestRefusedEndpointProblemPerIngress(t *testing.T) {
	bad := managedSlice("ns", "web", "web-1", ep{"127.0.0.1", true, true, false}, ep{"169.254.169.254", true, true, false})
	tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")},
		Ingresses: []*networkingv1.Ingress{
			nsIngress("ns", "a", 0, path{"a.test", "/", "Prefix", "web"}, path{"a.test", "/x", "Prefix", "web"}),
			withDefault(nsIngress("ns", "b", 1, path{"b.test", "/", "Prefix", "web"}), "web"),
		},
		Services: []*corev1.Service{svc("web")}, Slices: []*discoveryv1.EndpointSlice{bad}})
	var got []string
	for _, p := range problems {
		got = append(got, p.Object.Name+" "+p.Reason)
	}
	if diff := cmp.Diff([]string{"a RefusedEndpoint", "b RefusedEndpoint"}, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
	}
	if eps := tab.Lookup("a.test", "/").Backend.Endpoints; len(eps) != 0 {
		t.Errorf("endpoints %v, want none", eps)
	}
}

// The certificate world() makes is parseable (guards the helper itself).
func TestWorldCertificates(t *testing.T) {
	_, certs := world(t, withTLS(nsIngress("a", "x", 0), "c", "x.com"))
	for der := range certs {
		if _, err := x509.ParseCertificate([]byte(der)); err != nil {
			t.Fatal(err)
		}
	}
}

// Routes (read by /debug/backends) lists a host-less route that serves only its namespace's
// hosts, and Defaults every default backend in use.
func TestRoutesAndDefaultsPerNamespace(t *testing.T) {
	in, _ := world(t,
		withDefault(nsIngress("a", "catchall", 0, path{"", "/", "Prefix", "catch"}), "adef"),
		withDefault(nsIngress("b", "app", 1, path{"b.com", "/app", "Prefix", "app"}, path{"", "/", "Prefix", "catch"}), "bdef"),
	)
	tab, _ := Build(in)
	var routes, defaults []string
	for _, r := range tab.Routes() {
		routes = append(routes, fmt.Sprintf("%s %q %s %s → %s", r.Source.NamespacedName, r.Host, r.Path, r.PathType, r.Backend.Service))
	}
	for _, r := range tab.Defaults() {
		defaults = append(defaults, fmt.Sprintf("%s → %s", r.Source.NamespacedName, r.Backend.Service))
	}
	if diff := cmp.Diff([]string{
		`a/catchall "" / Prefix → a/catch`,
		`b/app "" / Prefix → b/catch`,
		`b/app "b.com" /app Prefix → b/app`,
	}, routes); diff != "" {
		t.Errorf("Routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a/catchall → a/adef", "b/app → b/bdef"}, defaults); diff != "" {
		t.Errorf("Defaults (-want +got):\n%s", diff)
	}
}
