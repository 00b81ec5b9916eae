package gatewayapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// policyInput is Gateway infra/gw (HTTP on 80, routes of every namespace) with HTTPRoute
// app/r sending /<svc>/<port> to each Service of svcs (namespace app, ports 443 "https-1"
// and 8443 "https-2").
func policyInput(svcs ...string) Input {
	all := gatewayv1.NamespacesFromAll
	in := Input{Gateway: &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{{Name: "h", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}}}},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, {ObjectMeta: metav1.ObjectMeta{Name: "infra"}}}}
	hr := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "r"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}}}}
	for _, s := range svcs {
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: s},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https-1", Port: 443}, {Name: "https-2", Port: 8443}}}})
		for _, port := range []int32{443, 8443} {
			hr.Spec.Rules = append(hr.Spec.Rules, gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchExact), Value: ptr(portPath(s, port))}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: gatewayv1.ObjectName(s), Port: ptr(gatewayv1.PortNumber(port))}}}}})
		}
	}
	in.HTTPRoutes = []*gatewayv1.HTTPRoute{hr}
	return in
}

func portPath(svc string, port int32) string {
	return "/" + svc + "/" + map[int32]string{443: "443", 8443: "8443"}[port]
}

// policy is BackendTLSPolicy app/<name>, created at minute age, targeting Service svc
// (section "" for all ports) with validation v.
func policy(name string, age int, svc, section string, v gatewayv1.BackendTLSPolicyValidation) *gatewayv1.BackendTLSPolicy {
	ref := gatewayv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gatewayv1.ObjectName(svc)}}
	if section != "" {
		ref.SectionName = ptr(gatewayv1.SectionName(section))
	}
	return &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Generation: 3,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, age, 0, 0, time.UTC))},
		Spec: gatewayv1.BackendTLSPolicySpec{TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{ref}, Validation: v}}
}

func validation(host string, refs ...gatewayv1.LocalObjectReference) gatewayv1.BackendTLSPolicyValidation {
	return gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(host), CACertificateRefs: refs}
}

func cmRef(name string) gatewayv1.LocalObjectReference {
	return gatewayv1.LocalObjectReference{Kind: "ConfigMap", Name: gatewayv1.ObjectName(name)}
}

func configMap(ns, name, rv, ca string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: rv},
		Data: map[string]string{"ca.crt": ca}}
}

// backendOf is the backend the table routes path of Gateway port 80 to.
func backendOf(t *testing.T, tab *table.Table, path string) *table.Backend {
	t.Helper()
	r := tab.Match(80, httptest.NewRequest("GET", "http://x"+path, nil))
	if r == nil || r.Backend == nil {
		t.Fatalf("%s: no route", path)
	}
	return r.Backend
}

// pcond is a condition as policyStatuses computes it, but its message.
type pcond struct {
	typ    string
	status metav1.ConditionStatus
	reason string
}

