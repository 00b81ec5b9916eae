package gatewayapi

import (
	"crypto/x509"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestGatewayCertificates: an HTTPS listener's certificate comes from its certificateRefs, a
// TLS Secret of the Gateway's own namespace; a handshake gets the certificate of the listener
// that Match would pick for that name on that port, never another listener's or a default.
// Hostile and broken references first: a Secret of another namespace (without a
// ReferenceGrant), of the wrong type, with a bad key pair, a missing one, a non-Secret kind.
func TestGatewayCertificates(t *testing.T) {
	secret := func(ns, name, host string, typ corev1.SecretType) *corev1.Secret {
		crt, key := testenv.SelfSigned(t, host)
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	}
	https := func(name string, port int32, host string, refs ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
		l := testListener(name, port, host, gatewayv1.NamespacesFromAll)
		l.Protocol = gatewayv1.HTTPSProtocolType
		l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: refs}
		return l
	}
	ref := func(name string) gatewayv1.SecretObjectReference {
		return gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
	}
	other := ref("a")
	other.Namespace = ptr(gatewayv1.Namespace("app"))
	configMap := ref("a")
	configMap.Kind = ptr(gatewayv1.Kind("ConfigMap"))
	broken := secret("infra", "broken", "x.example", corev1.SecretTypeTLS)
	broken.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")

	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{
			https("a", 443, "a.example", ref("a")),
			https("wild", 443, "*.example", ref("wild")),
			https("any", 443, "", ref("missing"), ref("any")), // the first usable ref
			https("missing", 8443, "", ref("missing")),
			https("elsewhere", 8444, "", other),
			https("kind", 8445, "", configMap),
			https("opaque", 8446, "", ref("opaque")),
			https("broken", 8447, "", ref("broken")),
			testListener("http", 80, "", gatewayv1.NamespacesFromAll),
		}}}
	in := Input{Gateway: gw, Secrets: []*corev1.Secret{
		secret("infra", "a", "a.example", corev1.SecretTypeTLS),
		secret("infra", "wild", "*.example", corev1.SecretTypeTLS),
		secret("infra", "any", "any", corev1.SecretTypeTLS),
		secret("app", "a", "stolen.example", corev1.SecretTypeTLS),
		secret("infra", "opaque", "opaque", corev1.SecretTypeOpaque),
		broken,
	}}
	tab, _ := build(in)

	for _, c := range []struct {
		port int32
		sni  string
		want string // the certificate's CommonName, "" for none
	}{
		{443, "a.example", "a.example"},
		{443, "A.Example.", "a.example"},
		{443, "b.example", "*.example"},
		{443, "other.org", "any"},
		{443, "", "any"},
		{8443, "x", ""},
		{8444, "x", ""},
		{8445, "x", ""},
		{8446, "x", ""},
		{8447, "x", ""},
		{80, "a.example", ""}, // an HTTP listener: no TLS
		{9999, "a.example", ""},
	} {
		got := ""
		if cert := tab.GatewayCertificate(c.port, c.sni); cert != nil {
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			got = leaf.Subject.CommonName
		}
		if got != c.want {
			t.Errorf("GatewayCertificate(%d, %q) = %q, want %q", c.port, c.sni, got, c.want)
		}
	}
	for listener, want := range map[string]string{
		"missing":   "Secret infra/missing not found",
		"elsewhere": "Secret app/a is in another namespace and no ReferenceGrant there lets Gateways of namespace infra refer to it",
		"kind":      "only core Secrets are supported",
		"opaque":    `of type "Opaque"`,
		"broken":    "Secret infra/broken:",
	} {
		if got := tab.Gateway.CertificateProblems[listener]; !strings.Contains(got, want) {
			t.Errorf("listener %s: problem %q, want one saying %q", listener, got, want)
		}
	}
	for _, served := range []string{"a", "wild", "any", "http"} {
		if p, ok := tab.Gateway.CertificateProblems[served]; ok {
			t.Errorf("listener %s: problem %q, want none", served, p)
		}
	}
	if (&table.Table{}).GatewayCertificate(443, "a.example") != nil {
		t.Error("an Ingress table has Gateway certificates")
	}
	// The expiry metric names each served certificate's Secret: the ref used, not the first.
	secrets := map[string]string{}
	for _, sc := range tab.Certificates() {
		secrets[sc.Listener] = sc.Secret
	}
	if want := map[string]string{"a": "infra/a", "wild": "infra/wild", "any": "infra/any"}; !maps.Equal(secrets, want) {
		t.Errorf("served certificates' Secrets %v, want %v", secrets, want)
	}
}

