package gateway_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// tlsRoute is a TLSRoute in ns for hostname with one rule to Service backend (port 80).
func tlsRoute(ns, name, hostname string, parents []gwv1.ParentReference, backend string) *gwv1.TLSRoute {
	return &gwv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(hostname)},
			Rules: []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
				Name: gwv1.ObjectName(backend), Port: ptr(gwv1.PortNumber(80))}}}}}}}
}

// TestGatewayTLSRouteStatus: the controller writes TLSRoutes' parent statuses from the same
// table as HTTPRoutes', and the TLS Passthrough listener's supportedKinds and attachedRoutes.
// Hostile and broken cases first: a TLSRoute naming an HTTP listener is NotAllowedByListeners
// (and an HTTPRoute naming the TLS listener too); a TLSRoute of another namespace than the
// listener admits is NotAllowedByListeners; a hostname outside the listener's is
// NoMatchingListenerHostname; a missing backend is BackendNotFound until its Service appears
// (the backend index alone maps that Service to the Gateway). A TLS listener in mode
// Terminate is not served (Accepted=False UnsupportedValue, no supported kind).
func TestGatewayTLSRouteStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns, other := namespace(t), namespace(t)
	gatewayClass(t, "gc-tls", gateway.ControllerName)
	pool(t, "gw-tls", "100.64.56.0/30")
	pass, term := gwv1.TLSModePassthrough, gwv1.TLSModeTerminate
	newGateway(t, ns, "edge", "gc-tls", poolAnnotation("gw-tls"), listener("http", gwv1.HTTPProtocolType, 80),
		func(g *gwv1.Gateway) {
			g.Spec.Listeners = append(g.Spec.Listeners,
				gwv1.Listener{Name: "tls", Protocol: gwv1.TLSProtocolType, Port: 443, Hostname: ptr(gwv1.Hostname("*.example.com")),
					TLS: &gwv1.ListenerTLSConfig{Mode: &pass}},
				gwv1.Listener{Name: "term", Protocol: gwv1.TLSProtocolType, Port: 8443,
					TLS: &gwv1.ListenerTLSConfig{Mode: &term, CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}})
		})
	backendService(t, ns, "tls-app")
	backendService(t, ns, "web-app")
	backendService(t, other, "tls-app")

	create(t, tlsRoute(ns, "good", "a.example.com", []gwv1.ParentReference{onListener(ns, "edge", "tls")}, "tls-app"))
	create(t, tlsRoute(ns, "on-http", "a.example.com", []gwv1.ParentReference{onListener(ns, "edge", "http")}, "tls-app"))
	create(t, tlsRoute(other, "outsider", "b.example.com", []gwv1.ParentReference{onListener(ns, "edge", "tls")}, "tls-app"))
	create(t, tlsRoute(ns, "elsewhere", "a.example.org", []gwv1.ParentReference{onListener(ns, "edge", "tls")}, "tls-app"))
	create(t, tlsRoute(ns, "missing", "c.example.com", []gwv1.ParentReference{onListener(ns, "edge", "tls")}, "not-yet"))
	create(t, httpRoute(ns, "http-on-tls", []gwv1.ParentReference{onListener(ns, "edge", "tls")}, "web-app"))

	type key struct{ ns, name string }
	want := map[key]string{
		{ns, "good"}:        "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs",
		{ns, "on-http"}:     "Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
		{other, "outsider"}: "Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
		{ns, "elsewhere"}:   "Accepted=False/NoMatchingListenerHostname ResolvedRefs=True/ResolvedRefs",
		{ns, "missing"}:     "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound",
	}
	tlsStatus := func() string {
		for k, w := range want {
			if got := ourRouteParent(t, &gwv1.TLSRoute{}, k.ns, k.name, ns, "edge"); got != w {
				return fmt.Sprintf("TLSRoute %s/%s: %q, want %q", k.ns, k.name, got, w)
			}
		}
		return ""
	}
	eventually(t, wait, func() string {
		if why := tlsStatus(); why != "" {
			return why
		}
		if got, _ := ourParent(t, ns, "http-on-tls", ns, "edge"); got != "Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs" {
			return fmt.Sprintf("HTTPRoute on the TLS listener: %q", got)
		}
		g := getGateway(t, ns, "edge")
		if len(g.Status.Listeners) != 3 {
			return fmt.Sprintf("listeners %+v", g.Status.Listeners)
		}
		tls, tm := g.Status.Listeners[1], g.Status.Listeners[2]
		if tls.AttachedRoutes != 2 || len(tls.SupportedKinds) != 1 || tls.SupportedKinds[0].Kind != "TLSRoute" {
			return fmt.Sprintf("TLS listener: attachedRoutes %d, supportedKinds %+v; want 2 (good, missing) and TLSRoute", tls.AttachedRoutes, tls.SupportedKinds)
		}
		if why := hasCondition(tm.Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedValue", "Terminate", g.Generation); why != "" {
			return "TLS listener in mode Terminate: " + why
		}
		if len(tm.SupportedKinds) != 0 {
			return fmt.Sprintf("TLS listener in mode Terminate: supportedKinds %+v, want none", tm.SupportedKinds)
		}
		return ""
	})

	backendService(t, ns, "not-yet")
	want[key{ns, "missing"}] = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"
	eventually(t, wait, tlsStatus)

	// A parentRef removed takes metalgate's entry away.
	var tr gwv1.TLSRoute
	ourRouteParent(t, &tr, ns, "good", ns, "edge")
	tr.Spec.ParentRefs = []gwv1.ParentReference{parentRef(ns, "elsewhere")}
	if err := k8sClient.Update(context.Background(), &tr); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if got := ourRouteParent(t, &gwv1.TLSRoute{}, ns, "good", ns, "edge"); got != "" {
			return fmt.Sprintf("TLSRoute good names another Gateway now, and still has metalgate's status for edge: %q", got)
		}
		return ""
	})
}