// TestBackendTLSPolicyStatus: the conditions a Gateway computes for the BackendTLSPolicies
// of its backends, and what each backend then speaks. Hostile cases first: a CA ConfigMap
// of another namespace, unusable references, a conflict.
func TestBackendTLSPolicyStatus(t *testing.T) {
	ca := testCAPEM(t)
	accepted := pcond{"Accepted", metav1.ConditionTrue, "Accepted"}
	resolved := pcond{"ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"}
	for _, tc := range []struct {
		name     string
		policies []*gatewayv1.BackendTLSPolicy
		cms      []*corev1.ConfigMap
		want     map[string][]pcond // per policy name; a policy not listed has no entry
		refused  map[string]bool    // per path: the backend's TLS settings are refused
	}{
		{name: "a ConfigMap of another namespace is not found",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", validation("abc.example.com", cmRef("ca")))},
			cms:      []*corev1.ConfigMap{configMap("other", "ca", "1", ca)},
			want: map[string][]pcond{"p": {{"Accepted", metav1.ConditionFalse, "NoValidCACertificate"},
				{"ResolvedRefs", metav1.ConditionFalse, "InvalidCACertificateRef"}}},
			refused: map[string]bool{"/s/443": true, "/s/8443": true}},
		{name: "a ConfigMap without a PEM ca.crt",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", validation("abc.example.com", cmRef("ca")))},
			cms:      []*corev1.ConfigMap{configMap("app", "ca", "1", "")},
			want: map[string][]pcond{"p": {{"Accepted", metav1.ConditionFalse, "NoValidCACertificate"},
				{"ResolvedRefs", metav1.ConditionFalse, "InvalidCACertificateRef"}}},
			refused: map[string]bool{"/s/443": true, "/s/8443": true}},
		{name: "a reference of another kind",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", validation("abc.example.com",
				gatewayv1.LocalObjectReference{Group: "invalid.io", Kind: "InvalidKind", Name: "x"}))},
			want: map[string][]pcond{"p": {{"Accepted", metav1.ConditionFalse, "NoValidCACertificate"},
				{"ResolvedRefs", metav1.ConditionFalse, "InvalidKind"}}},
			refused: map[string]bool{"/s/443": true, "/s/8443": true}},
		{name: "one usable reference of two: accepted, ResolvedRefs false, served",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", validation("abc.example.com", cmRef("missing"), cmRef("ca")))},
			cms:      []*corev1.ConfigMap{configMap("app", "ca", "1", ca)},
			want:     map[string][]pcond{"p": {accepted, {"ResolvedRefs", metav1.ConditionFalse, "InvalidCACertificateRef"}}},
			refused:  map[string]bool{"/s/443": false, "/s/8443": false}},
		{name: "two policies for the same Service and section: the older wins",
			policies: []*gatewayv1.BackendTLSPolicy{
				policy("newer", 5, "s", "https-1", validation("new.example.com", cmRef("ca"))),
				policy("older", 1, "s", "https-1", validation("old.example.com", cmRef("ca")))},
			cms:     []*corev1.ConfigMap{configMap("app", "ca", "1", ca)},
			want:    map[string][]pcond{"older": {accepted, resolved}, "newer": {{"Accepted", metav1.ConditionFalse, "Conflicted"}, resolved}},
			refused: map[string]bool{"/s/443": false}},
		{name: "a policy for a section and one for the Service: both accepted",
			policies: []*gatewayv1.BackendTLSPolicy{
				policy("section", 5, "s", "https-1", validation("section.example.com", cmRef("ca"))),
				policy("service", 1, "s", "", validation("service.example.com", cmRef("ca")))},
			cms:     []*corev1.ConfigMap{configMap("app", "ca", "1", ca)},
			want:    map[string][]pcond{"section": {accepted, resolved}, "service": {accepted, resolved}},
			refused: map[string]bool{"/s/443": false, "/s/8443": false}},
		{name: "the system's roots",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", gatewayv1.BackendTLSPolicyValidation{Hostname: "abc.example.com",
				WellKnownCACertificates: ptr(gatewayv1.WellKnownCACertificatesSystem)})},
			want:    map[string][]pcond{"p": {accepted, resolved}},
			refused: map[string]bool{"/s/443": false}},
		{name: "a policy for a Service no route of the Gateway uses has no status for it",
			policies: []*gatewayv1.BackendTLSPolicy{policy("p", 0, "unused", "", validation("abc.example.com", cmRef("ca")))},
			cms:      []*corev1.ConfigMap{configMap("app", "ca", "1", ca)},
			want:     map[string][]pcond{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := policyInput("s")
			in.BackendTLSPolicies, in.ConfigMaps = tc.policies, tc.cms
			res := Translate(in)
			got := map[string][]pcond{}
			for _, ps := range res.Status.BackendTLSPolicies {
				var cs []pcond
				for _, c := range ps.Conditions {
					if c.ObservedGeneration != 3 {
						t.Errorf("%s %s: observedGeneration %d, want 3", ps.Policy, c.Type, c.ObservedGeneration)
					}
					cs = append(cs, pcond{c.Type, c.Status, c.Reason})
				}
				got[ps.Policy.Name] = cs
			}
			if len(got) != len(tc.want) {
				t.Errorf("statuses for %v, want %v", got, tc.want)
			}
			for name, want := range tc.want {
				if g := got[name]; len(g) != len(want) || g[0] != want[0] || g[1] != want[1] {
					t.Errorf("%s: conditions %v, want %v", name, g, want)
				}
			}
			for path, refused := range tc.refused {
				be := backendOf(t, res.Table, path)
				if be.Protocol != table.ProtocolHTTPS || be.TLS == nil {
					t.Fatalf("%s: protocol %s, TLS %v; want https", path, be.Protocol, be.TLS)
				}
				if (be.TLS.Refuse != "") != refused {
					t.Errorf("%s: refuse %q, want refused %t", path, be.TLS.Refuse, refused)
				}
			}
		})
	}
}

