package ingress

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/internal/testenv"
)

// tlsWorld is one Ingress (ns/web) to Service svc port 80 with backend-protocol HTTPS and
// the proxy-ssl-* annotations ann (names without prefix), and, when secretName is set, that
// Secret of namespace secretNS.
type tlsWorld struct {
	ns, svc              string
	ann                  map[string]string
	secretNS, secretName string
	uid, resourceVersion string
	secretData           map[string][]byte
	protocol             string
}

func (w tlsWorld) input() Input {
	ann := map[string]string{PrefixMetalgate + "backend-protocol": w.protocol}
	for k, v := range w.ann {
		ann[PrefixMetalgate+k] = v
	}
	in := Input{Classes: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}}}
	in.Ingresses = []*networkingv1.Ingress{{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "web", Annotations: ann},
		Spec: networkingv1.IngressSpec{IngressClassName: ptrTo("mg"), Rules: []networkingv1.IngressRule{{Host: "h.test",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: w.svc, Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}}}}
	in.Services = []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.svc}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}}
	if w.secretName != "" {
		in.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: w.secretNS, Name: w.secretName, UID: types.UID(w.uid), ResourceVersion: w.resourceVersion},
			Data: maps.Clone(w.secretData)}}
	}
	return in
}

// tlsID builds w's table and returns its backend's TLS.ID.
func tlsID(t *testing.T, w tlsWorld) string {
	t.Helper()
	tab, _ := Build(w.input())
	for _, be := range tab.Backends {
		if be.Service == (types.NamespacedName{Namespace: w.ns, Name: w.svc}) {
			if be.TLS == nil || be.TLS.ID == "" {
				t.Fatalf("backend %s has no TLS ID", be.Key)
			}
			return be.TLS.ID
		}
	}
	t.Fatalf("no backend for %s/%s", w.ns, w.svc)
	return ""
}

