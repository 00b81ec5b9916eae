package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestGatewayListenerCertificates: an HTTPS listener whose certificateRef names a Secret that
// is missing, or holds no valid key pair, has ResolvedRefs=False InvalidCertificateRef and is
// not Programmed, while the Gateway's HTTP listener is unaffected; once the Secret holds a
// valid pair (fixed after the Gateway was made: Secrets are read by name, not watched), the
// listener resolves. The conformance tests GatewayInvalidTLSConfiguration and
// GatewayWithAttachedRoutes check the first half.
func TestGatewayListenerCertificates(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ctx := context.Background()
	ns := namespace(t)
	gatewayClass(t, "gc-certs", gateway.ControllerName)
	pool(t, "gw-certs", "100.64.51.0/30")
	newGateway(t, ns, "web", "gc-certs", poolAnnotation("gw-certs"),
		listener("http", gwv1.HTTPProtocolType, 80), listener("https", gwv1.HTTPSProtocolType, 443))

	listenerState := func(name string) (string, string) {
		g := getGateway(t, ns, "web")
		for _, l := range g.Status.Listeners {
			if string(l.Name) != name {
				continue
			}
			var parts []string
			msg := ""
			for _, typ := range []string{"ResolvedRefs", "Programmed"} {
				c := meta.FindStatusCondition(l.Conditions, typ)
				if c == nil {
					return "no " + typ, ""
				}
				if c.ObservedGeneration != g.Generation {
					return fmt.Sprintf("%s at generation %d, want %d", typ, c.ObservedGeneration, g.Generation), ""
				}
				parts = append(parts, fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason))
				if typ == "ResolvedRefs" {
					msg = c.Message
				}
			}
			return strings.Join(parts, " "), msg
		}
		return "no listener " + name, ""
	}
	expect := func(step, listenerName, want, inMessage string) {
		t.Helper()
		eventually(t, wait, func() string {
			got, msg := listenerState(listenerName)
			if got != want || !strings.Contains(msg, inMessage) {
				return fmt.Sprintf("%s: listener %s %q (%q), want %q with %q", step, listenerName, got, msg, want, inMessage)
			}
			return ""
		})
	}

	expect("Secret missing", "https", "ResolvedRefs=False/InvalidCertificateRef Programmed=False/Invalid", "Secret "+ns+"/cert not found")
	expect("Secret missing", "http", "ResolvedRefs=True/ResolvedRefs Programmed=True/Programmed", "")

	crt, key := testenv.SelfSigned(t, "web.example")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: []byte("not a key")}}
	create(t, sec)
	expect("Secret with a broken key", "https", "ResolvedRefs=False/InvalidCertificateRef Programmed=False/Invalid", "Secret "+ns+"/cert:")

	sec.Data[corev1.TLSPrivateKeyKey] = key
	if err := k8sClient.Update(ctx, sec); err != nil {
		t.Fatalf("fix the Secret: %v", err)
	}
	expect("Secret fixed", "https", "ResolvedRefs=True/ResolvedRefs Programmed=True/Programmed", "")
}

// certSecret creates a kubernetes.io/tls Secret with a valid self-signed key pair.
func certSecret(t *testing.T, ns, name string) {
	t.Helper()
	crt, key := testenv.SelfSigned(t, name+".example")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
}
