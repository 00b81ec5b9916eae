package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/clientcert"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestClientTLSAnnotations: the auth-tls-* annotations as read (before the Secret is): each
// bad value is a problem naming the annotation; a bad value that would let in whom the
// annotation keeps out (a CN pattern, a protection without a CA) refuses every request, a
// bad mode is read as on, a bad depth as 1.
func TestClientTLSAnnotations(t *testing.T) {
	ng := func(name string) string { return PrefixNginx + name }
	type want struct {
		ref      *table.ClientAuthRef // nil: none
		refuse   string               // substring of Policy.Refuse; "" none
		problems []string             // "Reason: substring", in order
	}
	on := func(f func(r *table.ClientAuthRef)) *table.ClientAuthRef {
		r := &table.ClientAuthRef{Key: ng("auth-tls-secret"), Secret: "ns/ca", Policy: clientcert.Policy{Mode: clientcert.ModeOn, Depth: 1}}
		if f != nil {
			f(r)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		nginx bool
		want  want
	}{
		// Hostile first: values that must never widen who gets in.
		{name: "a CN pattern without CN= refuses all", nginx: true,
			ann:  map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-match-cn"): "partner"},
			want: want{refuse: "auth-tls-match-cn", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-match-cn=\"partner\" is invalid"}}},
		{name: "a CN pattern that does not compile refuses all", nginx: true,
			ann:  map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-match-cn"): "CN=(a"},
			want: want{refuse: "auth-tls-match-cn", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-match-cn=\"CN=(a\" is invalid"}}},
		{name: "a bad mode is on", nginx: true,
			ann:  map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-verify-client"): "sometimes"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-verify-client=\"sometimes\" is invalid"}}},
		{name: "mode on without a Secret refuses all", nginx: true,
			ann:  map[string]string{ng("auth-tls-verify-client"): "on"},
			want: want{refuse: "nginx.ingress.kubernetes.io/auth-tls-verify-client asks for client-certificate authentication without", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-verify-client asks"}}},
		{name: "a CN pattern without a Secret refuses all", ann: map[string]string{"metalgate.io/auth-tls-match-cn": "CN=a"},
			want: want{refuse: "metalgate.io/auth-tls-match-cn asks", problems: []string{"InvalidAnnotation: metalgate.io/auth-tls-match-cn asks for client-certificate authentication without metalgate.io/auth-tls-secret"}}},
		{name: "a bad depth is 1", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-verify-depth"): "0"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-verify-depth=\"0\" is invalid"}}},
		{name: "a depth too large is 1", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-verify-depth"): "11"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-verify-depth=\"11\" is invalid"}}},
		{name: "a relative error page is not used", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-error-page"): "/error"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-error-page=\"/error\" is invalid"}}},
		{name: "a javascript error page is not used", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-error-page"): "javascript:alert(1)"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-error-page"}}},
		{name: "an error page with a user is not used", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-error-page"): "https://good.example@evil.example/"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-error-page"}}},
		{name: "an error page with a space is not used", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-error-page"): "https://e.example/a b"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-error-page"}}},
		{name: "a bad pass is false", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-pass-certificate-to-upstream"): "yes please"},
			want: want{ref: on(nil), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream=\"yes please\" is invalid"}}},
		// Valid.
		{name: "off alone does nothing", nginx: true, ann: map[string]string{ng("auth-tls-verify-client"): "off"}},
		{name: "unread without nginx annotations", ann: map[string]string{ng("auth-tls-secret"): "ns/ca"}},
		{name: "the defaults", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca"}, want: want{ref: on(nil)}},
		{name: "every annotation, nginx forms", nginx: true, ann: map[string]string{ng("auth-tls-secret"): "ns/ca", ng("auth-tls-verify-client"): "Optional_No_CA",
			ng("auth-tls-verify-depth"): "3", ng("auth-tls-error-page"): "https://e.example/cert", ng("auth-tls-pass-certificate-to-upstream"): "true", ng("auth-tls-match-cn"): "CN=(a|b)$"},
			want: want{ref: on(func(r *table.ClientAuthRef) {
				r.Policy = clientcert.Policy{Mode: clientcert.ModeOptionalNoCA, Depth: 3}
				r.ErrorPage, r.Pass = "https://e.example/cert", true
			})}},
		{name: "metalgate.io forms", ann: map[string]string{"metalgate.io/auth-tls-secret": "ca", "metalgate.io/auth-tls-verify-client": "optional"},
			want: want{ref: &table.ClientAuthRef{Key: "metalgate.io/auth-tls-secret", Secret: "ca", Policy: clientcert.Policy{Mode: clientcert.ModeOptional, Depth: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := parseOptions(tc.ann, tc.nginx)
			ref := got.clientTLS
			if ref != nil && ref.Policy.MatchCN != nil {
				if !strings.HasPrefix(ref.Policy.MatchCN.String(), "CN=") {
					t.Errorf("match-cn %q", ref.Policy.MatchCN)
				}
				c := *ref
				c.Policy.MatchCN = nil
				ref = &c
			}
			switch {
			case tc.want.ref == nil && ref != nil:
				t.Errorf("client auth %+v, want none", *ref)
			case tc.want.ref != nil && (ref == nil || *ref != *tc.want.ref):
				t.Errorf("client auth %+v, want %+v", ref, *tc.want.ref)
			}
			if r := got.Policy.Refuse; tc.want.refuse == "" && r != "" || !strings.Contains(r, tc.want.refuse) {
				t.Errorf("refuse %q, want %q", r, tc.want.refuse)
			}
			if len(problems) != len(tc.want.problems) {
				t.Fatalf("problems %v, want %v", problems, tc.want.problems)
			}
			for i, p := range problems {
				reason, sub, _ := strings.Cut(tc.want.problems[i], ": ")
				if p.reason != reason || !strings.Contains(p.msg, sub) {
					t.Errorf("problem %d: %s: %s; want %s containing %q", i, p.reason, p.msg, reason, sub)
				}
			}
		})
	}
}

// caPEM is a self-signed CA certificate (root) or one signed by itself under another name
// (not self-signed: an intermediate alone).
func caPEM(t *testing.T, cn string, selfSigned bool) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	parent := tmpl
	if !selfSigned {
		parent = &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn + " root"}, IsCA: true, BasicConstraintsValid: true}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestClientAuthBuild: the CA Secret is resolved per Ingress (its own namespace only) and the
// setting placed on its hosts; an unusable Secret refuses the hosts (a Problem naming the
// annotation); a rotated Secret makes a new setting.
func TestClientAuthBuild(t *testing.T) {
	root := caPEM(t, "ca", true)
	ing := func(ns, name, host string, ann map[string]string, hostless bool) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr("mg")}}
		be := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}
		rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr(networkingv1.PathTypePrefix), Backend: be}}}}}
		ing.Spec.Rules = []networkingv1.IngressRule{rule}
		if hostless {
			rule.Host = ""
			ing.Spec.Rules = append(ing.Spec.Rules, rule)
		}
		return ing
	}
	secret := func(ns, name, version string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "u", ResourceVersion: version}, Data: data}
	}
	ann := func(secret string) map[string]string {
		return map[string]string{PrefixNginx + "auth-tls-secret": secret, PrefixNginx + "auth-tls-verify-client": "on"}
	}
	type want struct {
		ok       bool   // the host has a usable setting
		refuse   string // substring of its Refuse
		problems []string
	}
	for _, tc := range []struct {
		name    string
		ings    []*networkingv1.Ingress
		secrets []*corev1.Secret
		want    want
	}{
		{name: "a Secret of another namespace", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("other/ca"), false)},
			secrets: []*corev1.Secret{secret("other", "ca", "1", map[string][]byte{"ca.crt": root})},
			want:    want{refuse: "another namespace", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: auth-tls-secret other/ca is in another namespace"}}},
		{name: "a missing Secret", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ns/ca"), false)},
			want: want{refuse: "not found", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: Secret ns/ca not found"}}},
		{name: "a Secret without ca.crt", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), false)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"tls.crt": root})},
			want:    want{refuse: "ca.crt holds no PEM certificate", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: Secret ns/ca: ca.crt holds no PEM certificate"}}},
		{name: "an intermediate alone", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), false)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"ca.crt": caPEM(t, "inter", false)})},
			want:    want{refuse: "self-signed", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: Secret ns/ca: ca.crt holds no self-signed"}}},
		{name: "a CRL that does not parse", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), false)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"ca.crt": root, "ca.crl": []byte("junk")})},
			want:    want{refuse: "ca.crl", problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: Secret ns/ca: ca.crl holds no PEM X509 CRL"}}},
		{name: "a rule without a host refuses the Ingress", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), true)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"ca.crt": root})},
			want:    want{ok: true, problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: client-certificate authentication applies to hosts"}}},
		{name: "a second Ingress of the host with other settings", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), false),
			ing("ns", "b", "a.example", map[string]string{PrefixNginx + "auth-tls-secret": "ca", PrefixNginx + "auth-tls-verify-client": "optional"}, false)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"ca.crt": root})},
			want:    want{ok: true, problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-tls-secret: host \"a.example\" keeps the client-certificate authentication"}}},
		{name: "a usable Secret", ings: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ns/ca"), false)},
			secrets: []*corev1.Secret{secret("ns", "ca", "1", map[string][]byte{"ca.crt": root})}, want: want{ok: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, g := range tc.ings {
				g.CreationTimestamp = metav1.NewTime(time.Unix(int64(i), 0))
			}
			in := Input{Ingresses: tc.ings, Secrets: tc.secrets, NginxAnnotations: true,
				Classes: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}}}
			tab, problems := Build(in)
			var ours []table.Problem
			for _, p := range problems {
				if p.Reason == table.ReasonInvalidAnnotation {
					ours = append(ours, p)
				}
			}
			if len(ours) != len(tc.want.problems) {
				t.Fatalf("problems %v, want %v", ours, tc.want.problems)
			}
			for i, p := range ours {
				reason, sub, _ := strings.Cut(tc.want.problems[i], ": ")
				if p.Reason != reason || !strings.Contains(p.Message, sub) {
					t.Errorf("problem %d: %s: %s; want %s containing %q", i, p.Reason, p.Message, reason, sub)
				}
			}
			ca := tab.ClientAuth("a.example")
			switch {
			case ca == nil:
				t.Fatal("a.example has no client auth: it would be served without")
			case tc.want.ok && (ca.Refuse != "" || ca.Authority == nil):
				t.Errorf("refuse %q, want a usable setting", ca.Refuse)
			case !tc.want.ok && !strings.Contains(ca.Refuse, tc.want.refuse):
				t.Errorf("refuse %q, want %q", ca.Refuse, tc.want.refuse)
			}
			if ca.Policy.Mode != clientcert.ModeOn {
				t.Errorf("mode %q, want the first Ingress's on", ca.Policy.Mode)
			}
		})
	}

	t.Run("a rotated Secret makes a new setting", func(t *testing.T) {
		build := func(version string, ca []byte) *table.ClientAuth {
			in := Input{Ingresses: []*networkingv1.Ingress{ing("ns", "a", "a.example", ann("ca"), false)}, NginxAnnotations: true,
				Secrets: []*corev1.Secret{secret("ns", "ca", version, map[string][]byte{"ca.crt": ca})},
				Classes: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}}}
			tab, _ := Build(in)
			return tab.ClientAuth("a.example")
		}
		a, b := build("1", root), build("2", caPEM(t, "ca2", true))
		if a.ID == b.ID || a.Authority == b.Authority {
			t.Errorf("rotated CA kept the setting's identity %q", a.ID)
		}
		if c := build("1", root); c.ID != a.ID {
			t.Errorf("the same Secret made another ID: %q, %q", a.ID, c.ID)
		}
	})
}

