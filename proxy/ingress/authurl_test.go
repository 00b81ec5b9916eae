package ingress

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// authGrant is a ReferenceGrant in namespace ns letting Ingresses of fromNS refer to Services
// (to name only, when set).
func authGrant(ns, fromGroup, fromKind, fromNS, name string) *gatewayv1beta1.ReferenceGrant {
	g := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingress-auth"}}
	g.Spec.From = []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(fromGroup), Kind: gatewayv1beta1.Kind(fromKind), Namespace: gatewayv1beta1.Namespace(fromNS)}}
	to := gatewayv1beta1.ReferenceGrantTo{Group: "", Kind: "Service"}
	if name != "" {
		n := gatewayv1beta1.ObjectName(name)
		to.Name = &n
	}
	g.Spec.To = []gatewayv1beta1.ReferenceGrantTo{to}
	return g
}

// TestExternalAuthURL: auth-url names a Service of the Ingress's namespace, a Service of
// another namespace whose ReferenceGrant allows Ingresses of the Ingress's namespace, or an
// outside host --external-auth-hosts lists; everything else is refused with a Problem naming
// the annotation and why (and the route then refuses every request: ExternalAuth with neither
// Backend nor Outside). Hostile cases first.
func TestExternalAuthURL(t *testing.T) {
	hosts, err := table.ParseHostList("auth.example.com, *.idp.example,login.example")
	if err != nil {
		t.Fatal(err)
	}
	oauth := managedSlice("auth", "oauth2-proxy", "oauth2-proxy-1", ep{"10.9.0.1", true, true, false})
	oauth.Ports[0].Name, oauth.Ports[0].Port = ptr("proxy"), ptr(int32(4180))
	authSvc := svc("oauth2-proxy")
	authSvc.Namespace = "auth"
	authSvc.Spec.Ports = append(authSvc.Spec.Ports, corev1.ServicePort{Name: "proxy", Port: 4180})
	const inCluster = "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth"
	for _, tc := range []struct {
		name    string
		url     string
		grants  []*gatewayv1beta1.ReferenceGrant
		service string             // "namespace/name" of the Backend, when one
		outside *table.OutsideAuth // when outside
		problem string             // a part of the Problem's message, when refused
	}{
		// Hostile first.
		{name: "another namespace without a grant", url: inCluster,
			problem: "auth-url: Service auth/oauth2-proxy is in another namespace and no ReferenceGrant in namespace auth allows Ingress from app"},
		{name: "grant in the Ingress's own namespace", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("app", "networking.k8s.io", "Ingress", "app", "")},
			problem: "no ReferenceGrant in namespace auth allows Ingress from app"},
		{name: "grant for another namespace", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "other", "")},
			problem: "no ReferenceGrant in namespace auth allows Ingress from app"},
		{name: "grant for HTTPRoutes", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "gateway.networking.k8s.io", "HTTPRoute", "app", "")},
			problem: "no ReferenceGrant in namespace auth allows Ingress from app"},
		{name: "grant for another Service", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "app", "dex")},
			problem: "no ReferenceGrant in namespace auth allows Ingress from app"},
		{name: "IPv4 literal", url: "http://169.254.169.254/latest", problem: `host "169.254.169.254" is an address`},
		{name: "IPv6 literal", url: "http://[::1]:4180/", problem: `host "::1" is an address`},
		{name: "short IPv4 spelling", url: "http://127.1/", problem: `host "127.1" is an address or not a host name`},
		{name: "hex IPv4 spelling", url: "http://0x7f000001/", problem: `is an address or not a host name`},
		{name: "user information", url: "https://user:pw@auth.example.com/check", problem: "has user information"},
		{name: "unlisted outside host", url: "https://evil.example.org/check", problem: `host "evil.example.org" is neither a Service`},
		{name: "listed suffix itself", url: "https://idp.example/check", problem: `--external-auth-hosts does not list "idp.example"`},
		{name: "other scheme", url: "ftp://auth.example.com/", problem: `scheme "ftp" is neither http nor https`},
		{name: "https to a Service", url: "https://oauth2-proxy.auth.svc.cluster.local:4180/", grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "app", "")},
			problem: "a Service is asked over http:// only"},
		{name: "relative", url: "/oauth2/auth", problem: "is not an absolute"},
		// Allowed.
		{name: "own namespace", url: "http://check.app.svc/x", service: "app/check"},
		{name: "another namespace, granted for every Service", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "app", "")}, service: "auth/oauth2-proxy"},
		{name: "another namespace, granted for that Service", url: inCluster, grants: []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "app", "oauth2-proxy")}, service: "auth/oauth2-proxy"},
		{name: "listed outside host over https", url: "https://auth.example.com/oauth2/auth",
			outside: &table.OutsideAuth{Scheme: "https", Name: "auth.example.com", Port: 443, Namespace: "app"}},
		{name: "listed by suffix, any case, own port", url: "http://A.B.IDP.example:8080/x",
			outside: &table.OutsideAuth{Scheme: "http", Name: "a.b.idp.example", Port: 8080, Namespace: "app"}},
		{name: "two labels listed is outside, not svc.ns", url: "https://login.example/",
			outside: &table.OutsideAuth{Scheme: "https", Name: "login.example", Port: 443, Namespace: "app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := nsIngress("app", "web", 0, path{"a.test", "/", "Prefix", "web"})
			ing.Annotations = map[string]string{PrefixMetalgate + "auth-url": tc.url}
			check := svc("check")
			check.Namespace = "app"
			in, _ := world(t, ing)
			in.Services = append(in.Services, authSvc, check)
			in.Slices = append(in.Slices, oauth, managedSlice("app", "check", "check-1", ep{"10.9.0.2", true, true, false}))
			in.ReferenceGrants, in.ExternalAuthHosts = tc.grants, hosts
			tab, problems := Build(in)
			r := tab.Lookup("a.test", "/")
			if r == nil || r.Options.Policy.ExternalAuth == nil {
				t.Fatalf("no route with external auth for a.test: %+v", r)
			}
			ea := r.Options.Policy.ExternalAuth
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.Message)
			}
			if tc.problem != "" {
				if ea.Backend != nil || ea.Outside != nil {
					t.Errorf("refused auth-url still asks: backend %v, outside %+v", ea.Backend, ea.Outside)
				}
				if len(problems) != 1 || problems[0].Reason != table.ReasonInvalidAnnotation || !strings.Contains(problems[0].Message, tc.problem) ||
					!strings.Contains(problems[0].Message, "refused (500)") {
					t.Errorf("problems %q, want one InvalidAnnotation containing %q", msgs, tc.problem)
				}
				return
			}
			if len(problems) != 0 {
				t.Fatalf("problems %q", msgs)
			}
			switch {
			case tc.service != "":
				if ea.Backend == nil || ea.Backend.Service.String() != tc.service || len(ea.Backend.Endpoints) != 1 || ea.Outside != nil {
					t.Errorf("backend %+v outside %+v, want Service %s with its endpoint", ea.Backend, ea.Outside, tc.service)
				}
			default:
				if ea.Backend != nil || ea.Outside == nil || *ea.Outside != *tc.outside {
					t.Errorf("backend %v outside %+v, want outside %+v", ea.Backend, ea.Outside, tc.outside)
				}
			}
		})
	}
}

