package gateway

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestGatewaysOfBackend: a backend Service made or deleted, or a BackendTLSPolicy naming it,
// reaches the Gateways of every route that sends to it — also a route attached only through
// a ListenerSet, whose Gateway it does not name (the ListenerSet's Gateway is found through
// the ListenerSet). Without ListenerSets served, only the Gateways routes name.
func TestGatewaysOfBackend(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := gwv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	lsGroup, lsKind, infra := gwv1.Group(gwv1.GroupName), gwv1.Kind("ListenerSet"), gwv1.Namespace("infra")
	route := func(name string, parent gwv1.ParentReference) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
				Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: "app"}}}}}}}}
	}
	objs := []client.Object{
		// Attached only through ListenerSet shop/tenant, whose parent is Gateway infra/shared.
		route("via-set", gwv1.ParentReference{Group: &lsGroup, Kind: &lsKind, Name: "tenant"}),
		&gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "tenant"},
			Spec: gwv1.ListenerSetSpec{ParentRef: gwv1.ParentGatewayReference{Namespace: &infra, Name: "shared"}}},
		// Attached to Gateway shop/own directly.
		route("direct", gwv1.ParentReference{Name: "own"}),
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&gwv1.HTTPRoute{}, indexBackend, routeBackends).Build()
	svc := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app"}}
	gw := func(ns, name string) ctrl.Request {
		return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	sorted := func(rs []ctrl.Request) []ctrl.Request {
		return slices.SortedFunc(slices.Values(rs), func(a, b ctrl.Request) int {
			return strings.Compare(a.String(), b.String())
		})
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		lsets bool
		want  []ctrl.Request
	}{
		{"ListenerSets served", true, []ctrl.Request{gw("infra", "shared"), gw("shop", "own")}},
		{"ListenerSets not served", false, []ctrl.Request{gw("shop", "own")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parents := routeParentsOf(c, tc.lsets)
			if got := sorted(gatewaysOfBackend(ctx, c, parents, false, false, svc)); !slices.Equal(got, tc.want) {
				t.Errorf("Gateways of Service shop/app: %v, want %v", got, tc.want)
			}
			p := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "tls"},
				Spec: gwv1.BackendTLSPolicySpec{TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{
					LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "app"}}}}}
			if got := sorted(policyGateways(ctx, c, parents, false, p)); !slices.Equal(got, tc.want) {
				t.Errorf("Gateways of BackendTLSPolicy shop/tls: %v, want %v", got, tc.want)
			}
		})
	}
}
