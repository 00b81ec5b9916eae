package gateway

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestFrontendStatus: the client-certificate validation's conditions in the Gateway's
// status. Hostile cases first: a port with no usable CA leaves its HTTPS listener not
// accepted (NoValidCACertificate) and not programmed; a certificateRef's own verdict is not
// overwritten; an insecure fallback is announced on the Gateway, and the announcement goes
// when the Gateway is back to AllowValidOnly.
func TestFrontendStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const svc = "metalgate-system/gw-ns-g-x"
	vip := []netip.Addr{netip.MustParseAddr("100.64.0.1")}
	frontend := func(mode gwv1.FrontendValidationModeType) func(*gwv1.Gateway) {
		return func(g *gwv1.Gateway) {
			g.Spec.TLS = &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{PerPort: []gwv1.TLSPortConfig{{Port: 8443,
				TLS: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{Mode: mode, CACertificateRefs: []gwv1.ObjectReference{{Kind: "ConfigMap", Name: "ca"}}}}}}}}
		}
	}
	noCA := table.FrontendProblem{Reason: string(gwv1.ListenerReasonInvalidCACertificateRef), Message: "ConfigMap ns/ca not found", NoValidCA: true}
	partial := table.FrontendProblem{Reason: string(gwv1.ListenerReasonInvalidCACertificateKind), Message: "kind Service"}
	for _, tc := range []struct {
		name     string
		gw       *gwv1.Gateway
		obs      Observed
		gateway  string // summary of the Gateway's conditions
		listener string // summary of the first listener's
	}{{
		name: "no usable CA", gw: gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowValidOnly)),
		obs:      Observed{Service: svc, VIPs: vip, FrontendProblems: map[string]table.FrontendProblem{"s": noCA}},
		gateway:  "Accepted=True/Accepted Programmed=True/Programmed",
		listener: "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
	}, {
		name: "a certificateRef's problem stays", gw: gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowValidOnly)),
		obs: Observed{Service: svc, VIPs: vip, CertificateProblems: map[string]string{"s": "Secret ns/cert not found"},
			FrontendProblems: map[string]table.FrontendProblem{"s": partial}},
		gateway:  "Accepted=True/Accepted Programmed=True/Programmed",
		listener: "Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
	}, {
		name: "insecure fallback, one bad ref of two", gw: gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowInsecureFallback)),
		obs:      Observed{Service: svc, VIPs: vip, FrontendProblems: map[string]table.FrontendProblem{"s": partial}},
		gateway:  "Accepted=True/Accepted Programmed=True/Programmed InsecureFrontendValidationMode=True/ConfigurationChanged",
		listener: "Accepted=True/Accepted ResolvedRefs=False/InvalidCACertificateKind Conflicted=False/NoConflicts Programmed=True/Programmed",
	}, {
		name: "valid only", gw: gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowValidOnly)), obs: Observed{Service: svc, VIPs: vip},
		gateway:  "Accepted=True/Accepted Programmed=True/Programmed",
		listener: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := Status(tc.gw, PlanGateway(tc.gw, nil), tc.obs, gwv1.GatewayStatus{}, t0)
			if got := summary(st.Conditions); got != tc.gateway {
				t.Errorf("Gateway conditions:\n got %s\nwant %s", got, tc.gateway)
			}
			if got := summary(st.Listeners[0].Conditions); got != tc.listener {
				t.Errorf("listener conditions:\n got %s\nwant %s", got, tc.listener)
			}
		})
	}

	t.Run("back to AllowValidOnly removes InsecureFrontendValidationMode", func(t *testing.T) {
		insecure := gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowInsecureFallback))
		prev := Status(insecure, PlanGateway(insecure, nil), Observed{Service: svc, VIPs: vip}, gwv1.GatewayStatus{}, t0)
		secure := gw(l("s", "HTTPS", 8443), frontend(gwv1.AllowValidOnly))
		st := Status(secure, PlanGateway(secure, nil), Observed{Service: svc, VIPs: vip}, prev, t0)
		if got, want := summary(st.Conditions), "Accepted=True/Accepted Programmed=True/Programmed"; got != want {
			t.Errorf("Gateway conditions: %s, want %s", got, want)
		}
	})
}