// TestBackendTLSPolicySettings: what each backend is verified against, and the identity of
// its TLS settings: two Services share it only when every effective setting is the same
// (the same ConfigMap and hostname, one namespace); a new ConfigMap content, another
// hostname or another namespace each make a new one.
func TestBackendTLSPolicySettings(t *testing.T) {
	ca, ca2 := testCAPEM(t), testCAPEM(t)
	in := policyInput("a", "b", "c")
	in.ConfigMaps = []*corev1.ConfigMap{configMap("app", "ca", "1", ca)}
	in.BackendTLSPolicies = []*gatewayv1.BackendTLSPolicy{
		policy("pa", 0, "a", "", validation("same.example.com", cmRef("ca"))),
		policy("pb", 0, "b", "", validation("same.example.com", cmRef("ca"))),
		policy("pc", 0, "c", "https-1", gatewayv1.BackendTLSPolicyValidation{Hostname: "other.example.com", CACertificateRefs: []gatewayv1.LocalObjectReference{cmRef("ca")},
			SubjectAltNames: []gatewayv1.SubjectAltName{{Type: gatewayv1.URISubjectAltNameType, URI: "spiffe://x/y"}, {Type: gatewayv1.HostnameSubjectAltNameType, Hostname: "san.example.com"}}}),
	}
	tab := Translate(in).Table
	a, b, c, c2 := backendOf(t, tab, "/a/443"), backendOf(t, tab, "/b/443"), backendOf(t, tab, "/c/443"), backendOf(t, tab, "/c/8443")
	if a.TLS.ID != b.TLS.ID {
		t.Errorf("a and b have the same settings in one namespace but IDs %q and %q", a.TLS.ID, b.TLS.ID)
	}
	if a.TLS.ID == c.TLS.ID {
		t.Errorf("a and c (another hostname, SANs) share ID %q", a.TLS.ID)
	}
	if !c.TLS.SNI || c.TLS.ServerName != "other.example.com" || c.TLS.SubjectAltNames.String() != "dns:san.example.com,uri:spiffe://x/y" || !c.TLS.Verify {
		t.Errorf("c: %+v, want SNI other.example.com verified against the SANs", c.TLS)
	}
	if c2.TLS != nil {
		t.Errorf("c's port 8443 is not targeted (sectionName https-1) but speaks TLS: %+v", c2.TLS)
	}
	// The same settings in namespace other, and a new content of the ConfigMap.
	other := policyInput("a")
	for _, s := range other.Services {
		s.Namespace = "other"
	}
	other.HTTPRoutes[0].Namespace = "other"
	other.ConfigMaps = []*corev1.ConfigMap{configMap("other", "ca", "1", ca)}
	pa := policy("pa", 0, "a", "", validation("same.example.com", cmRef("ca")))
	pa.Namespace = "other"
	other.BackendTLSPolicies = []*gatewayv1.BackendTLSPolicy{pa}
	if o := backendOf(t, Translate(other).Table, "/a/443"); o.TLS.ID == a.TLS.ID {
		t.Errorf("namespace other shares ID %q with namespace app", o.TLS.ID)
	}
	in.ConfigMaps = []*corev1.ConfigMap{configMap("app", "ca", "1", ca+ca2)} // same resourceVersion, new content
	if n := backendOf(t, Translate(in).Table, "/a/443"); n.TLS.ID == a.TLS.ID {
		t.Errorf("a new ca.crt kept ID %q", n.TLS.ID)
	}
}

