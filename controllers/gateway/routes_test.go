package gateway

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// ResolvedRefs), once each, and not refs of other kinds.
func TestRouteBackendsIndex(t *testing.T) {
	other := gwv1.Namespace("other")
	cm := gwv1.Kind("ConfigMap")
	hr := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "r"}, Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web"}}}},
		Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow", Namespace: &other}}},
			{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "web"}}},
			{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "cm", Kind: &cm}}},
		},
	}}}}
	got := routeBackends(hr)
	want := []string{"app/web", "other/shadow"}
	if !slices.Equal(got, want) {
		t.Errorf("routeBackends = %v, want %v", got, want)
	}
}
