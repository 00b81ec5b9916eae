package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// grpcRoute is a GRPCRoute in ns with one rule to the Services backends (port 80), each
// "name" or "namespace/name".
func grpcRoute(ns, name string, parents []gwv1.ParentReference, backends ...string) *gwv1.GRPCRoute {
	var refs []gwv1.GRPCBackendRef
	for _, b := range backends {
		ref := gwv1.BackendObjectReference{Name: gwv1.ObjectName(b), Port: ptr(gwv1.PortNumber(80))}
		if bns, bname, ok := strings.Cut(b, "/"); ok {
			ref.Namespace, ref.Name = ptr(gwv1.Namespace(bns)), gwv1.ObjectName(bname)
		}
		refs = append(refs, gwv1.GRPCBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: ref}})
	}
	return &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gwv1.GRPCRouteRule{{BackendRefs: refs}}}}
}

// onListener is parentRef(ns, name) on one listener.
func onListener(ns, name, section string) gwv1.ParentReference {
	p := parentRef(ns, name)
	p.SectionName = ptr(gwv1.SectionName(section))
	return p
}

// serviceGrant lets routes of kind fromKind in namespace from refer to the Services of ns.
func serviceGrant(ns, name, fromKind, from string) *gwv1beta1.ReferenceGrant {
	return &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1beta1.ReferenceGrantSpec{
		From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: gwv1.Kind(fromKind), Namespace: gwv1.Namespace(from)}},
		To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}}
}

// TestGatewayGRPCRouteStatus: the controller writes GRPCRoutes' parent statuses as it does
// HTTPRoutes', from the same table, and counts both kinds in attachedRoutes. Hostile and
// broken cases first: a GRPCRoute on a listener that allows only HTTPRoutes is refused
// (NotAllowedByListeners); a backendRef into another namespace is RefNotPermitted without a
// ReferenceGrant, and still with one that lets HTTPRoutes (not GRPCRoutes) refer; a missing
// backend is BackendNotFound until its Service appears (the backend index, no route edit);
// another controller's entry is kept; a parentRef removed takes metalgate's entry away.
func TestGatewayGRPCRouteStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ctx := context.Background()
	ns, other := namespace(t), namespace(t)
	gatewayClass(t, "gc-grpc", gateway.ControllerName)
	pool(t, "gw-grpc", "100.64.55.0/30")
	all := gwv1.NamespacesFromAll
	newGateway(t, ns, "web", "gc-grpc", poolAnnotation("gw-grpc"), listener("any", gwv1.HTTPProtocolType, 80),
		listener("http-only", gwv1.HTTPProtocolType, 8080), func(g *gwv1.Gateway) {
			g.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
			g.Spec.Listeners[1].AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}}}
		})
	backendService(t, ns, "grpc-app")
	backendService(t, ns, "web-app")

	foreign := gwv1.RouteParentStatus{ParentRef: onListener(ns, "web", "any"), ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "theirs", LastTransitionTime: metav1.Now()}}}
	good := grpcRoute(ns, "good", []gwv1.ParentReference{onListener(ns, "web", "any")}, "grpc-app")
	create(t, good)
	good.Status.Parents = []gwv1.RouteParentStatus{foreign}
	if err := k8sClient.Status().Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	create(t, grpcRoute(ns, "wrong-listener", []gwv1.ParentReference{onListener(ns, "web", "http-only")}, "grpc-app"))
	create(t, grpcRoute(other, "cross", []gwv1.ParentReference{onListener(ns, "web", "any")}, ns+"/grpc-app"))
	create(t, grpcRoute(ns, "missing", []gwv1.ParentReference{onListener(ns, "web", "any")}, "not-yet"))
	create(t, httpRoute(ns, "web", []gwv1.ParentReference{parentRef(ns, "web")}, "web-app"))
	// A grant to HTTPRoutes of the other namespace: not to its GRPCRoutes.
	create(t, serviceGrant(ns, "http-only", "HTTPRoute", other))

	type key struct{ ns, name string }
	want := map[key]string{
		{ns, "good"}:           "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs",
		{ns, "wrong-listener"}: "Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs",
		{other, "cross"}:       "Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted",
		{ns, "missing"}:        "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound",
	}
	grpcStatus := func() string {
		for k, w := range want {
			if got := ourRouteParent(t, &gwv1.GRPCRoute{}, k.ns, k.name, ns, "web"); got != w {
				return fmt.Sprintf("GRPCRoute %s/%s: %q, want %q", k.ns, k.name, got, w)
			}
		}
		return ""
	}
	attached := func(any, httpOnly int32) string {
		g := getGateway(t, ns, "web")
		if len(g.Status.Listeners) != 2 || g.Status.Listeners[0].AttachedRoutes != any || g.Status.Listeners[1].AttachedRoutes != httpOnly {
			return fmt.Sprintf("listeners %+v, want attachedRoutes %d and %d", g.Status.Listeners, any, httpOnly)
		}
		return ""
	}
	eventually(t, wait, func() string {
		if why := grpcStatus(); why != "" {
			return why
		}
		if got, _ := ourParent(t, ns, "web", ns, "web"); got != "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs" {
			return fmt.Sprintf("HTTPRoute web: %q", got)
		}
		var gr gwv1.GRPCRoute
		ourRouteParent(t, &gr, ns, "good", ns, "web")
		if len(gr.Status.Parents) != 2 || gr.Status.Parents[0].ControllerName != foreign.ControllerName || gr.Status.Parents[0].Conditions[0].Message != "theirs" {
			return fmt.Sprintf("another controller's parent status was not kept first and unchanged: %+v", gr.Status.Parents)
		}
		// "any": good, cross, missing (accepted, refs unresolved) and the HTTPRoute;
		// "http-only": the HTTPRoute alone (wrong-listener is refused).
		return attached(4, 1)
	})

	// The Service created resolves the missing backend: only the backend index maps that
	// Service to the route's Gateway (nothing else about the Gateway changes).
	backendService(t, ns, "not-yet")
	want[key{ns, "missing"}] = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"
	eventually(t, wait, grpcStatus)
	// A grant of the route's own kind resolves the cross-namespace backendRef.
	create(t, serviceGrant(ns, "grpc", "GRPCRoute", other))
	want[key{other, "cross"}] = "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"
	eventually(t, wait, grpcStatus)

	var gr gwv1.GRPCRoute
	ourRouteParent(t, &gr, ns, "missing", ns, "web")
	gr.Spec.ParentRefs = []gwv1.ParentReference{parentRef(ns, "elsewhere")}
	if err := k8sClient.Update(ctx, &gr); err != nil {
		t.Fatal(err)
	}
	delete(want, key{ns, "missing"})
	eventually(t, wait, func() string {
		if got := ourRouteParent(t, &gwv1.GRPCRoute{}, ns, "missing", ns, "web"); got != "" {
			return fmt.Sprintf("GRPCRoute missing names another Gateway now, and still has metalgate's status for web: %q", got)
		}
		if why := grpcStatus(); why != "" {
			return why
		}
		return attached(3, 1)
	})
}
