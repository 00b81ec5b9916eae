package gatewayapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/internal/testenv"
)

// Routes attach only to listeners the translation accepted: a listener in conflict with
// another on its port, or an HTTPS one whose certificateRefs may not be used or give no
// certificate, serves no route and counts none, whatever its hostname; the listeners beside it
// are unaffected.
func TestRoutesAttachOnlyToAcceptedListeners(t *testing.T) {
	http := func(name string, port int32, host string) gatewayv1.Listener {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}}}
		if host != "" {
			l.Hostname = ptr(gatewayv1.Hostname(host))
		}
		return l
	}
	https := func(name string, port int32, host, secretNS string) gatewayv1.Listener {
		l := http(name, port, host)
		l.Protocol = gatewayv1.HTTPSProtocolType
		ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
		if secretNS != "" {
			ref.Namespace = ptr(gatewayv1.Namespace(secretNS))
		}
		l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}}
		return l
	}
	for _, tc := range []struct {
		name      string
		listeners []gatewayv1.Listener
		parent    parent
		attached  map[string]int32
		accepted  string // the route's Accepted condition: "True", or "False <Reason>"
		probes    []probe
	}{
		{
			name:      "a hostname conflict serves nothing on the conflicted listeners, the others still",
			listeners: []gatewayv1.Listener{http("a", 80, "a.example.com"), http("b", 80, "a.example.com"), http("c", 8080, "")},
			parent:    parent{ns: "infra", name: "gw"},
			attached:  map[string]int32{"a": 0, "b": 0, "c": 1},
			accepted:  "True",
			probes:    []probe{{80, "a.example.com", "/", ""}, {8080, "a.example.com", "/", "infra/web"}},
		},
		{
			name:      "a parentRef naming only a conflicted listener is not accepted",
			listeners: []gatewayv1.Listener{http("a", 80, "a.example.com"), http("b", 80, "a.example.com")},
			parent:    onGW("a"),
			attached:  map[string]int32{"a": 0, "b": 0},
			accepted:  "False NotAllowedByListeners",
			probes:    []probe{{80, "a.example.com", "/", ""}},
		},
		{
			name:      "a protocol conflict on a port serves neither listener",
			listeners: []gatewayv1.Listener{http("plain", 443, "a.example.com"), https("tls", 443, "b.example.com", "")},
			parent:    parent{ns: "infra", name: "gw"},
			attached:  map[string]int32{"plain": 0, "tls": 0},
			accepted:  "False NotAllowedByListeners",
			probes:    []probe{{443, "a.example.com", "/", ""}, {443, "b.example.com", "/", ""}},
		},
		{
			name:      "an HTTPS listener whose certificate Secret is in another namespace without a grant",
			listeners: []gatewayv1.Listener{https("elsewhere", 443, "", "certs"), https("own", 8443, "", "")},
			parent:    parent{ns: "infra", name: "gw"},
			attached:  map[string]int32{"elsewhere": 0, "own": 1},
			accepted:  "True",
			probes:    []probe{{443, "a.example.com", "/", ""}, {8443, "a.example.com", "/", "infra/web"}},
		},
		{
			name:      "an HTTPS listener whose certificate Secret does not exist still counts its routes (conformance: GatewayWithAttachedRoutes, unresolved refs)",
			listeners: []gatewayv1.Listener{https("missing", 443, "", ""), https("own", 8443, "", "")},
			parent:    parent{ns: "infra", name: "gw"},
			attached:  map[string]int32{"missing": 1, "own": 1},
			accepted:  "True",
			probes:    []probe{{443, "a.example.com", "/", "infra/web"}, {8443, "a.example.com", "/", "infra/web"}},
		},
		{
			name: "a listener with route kinds it cannot serve besides HTTPRoute is still served",
			listeners: func() []gatewayv1.Listener {
				l := http("kinds", 80, "")
				l.AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "TCPRoute"}}
				return []gatewayv1.Listener{l}
			}(),
			parent:   parent{ns: "infra", name: "gw"},
			attached: map[string]int32{"kinds": 1},
			accepted: "True",
			probes:   []probe{{80, "a.example.com", "/", "infra/web"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM := testenv.SelfSigned(t, "a.example.com")
			in := gatewayWorld([]*gatewayv1.HTTPRoute{httpRoute("infra", "r", 0, []parent{tc.parent}, nil, toBackend("", "web"))})
			in.Gateway.Spec.Listeners = tc.listeners
			for _, l := range tc.listeners { // every HTTPS listener's Secret exists but "missing"'s
				if l.Name == "missing" || l.TLS == nil {
					continue
				}
				ns := "infra"
				if n := l.TLS.CertificateRefs[0].Namespace; n != nil {
					ns = string(*n)
				}
				in.Secrets = append(in.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: string(l.Name)}, Type: corev1.SecretTypeTLS,
					Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}})
			}
			res := Translate(in)
			if diff := cmp.Diff(tc.attached, res.Status.AttachedRoutes); diff != "" {
				t.Errorf("attachedRoutes (-want +got):\n%s", diff)
			}
			if len(res.Status.Routes) != 1 || len(res.Status.Routes[0].Parents) != 1 {
				t.Fatalf("route statuses %+v, want one parent", res.Status.Routes)
			}
			c := res.Status.Routes[0].Parents[0].Conditions[0]
			got := string(c.Status)
			if c.Status != metav1.ConditionTrue {
				got += " " + c.Reason
			}
			if got != tc.accepted {
				t.Errorf("Accepted = %s (%s), want %s", got, c.Message, tc.accepted)
			}
			if c.Status != metav1.ConditionTrue && !strings.Contains(c.Message, "not served") {
				t.Errorf("Accepted message %q does not say the listener is not served", c.Message)
			}
			for _, p := range tc.probes {
				p.check(t, res.Table)
			}
		})
	}
}
