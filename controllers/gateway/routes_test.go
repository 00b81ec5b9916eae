package gateway

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestMergeRouteParents(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	gw := types.NamespacedName{Namespace: "infra", Name: "web"}
	ref := func(ns, name string) gwv1.ParentReference {
		r := gwv1.ParentReference{Name: gwv1.ObjectName(name)}
		if ns != "" {
			r.Namespace = ptr(gwv1.Namespace(ns))
		}
		return r
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: at}
	}
	entry := func(controller gwv1.GatewayController, r gwv1.ParentReference, conds ...metav1.Condition) gwv1.RouteParentStatus {
		return gwv1.RouteParentStatus{ParentRef: r, ControllerName: controller, Conditions: conds}
	}
	foreign := entry("example.com/other", ref("infra", "web"), cond("Accepted", "True", "Accepted", t0))
	otherGW := entry(ControllerName, ref("infra", "api"), cond("Accepted", "True", "Accepted", t0))
	oursOld := entry(ControllerName, ref("infra", "web"), cond("Accepted", "True", "Accepted", t0), cond("ResolvedRefs", "True", "ResolvedRefs", t0))
	for _, tc := range []struct {
		name    string
		routeNS string
		prev    []gwv1.RouteParentStatus
		ours    []gwv1.RouteParentStatus
		want    []gwv1.RouteParentStatus
	}{{
		name: "first write", routeNS: "app",
		ours: []gwv1.RouteParentStatus{entry(ControllerName, ref("infra", "web"), cond("Accepted", "True", "Accepted", metav1.Time{}))},
		want: []gwv1.RouteParentStatus{entry(ControllerName, ref("infra", "web"), cond("Accepted", "True", "Accepted", t1))},
	}, {
		name: "another controller's entry for the same Gateway and our entry for another Gateway are kept in place", routeNS: "app",
		prev: []gwv1.RouteParentStatus{foreign, oursOld, otherGW},
		ours: []gwv1.RouteParentStatus{entry(ControllerName, ref("infra", "web"), cond("Accepted", "False", "NotAllowedByListeners", metav1.Time{}))},
		want: []gwv1.RouteParentStatus{foreign, otherGW, entry(ControllerName, ref("infra", "web"), cond("Accepted", "False", "NotAllowedByListeners", t1))},
	}, {
		name: "unchanged status keeps its transition time", routeNS: "app",
		prev: []gwv1.RouteParentStatus{oursOld},
		ours: []gwv1.RouteParentStatus{entry(ControllerName, ref("infra", "web"), cond("Accepted", "True", "Accepted", metav1.Time{}), cond("ResolvedRefs", "False", "BackendNotFound", metav1.Time{}))},
		want: []gwv1.RouteParentStatus{entry(ControllerName, ref("infra", "web"), cond("Accepted", "True", "Accepted", t0), cond("ResolvedRefs", "False", "BackendNotFound", t1))},
	}, {
		name: "the route no longer names the Gateway: our entry goes, the others stay", routeNS: "app",
		prev: []gwv1.RouteParentStatus{oursOld, foreign},
		want: []gwv1.RouteParentStatus{foreign},
	}, {
		name: "a parentRef without namespace is the route's own namespace", routeNS: "infra",
		prev: []gwv1.RouteParentStatus{entry(ControllerName, ref("", "web"), cond("Accepted", "True", "Accepted", t0))},
		want: nil,
	}, {
		name: "a parentRef without namespace in another namespace names another Gateway", routeNS: "app",
		prev: []gwv1.RouteParentStatus{entry(ControllerName, ref("", "web"), cond("Accepted", "True", "Accepted", t0))},
		want: []gwv1.RouteParentStatus{entry(ControllerName, ref("", "web"), cond("Accepted", "True", "Accepted", t0))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeRouteParents(tc.prev, gw, tc.routeNS, tc.ours, t1)
			if got == nil {
				t.Fatal("nil: status.parents is required, the API server refuses null")
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouteBackendsIndex: the backend index lists the Services of backendRefs and of
// RequestMirror filters (a mirror Service appearing or going changes the route's
// ResolvedRefs) of HTTPRoutes and GRPCRoutes, once each, and not refs of other kinds.
func TestRouteBackendsIndex(t *testing.T) {
	other := gwv1.Namespace("other")
	cm := gwv1.Kind("ConfigMap")
	ref := func(name string, ns *gwv1.Namespace, kind *gwv1.Kind) gwv1.BackendObjectReference {
		return gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Namespace: ns, Kind: kind}
	}
	meta := metav1.ObjectMeta{Namespace: "app", Name: "r"}
	for _, tc := range []struct {
		name  string
		route client.Object
		want  []string
	}{{
		name: "HTTPRoute", route: &gwv1.HTTPRoute{ObjectMeta: meta, Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: ref("web", nil, nil)}}},
			Filters: []gwv1.HTTPRouteFilter{
				{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: ref("shadow", &other, nil)}},
				{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: ref("web", nil, nil)}},
				{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: ref("cm", nil, &cm)}},
			},
		}}}},
		want: []string{"app/web", "other/shadow"},
	}, {
		name: "GRPCRoute", route: &gwv1.GRPCRoute{ObjectMeta: meta, Spec: gwv1.GRPCRouteSpec{Rules: []gwv1.GRPCRouteRule{{
			BackendRefs: []gwv1.GRPCBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: ref("grpc", nil, nil)}},
				{BackendRef: gwv1.BackendRef{BackendObjectReference: ref("cm", nil, &cm)}},
			},
			Filters: []gwv1.GRPCRouteFilter{
				{Type: gwv1.GRPCRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: ref("shadow", &other, nil)}},
				{Type: gwv1.GRPCRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: ref("grpc", nil, nil)}},
			},
		}, {
			BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: ref("grpc2", &other, nil)}}},
		}}}},
		want: []string{"app/grpc", "other/shadow", "other/grpc2"},
	}, {
		name: "another kind", route: &gwv1.Gateway{ObjectMeta: meta},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeBackends(tc.route); !slices.Equal(got, tc.want) {
				t.Errorf("routeBackends = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRouteGateways: a route of either kind maps to the Gateways its parentRefs name (its own
// namespace unless one is given; refs to other kinds ignored) and to those metalgate holds a
// parent status for, once each; another controller's status maps to nothing.
func TestRouteGateways(t *testing.T) {
	infra := gwv1.Namespace("infra")
	svc := gwv1.Kind("Service")
	spec := gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{
		{Name: "a"}, {Name: "b", Namespace: &infra}, {Name: "a"}, {Name: "s", Kind: &svc},
	}}
	status := gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{
		{ControllerName: ControllerName, ParentRef: gwv1.ParentReference{Name: "gone", Namespace: &infra}},
		{ControllerName: ControllerName, ParentRef: gwv1.ParentReference{Name: "a"}},
		{ControllerName: "example.com/other", ParentRef: gwv1.ParentReference{Name: "theirs"}},
	}}
	want := []ctrl.Request{
		{NamespacedName: types.NamespacedName{Namespace: "app", Name: "a"}},
		{NamespacedName: types.NamespacedName{Namespace: "infra", Name: "b"}},
		{NamespacedName: types.NamespacedName{Namespace: "infra", Name: "gone"}},
	}
	meta := metav1.ObjectMeta{Namespace: "app", Name: "r"}
	for _, route := range []client.Object{
		&gwv1.HTTPRoute{ObjectMeta: meta, Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: spec}, Status: gwv1.HTTPRouteStatus{RouteStatus: status}},
		&gwv1.GRPCRoute{ObjectMeta: meta, Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: spec}, Status: gwv1.GRPCRouteStatus{RouteStatus: status}},
	} {
		if diff := cmp.Diff(want, routeGateways(t.Context(), route)); diff != "" {
			t.Errorf("%T (-want +got):\n%s", route, diff)
		}
	}
	if got := routeGateways(t.Context(), &gwv1.Gateway{ObjectMeta: meta}); got != nil {
		t.Errorf("a Gateway maps to %v, want nothing", got)
	}
}