// TestBackendTLSID: a backend's TLS ID — what the data plane files its TLS client
// configuration, session cache and pooled connections under — differs for every input that
// changes what a connection sends or accepts: the Service (its name is the default one
// checked), the namespace (even with everything else equal: tenants never share), the name,
// SNI, verification, and the Secret's identity, version and content. Hostile cases first;
// then the settings that are the same give the same ID, and building twice gives the same ID.
func TestBackendTLSID(t *testing.T) {
	caPEM, _ := testenv.SelfSigned(t, "backend CA")
	otherCA, _ := testenv.SelfSigned(t, "another CA")
	clientCrt, clientKey := testenv.SelfSigned(t, "proxy client")
	otherCrt, otherKey := testenv.SelfSigned(t, "another client")
	base := tlsWorld{ns: "ns", svc: "r0", protocol: "HTTPS", ann: map[string]string{"proxy-ssl-secret": "ca"},
		secretNS: "ns", secretName: "ca", uid: "uid-1", resourceVersion: "1",
		secretData: map[string][]byte{"ca.crt": caPEM, "tls.crt": clientCrt, "tls.key": clientKey}}
	with := func(f func(w *tlsWorld)) tlsWorld {
		w := base
		w.ann = maps.Clone(base.ann)
		w.secretData = maps.Clone(base.secretData)
		f(&w)
		return w
	}
	for _, tc := range []struct {
		name      string
		a, b      tlsWorld
		wantEqual bool
	}{
		{name: "two Services sharing a Secret: each is checked against its own name",
			a: base, b: with(func(w *tlsWorld) { w.svc = "r1" })},
		{name: "the same Service name, annotations, Secret UID, version and content in another namespace",
			a: base, b: with(func(w *tlsWorld) { w.ns, w.secretNS = "other", "other" })},
		{name: "default settings (encrypted, not verified) in two namespaces",
			a: with(func(w *tlsWorld) { w.ann, w.secretName = nil, "" }), b: with(func(w *tlsWorld) { w.ann, w.secretName, w.ns = nil, "", "other" })},
		{name: "SNI on in two namespaces, no Secret (system roots)",
			a: with(func(w *tlsWorld) {
				w.ann, w.secretName = map[string]string{"proxy-ssl-server-name": "on", "proxy-ssl-verify": "on"}, ""
			}),
			b: with(func(w *tlsWorld) {
				w.ann, w.secretName, w.ns = map[string]string{"proxy-ssl-server-name": "on", "proxy-ssl-verify": "on"}, "", "other"
			})},
		{name: "the same proxy-ssl-name in two namespaces",
			a: with(func(w *tlsWorld) { w.ann["proxy-ssl-name"] = "api.internal" }),
			b: with(func(w *tlsWorld) { w.ann["proxy-ssl-name"], w.ns, w.secretNS = "api.internal", "other", "other" })},
		{name: "the same proxy-ssl-name, no Secret, in two namespaces: only the namespace differs",
			a: with(func(w *tlsWorld) { w.ann, w.secretName = map[string]string{"proxy-ssl-name": "api.internal"}, "" }),
			b: with(func(w *tlsWorld) {
				w.ann, w.secretName, w.ns = map[string]string{"proxy-ssl-name": "api.internal"}, "", "other"
			})},
		{name: "proxy-ssl-name", a: base, b: with(func(w *tlsWorld) { w.ann["proxy-ssl-name"] = "api.internal" })},
		{name: "SNI", a: base, b: with(func(w *tlsWorld) { w.ann["proxy-ssl-server-name"] = "on" })},
		{name: "verification off despite the CA", a: base, b: with(func(w *tlsWorld) { w.ann["proxy-ssl-verify"] = "off" })},
		{name: "verification on with the system's roots", a: with(func(w *tlsWorld) { w.ann, w.secretName = nil, "" }),
			b: with(func(w *tlsWorld) { w.ann, w.secretName = map[string]string{"proxy-ssl-verify": "on"}, "" })},
		{name: "another CA, same UID and resourceVersion (a static configuration's Secret)",
			a: base, b: with(func(w *tlsWorld) { w.secretData["ca.crt"] = otherCA })},
		{name: "another client certificate, same UID and resourceVersion",
			a: base, b: with(func(w *tlsWorld) { w.secretData["tls.crt"], w.secretData["tls.key"] = otherCrt, otherKey })},
		{name: "no client certificate any more",
			a: base, b: with(func(w *tlsWorld) { delete(w.secretData, "tls.crt"); delete(w.secretData, "tls.key") })},
		{name: "a new resourceVersion, same content", a: base, b: with(func(w *tlsWorld) { w.resourceVersion = "2" })},
		{name: "the Secret recreated (new UID)", a: base, b: with(func(w *tlsWorld) { w.uid = "uid-2" })},
		{name: "another Secret with the same content",
			a: base, b: with(func(w *tlsWorld) { w.ann["proxy-ssl-secret"], w.secretName = "ca2", "ca2" })},
		{name: "the Secret gone (refused)", a: base, b: with(func(w *tlsWorld) { w.secretName = "" })},
		{name: "refused for another reason",
			a: with(func(w *tlsWorld) { w.secretName = "" }), b: with(func(w *tlsWorld) { w.ann["proxy-ssl-secret"] = "other/ca" })},
		{name: "grpcs and https (the data plane keys by protocol too, the ID holds the rest)",
			a: base, b: with(func(w *tlsWorld) { w.protocol = "GRPCS" }), wantEqual: true},
		{name: "two Services of one namespace with the same name checked, Secret and SNI: one configuration",
			a: with(func(w *tlsWorld) { w.ann["proxy-ssl-name"] = "api.internal" }),
			b: with(func(w *tlsWorld) { w.ann["proxy-ssl-name"], w.svc = "api.internal", "r1" }), wantEqual: true},
		{name: "verification on by the CA and on by the annotation",
			a: base, b: with(func(w *tlsWorld) { w.ann["proxy-ssl-verify"] = "on" }), wantEqual: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tlsID(t, tc.a), tlsID(t, tc.b)
			if again := tlsID(t, tc.a); again != a {
				t.Fatalf("the same input gave two IDs: %q and %q", a, again)
			}
			if (a == b) != tc.wantEqual {
				t.Errorf("IDs equal %t, want %t:\n  %s\n  %s", a == b, tc.wantEqual, a, b)
			}
		})
	}
}
