package gateway_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

func httpRoute(ns, name string, parents []gwv1.ParentReference, backends ...string) *gwv1.HTTPRoute {
	var refs []gwv1.HTTPBackendRef
	for _, b := range backends {
		port := gwv1.PortNumber(80)
		refs = append(refs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: gwv1.ObjectName(b), Port: &port}}})
	}
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: refs}}}}
}

func parentRef(ns, name string) gwv1.ParentReference {
	n := gwv1.Namespace(ns)
	return gwv1.ParentReference{Namespace: &n, Name: gwv1.ObjectName(name)}
}

func backendService(t *testing.T, ns, name string) {
	t.Helper()
	create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
}

// ourParent is the parent status metalgate wrote on HTTPRoute ns/name for Gateway
// gwNS/gwName (ourRouteParent), and the route.
func ourParent(t *testing.T, ns, name, gwNS, gwName string) (string, *gwv1.HTTPRoute) {
	t.Helper()
	var hr gwv1.HTTPRoute
	return ourRouteParent(t, &hr, ns, name, gwNS, gwName), &hr
}

// ourRouteParent reads route ns/name into route (an HTTPRoute or a GRPCRoute) and returns the
// parent status metalgate wrote on it for Gateway gwNS/gwName, as
// "Accepted=<status>/<reason> ResolvedRefs=<status>/<reason>", or "" when there is none.
func ourRouteParent(t *testing.T, route client.Object, ns, name, gwNS, gwName string) string {
	t.Helper()
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, route); err != nil {
		t.Fatal(err)
	}
	var parents []gwv1.RouteParentStatus
	switch r := route.(type) {
	case *gwv1.HTTPRoute:
		parents = r.Status.Parents
	case *gwv1.GRPCRoute:
		parents = r.Status.Parents
	case *gwv1.TLSRoute:
		parents = r.Status.Parents
	default:
		t.Fatalf("ourRouteParent: %T is not a route", route)
	}
	for _, p := range parents {
		if p.ControllerName != gateway.ControllerName || string(p.ParentRef.Name) != gwName ||
			p.ParentRef.Namespace == nil || string(*p.ParentRef.Namespace) != gwNS {
			continue
		}
		out := ""
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			c := findCondition(p.Conditions, typ)
			if c == nil {
				out += typ + "=none "
				continue
			}
			if c.ObservedGeneration != route.GetGeneration() || c.LastTransitionTime.IsZero() {
				out += fmt.Sprintf("%s(generation %d of %d, time %v) ", typ, c.ObservedGeneration, route.GetGeneration(), c.LastTransitionTime)
			}
			out += fmt.Sprintf("%s=%s/%s ", typ, c.Status, c.Reason)
		}
		return out[:len(out)-1]
	}
	return ""
}

// TestGatewayRouteStatus: the controller writes each HTTPRoute's parent status for its
// Gateway, computed by the proxy's table builder, and the listeners' attachedRoutes. Hostile
// and broken cases first: a route from a namespace the listener does not admit is refused
// (NotAllowedByListeners) and not counted; a backend that does not exist is BackendNotFound
// until the Service appears (a Service watch, no route edit); another controller's entry on
// the same route is never touched; a parentRef removed takes metalgate's entry away; deleting
// the Gateway removes the rest.
func TestGatewayRouteStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ctx := context.Background()
	ns, other := namespace(t), namespace(t)
	gatewayClass(t, "gc-routes", gateway.ControllerName)
	pool(t, "gw-routes", "100.64.49.0/30")
	newGateway(t, ns, "web", "gc-routes", poolAnnotation("gw-routes"), listener("http", gwv1.HTTPProtocolType, 80))
	backendService(t, ns, "app")
	backendService(t, other, "app")

	foreign := gwv1.RouteParentStatus{ParentRef: parentRef(ns, "web"), ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "theirs", LastTransitionTime: metav1.Now()}}}
	good := httpRoute(ns, "good", []gwv1.ParentReference{parentRef(ns, "web")}, "app")
	create(t, good)
	good.Status.Parents = []gwv1.RouteParentStatus{foreign}
	if err := k8sClient.Status().Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	create(t, httpRoute(ns, "missing", []gwv1.ParentReference{parentRef(ns, "web")}, "not-yet"))
	create(t, httpRoute(other, "intruder", []gwv1.ParentReference{parentRef(ns, "web")}, "app"))

	want := map[string]string{
		"good":     "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs",
		"missing":  "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound",
		"intruder": "Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
	}
	routeNS := map[string]string{"good": ns, "missing": ns, "intruder": other}
	eventually(t, wait, func() string {
		for name, w := range want {
			if got, _ := ourParent(t, routeNS[name], name, ns, "web"); got != w {
				return fmt.Sprintf("route %s: %q, want %q", name, got, w)
			}
		}
		_, hr := ourParent(t, ns, "good", ns, "web")
		if len(hr.Status.Parents) != 2 || hr.Status.Parents[0].ControllerName != foreign.ControllerName || hr.Status.Parents[0].Conditions[0].Message != "theirs" {
			return fmt.Sprintf("another controller's parent status was not kept first and unchanged: %+v", hr.Status.Parents)
		}
		g := getGateway(t, ns, "web")
		if len(g.Status.Listeners) != 1 || g.Status.Listeners[0].AttachedRoutes != 2 {
			return fmt.Sprintf("listeners %+v, want attachedRoutes 2 (good and missing; not the intruder)", g.Status.Listeners)
		}
		return ""
	})

	backendService(t, ns, "not-yet")
	eventually(t, wait, func() string {
		if got, _ := ourParent(t, ns, "missing", ns, "web"); got != "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs" {
			return fmt.Sprintf("route missing after its Service appeared: %q", got)
		}
		return ""
	})

	_, hr := ourParent(t, ns, "missing", ns, "web")
	hr.Spec.ParentRefs = []gwv1.ParentReference{parentRef(ns, "elsewhere")}
	if err := k8sClient.Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if got, _ := ourParent(t, ns, "missing", ns, "web"); got != "" {
			return fmt.Sprintf("route missing names another Gateway now, and still has metalgate's status for web: %q", got)
		}
		if g := getGateway(t, ns, "web"); g.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Sprintf("attachedRoutes %d, want 1", g.Status.Listeners[0].AttachedRoutes)
		}
		return ""
	})

	if err := k8sClient.Delete(ctx, getGateway(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		for _, r := range []struct{ ns, name string }{{ns, "good"}, {other, "intruder"}} {
			if got, _ := ourParent(t, r.ns, r.name, ns, "web"); got != "" {
				return fmt.Sprintf("route %s/%s keeps metalgate's status for the deleted Gateway: %q", r.ns, r.name, got)
			}
		}
		if _, hr := ourParent(t, ns, "good", ns, "web"); len(hr.Status.Parents) != 1 || hr.Status.Parents[0].ControllerName != foreign.ControllerName {
			return fmt.Sprintf("another controller's parent status: %+v", hr.Status.Parents)
		}
		return ""
	})
}