// TestClientAuthWildcard: a wildcard host's setting covers the names under it that no other
// namespace owns (an exact host of its namespace without its own setting included, as it
// takes its certificate), and a route of the wildcard taken by such a host is judged by it;
// another namespace's exact host is not.
func TestClientAuthWildcard(t *testing.T) {
	root := caPEM(t, "ca", true)
	rule := func(host string) networkingv1.IngressRule {
		be := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/" + strings.SplitN(host, ".", 2)[0], PathType: ptr(networkingv1.PathTypePrefix), Backend: be}}}}}
	}
	ing := func(ns, name string, ts int64, ann map[string]string, hosts ...string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, CreationTimestamp: metav1.NewTime(time.Unix(ts, 0))},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr("mg")}}
		for _, h := range hosts {
			i.Spec.Rules = append(i.Spec.Rules, rule(h))
		}
		return i
	}
	in := Input{NginxAnnotations: true,
		Classes: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}},
		Secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ca"}, Data: map[string][]byte{"ca.crt": root}}},
		Ingresses: []*networkingv1.Ingress{
			ing("other", "theirs", 0, nil, "b.w.example"),
			ing("ns", "wild", 1, map[string]string{PrefixNginx + "auth-tls-secret": "ca"}, "*.w.example"),
			ing("ns", "exact", 2, nil, "a.w.example"),
		}}
	tab, _ := Build(in)
	wild := tab.ClientAuth("x.w.example")
	if wild == nil || wild.Authority == nil {
		t.Fatal("the wildcard's names have no client auth")
	}
	for _, tc := range []struct {
		name, host, path string
		want             *table.ClientAuth
	}{
		{"the wildcard's route for an exact host of its namespace", "a.w.example", "/*", wild},
		{"the exact host's own route", "a.w.example", "/a", wild},
		{"a name only the wildcard covers", "z.w.example", "/*", wild},
		{"another namespace's exact host", "b.w.example", "/b", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tab.ClientAuthFor(tc.host, tab.Lookup(tc.host, tc.path)); got != tc.want {
				t.Errorf("ClientAuthFor(%s %s) = %v, want %v", tc.host, tc.path, got, tc.want)
			}
		})
	}
	if got := tab.ClientAuth("b.w.example"); got != nil {
		t.Errorf("another namespace's exact host takes the wildcard's setting: %+v", got)
	}
}