// TestGatewayCertificateReferenceGrant: a certificateRef to a Secret of another namespace is
// served only with a ReferenceGrant in that namespace from Gateways of the Gateway's namespace
// to that Secret (or to every Secret). Hostile grants first: one for HTTPRoutes, one from
// another namespace, one to another Secret, one to ConfigMaps, one in the wrong namespace.
func TestGatewayCertificateReferenceGrant(t *testing.T) {
	crt, key := testenv.SelfSigned(t, "shared.example")
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "shared"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	l := testListener("https", 443, "", gatewayv1.NamespacesFromAll)
	l.Protocol = gatewayv1.HTTPSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{
		{Name: "shared", Namespace: ptr(gatewayv1.Namespace("certs"))}}}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{l}}}
	grant := func(ns, fromKind, fromNS, toKind string, toName *string) *gatewayv1beta1.ReferenceGrant {
		g := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
			Spec: gatewayv1beta1.ReferenceGrantSpec{
				From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: gatewayv1.Kind(fromKind), Namespace: gatewayv1.Namespace(fromNS)}},
				To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: gatewayv1.Kind(toKind)}}}}
		if toName != nil {
			g.Spec.To[0].Name = ptr(gatewayv1.ObjectName(*toName))
		}
		return g
	}
	for _, tc := range []struct {
		name  string
		grant *gatewayv1beta1.ReferenceGrant
		want  bool
	}{
		{name: "no grant"},
		{name: "grant for HTTPRoutes, not Gateways", grant: grant("certs", "HTTPRoute", "infra", "Secret", nil)},
		{name: "grant from another namespace", grant: grant("certs", "Gateway", "other", "Secret", nil)},
		{name: "grant to another Secret", grant: grant("certs", "Gateway", "infra", "Secret", ptr("other"))},
		{name: "grant to ConfigMaps", grant: grant("certs", "Gateway", "infra", "ConfigMap", nil)},
		{name: "grant in the Gateway's namespace, not the Secret's", grant: grant("infra", "Gateway", "infra", "Secret", nil)},
		{name: "grant to that Secret", grant: grant("certs", "Gateway", "infra", "Secret", ptr("shared")), want: true},
		{name: "grant to every Secret", grant: grant("certs", "Gateway", "infra", "Secret", nil), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Gateway: gw, Secrets: []*corev1.Secret{shared}}
			if tc.grant != nil {
				in.ReferenceGrants = []*gatewayv1beta1.ReferenceGrant{tc.grant}
			}
			tab, _ := build(in)
			served := tab.GatewayCertificate(443, "shared.example") != nil
			problem := tab.Gateway.CertificateProblems["https"]
			if served != tc.want {
				t.Fatalf("certificate served = %v, want %v (problem %q)", served, tc.want, problem)
			}
			if !tc.want && !strings.Contains(problem, "Secret certs/shared is in another namespace and no ReferenceGrant there lets Gateways of namespace infra refer to it") {
				t.Errorf("problem %q, want it to name the Secret and the missing grant", problem)
			}
			want := tc.want
			if got := Granted(in.ReferenceGrants, "Gateway", "infra", "Secret", types.NamespacedName{Namespace: "certs", Name: "shared"}); got != want {
				t.Errorf("Granted = %v, want %v", got, want)
			}
		})
	}
}
