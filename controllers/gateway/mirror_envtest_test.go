package gateway_test

import (
	"fmt"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// TestGatewayRouteMirrorStatus: a RequestMirror filter whose Service does not exist makes
// the route's ResolvedRefs False (BackendNotFound) while the route stays Accepted; the
// Service appearing (found through the backend index, which lists mirror Services) makes it
// True.
func TestGatewayRouteMirrorStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-mirror", gateway.ControllerName)
	pool(t, "gw-mirror", "100.64.53.0/30")
	newGateway(t, ns, "web", "gc-mirror", poolAnnotation("gw-mirror"), listener("http", gwv1.HTTPProtocolType, 80))
	backendService(t, ns, "app")
	hr := httpRoute(ns, "mirrored", []gwv1.ParentReference{parentRef(ns, "web")}, "app")
	port := gwv1.PortNumber(80)
	hr.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow", Port: &port}}}}
	create(t, hr)
	eventually(t, wait, func() string {
		if got, _ := ourParent(t, ns, "mirrored", ns, "web"); got != "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound" {
			return fmt.Sprintf("route with a mirror to a missing Service: %q", got)
		}
		return ""
	})
	backendService(t, ns, "shadow")
	eventually(t, wait, func() string {
		if got, _ := ourParent(t, ns, "mirrored", ns, "web"); got != "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs" {
			return fmt.Sprintf("route after its mirror Service appeared: %q", got)
		}
		return ""
	})
}