// TestExternalAuthGrantRevoked: the grant is read at every build; the build after it is
// deleted refuses the auth-url (no backend left to ask) and says why.
func TestExternalAuthGrantRevoked(t *testing.T) {
	ing := nsIngress("app", "web", 0, path{"a.test", "/", "Prefix", "web"})
	ing.Annotations = map[string]string{PrefixMetalgate + "auth-url": "http://oauth2-proxy.auth.svc.cluster.local:80/oauth2/auth"}
	authSvc := svc("oauth2-proxy")
	authSvc.Namespace = "auth"
	in, _ := world(t, ing)
	in.Services = append(in.Services, authSvc)
	in.Slices = append(in.Slices, managedSlice("auth", "oauth2-proxy", "o-1", ep{"10.9.0.1", true, true, false}))
	in.ReferenceGrants = []*gatewayv1beta1.ReferenceGrant{authGrant("auth", "networking.k8s.io", "Ingress", "app", "")}
	for i, step := range []struct {
		grants  []*gatewayv1beta1.ReferenceGrant
		granted bool
	}{{in.ReferenceGrants, true}, {nil, false}, {in.ReferenceGrants, true}} {
		in.ReferenceGrants = step.grants
		tab, problems := Build(in)
		ea := tab.Lookup("a.test", "/").Options.Policy.ExternalAuth
		if got := ea.Backend != nil; got != step.granted || step.granted == (len(problems) > 0) {
			t.Errorf("step %d: backend %v, problems %v; want granted %v", i, ea.Backend, problems, step.granted)
		}
	}
}
