package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestGatewayFindings(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}
	}
	gateway := func(ns, name, class string, conds ...metav1.Condition) gwv1.Gateway {
		return gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
			Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)}, Status: gwv1.GatewayStatus{Conditions: conds}}
	}
	ok := []metav1.Condition{cond("Accepted", "True", "Accepted", ""), cond("Programmed", "True", "Programmed", "")}
	gwNS := gwv1.Namespace("infra")
	route := func(name string, controller gwv1.GatewayController, conds ...metav1.Condition) gwv1.HTTPRoute {
		return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
			Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{
				ParentRef: gwv1.ParentReference{Namespace: &gwNS, Name: "web"}, ControllerName: controller, Conditions: conds}}}}}
	}
	grpcRoute := func(name string, controller gwv1.GatewayController, conds ...metav1.Condition) gwv1.GRPCRoute {
		hr := route(name, controller, conds...)
		return gwv1.GRPCRoute{ObjectMeta: hr.ObjectMeta, Status: gwv1.GRPCRouteStatus{RouteStatus: hr.Status.RouteStatus}}
	}
	listenerBad := gateway("infra", "tls", "metalgate", ok...)
	listenerBad.Status.Listeners = []gwv1.ListenerStatus{{Name: "https", Conditions: []metav1.Condition{
		cond("Accepted", "True", "Accepted", ""), cond("ResolvedRefs", "False", "RefNotPermitted", "Secret other/cert is in another namespace")}}}
	stale := gateway("infra", "stale", "metalgate", ok...)
	stale.Generation = 2
	s := gatewayState{
		classes: []gwv1.GatewayClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayController}},
			{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}},
		},
		gateways: []gwv1.Gateway{
			gateway("infra", "web", "metalgate", ok...),
			gateway("infra", "pending", "metalgate", cond("Accepted", "True", "Accepted", ""),
				cond("Programmed", "False", "AddressNotAssigned", "Service metalgate-system/gw-x has no address: allocator: pool exhausted")),
			gateway("infra", "foreign", "other", cond("Programmed", "False", "Whatever", "not ours")),
			listenerBad, stale,
		},
		routes: []gwv1.HTTPRoute{
			route("fine", gatewayController, cond("Accepted", "True", "Accepted", ""), cond("ResolvedRefs", "True", "ResolvedRefs", "")),
			route("intruder", gatewayController, cond("Accepted", "False", "NotAllowedByListeners", "listener http admits routes of its own namespace only"),
				cond("ResolvedRefs", "True", "ResolvedRefs", "")),
			route("broken", gatewayController, cond("Accepted", "True", "Accepted", ""), cond("ResolvedRefs", "False", "BackendNotFound", "Service app/gone not found")),
			route("theirs", "example.com/other", cond("Accepted", "False", "Whatever", "not ours")),
		},
		grpc: []gwv1.GRPCRoute{
			grpcRoute("grpc-fine", gatewayController, cond("Accepted", "True", "Accepted", ""), cond("ResolvedRefs", "True", "ResolvedRefs", "")),
			grpcRoute("grpc-only-http", gatewayController, cond("Accepted", "False", "NotAllowedByListeners", "listener http admits HTTPRoutes only"),
				cond("ResolvedRefs", "True", "ResolvedRefs", "")),
			grpcRoute("grpc-cross", gatewayController, cond("Accepted", "True", "Accepted", ""),
				cond("ResolvedRefs", "False", "RefNotPermitted", "Service infra/api is in another namespace")),
			grpcRoute("grpc-theirs", "example.com/other", cond("Accepted", "False", "Whatever", "not ours")),
		},
	}
	want := []string{
		"error: Gateway infra/pending: not Programmed (AddressNotAssigned): Service metalgate-system/gw-x has no address: allocator: pool exhausted",
		"warning: Gateway infra/tls: listener https not ResolvedRefs (RefNotPermitted): Secret other/cert is in another namespace",
		"warning: Gateway infra/stale: Accepted not reported for its current generation yet",
		"warning: Gateway infra/stale: Programmed not reported for its current generation yet",
		"error: HTTPRoute app/intruder: not attached to Gateway infra/web (NotAllowedByListeners)",
		"error: HTTPRoute app/broken: backends do not resolve (BackendNotFound): Service app/gone not found",
		"error: GRPCRoute app/grpc-only-http: not attached to Gateway infra/web (NotAllowedByListeners): listener http admits HTTPRoutes only",
		"error: GRPCRoute app/grpc-cross: backends do not resolve (RefNotPermitted): Service infra/api is in another namespace",
	}
	got := gatewayFindings(s)
	if len(got) != len(want) {
		t.Fatalf("%d findings, want %d:\n%v", len(got), len(want), got)
	}
	for i, f := range got {
		if !strings.HasPrefix(f.String(), want[i]) || f.hint == "" {
			t.Errorf("finding %d = %q, want prefix %q and a hint", i, f, want[i])
		}
		if strings.Contains(f.String(), "GRPCRoute") && !strings.Contains(f.hint, "kubectl describe grpcroute -n app ") {
			t.Errorf("finding %d: hint %q, want kubectl describe grpcroute", i, f.hint)
		}
	}
	if fs := gatewayFindings(gatewayState{}); len(fs) != 0 {
		t.Errorf("no Gateway API: %v", fs)
	}
}