// TestBackendClientCertificateStatus: why a Gateway's spec.tls.backend.clientCertificateRef
// cannot be used, as its ResolvedRefs says. Hostile cases first: another namespace without a
// ReferenceGrant, a kind or group that is not a Secret, a missing or malformed Secret.
func TestBackendClientCertificateStatus(t *testing.T) {
	crt, key := testKeyPair(t)
	secret := func(ns, name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
	}
	good := map[string][]byte{"tls.crt": crt, "tls.key": key}
	grant := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "g"}, Spec: gatewayv1beta1.ReferenceGrantSpec{
		From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "infra"}},
		To:   []gatewayv1beta1.ReferenceGrantTo{{Kind: "Secret"}}}}
	for _, tc := range []struct {
		name   string
		ref    gatewayv1.SecretObjectReference
		grants []*gatewayv1beta1.ReferenceGrant
		want   string // the reason; "" resolved
	}{
		{name: "another namespace without a grant", ref: gatewayv1.SecretObjectReference{Name: "c", Namespace: ptr(gatewayv1.Namespace("certs"))}, want: "RefNotPermitted"},
		{name: "another kind", ref: gatewayv1.SecretObjectReference{Name: "c", Kind: ptr(gatewayv1.Kind("WrongKind"))}, want: "InvalidClientCertificateRef"},
		{name: "another group", ref: gatewayv1.SecretObjectReference{Name: "c", Group: ptr(gatewayv1.Group("wrong.group.io"))}, want: "InvalidClientCertificateRef"},
		{name: "a missing Secret", ref: gatewayv1.SecretObjectReference{Name: "missing"}, want: "InvalidClientCertificateRef"},
		{name: "a malformed Secret", ref: gatewayv1.SecretObjectReference{Name: "bad"}, want: "InvalidClientCertificateRef"},
		{name: "the Gateway's namespace", ref: gatewayv1.SecretObjectReference{Name: "c"}, want: ""},
		{name: "another namespace with a grant", ref: gatewayv1.SecretObjectReference{Name: "c", Namespace: ptr(gatewayv1.Namespace("certs"))},
			grants: []*gatewayv1beta1.ReferenceGrant{grant}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := policyInput("s")
			in.Gateway.Spec.TLS = &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{ClientCertificateRef: &tc.ref}}
			in.ReferenceGrants = tc.grants
			in.Secrets = []*corev1.Secret{secret("infra", "c", good), secret("certs", "c", good), secret("infra", "bad", map[string][]byte{"tls.crt": []byte("x")})}
			in.ConfigMaps = []*corev1.ConfigMap{configMap("app", "ca", "1", testCAPEM(t))}
			in.BackendTLSPolicies = []*gatewayv1.BackendTLSPolicy{policy("p", 0, "s", "", validation("abc.example.com", cmRef("ca")))}
			res := Translate(in)
			p := res.Status.BackendClientCertificate
			switch {
			case tc.want == "" && p != nil:
				t.Errorf("problem %+v, want none", p)
			case tc.want != "" && (p == nil || p.Reason != tc.want):
				t.Errorf("problem %+v, want reason %s", p, tc.want)
			}
			// The certificate is presented only when resolved, and is part of the settings' ID.
			in.Gateway.Spec.TLS = nil
			without := backendOf(t, Translate(in).Table, "/s/443").TLS
			with := backendOf(t, res.Table, "/s/443").TLS
			if got := with.Certificate != nil; got != (tc.want == "") {
				t.Errorf("certificate presented: %t, want %t", got, tc.want == "")
			}
			if tc.want == "" && with.ID == without.ID {
				t.Errorf("the client certificate is not in the settings' ID %q", with.ID)
			}
		})
	}
}

// testKeyPair is a self-signed certificate and its key, in PEM.
func testKeyPair(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}
