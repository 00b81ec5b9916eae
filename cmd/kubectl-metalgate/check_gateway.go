package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayController is the controllerName of metalgate's GatewayClasses
// (controllers/gateway.ControllerName; the plugin does not import the controller).
const gatewayController gwv1.GatewayController = "metalgate.io/gateway-controller"

// gatewayState is what check reads of Gateway API: nothing when its CRDs are not installed.
type gatewayState struct {
	classes  []gwv1.GatewayClass
	gateways []gwv1.Gateway
	routes   []gwv1.HTTPRoute
	grpc     []gwv1.GRPCRoute
}

// readGatewayState lists GatewayClasses, Gateways, HTTPRoutes and GRPCRoutes; a cluster
// without the Gateway API CRDs has none, and one without only GRPCRoute's (Gateway API before
// v1.1) no GRPCRoutes, which is not an error.
func readGatewayState(ctx context.Context, c client.Reader) (gatewayState, error) {
	var s gatewayState
	var classes gwv1.GatewayClassList
	if err := c.List(ctx, &classes); err != nil {
		if meta.IsNoMatchError(err) {
			return s, nil
		}
		return s, fmt.Errorf("list GatewayClasses: %w", err)
	}
	var gws gwv1.GatewayList
	if err := c.List(ctx, &gws); err != nil {
		return s, fmt.Errorf("list Gateways: %w", err)
	}
	var routes gwv1.HTTPRouteList
	if err := c.List(ctx, &routes); err != nil {
		return s, fmt.Errorf("list HTTPRoutes: %w", err)
	}
	var grpc gwv1.GRPCRouteList
	if err := c.List(ctx, &grpc); err != nil && !meta.IsNoMatchError(err) {
		return s, fmt.Errorf("list GRPCRoutes: %w", err)
	}
	s.classes, s.gateways, s.routes, s.grpc = classes.Items, gws.Items, routes.Items, grpc.Items
	return s, nil
}

// gatewayFindings: metalgate's Gateways that are not accepted or not programmed (no address,
// no proxy) and their listeners that are not, and HTTPRoutes and GRPCRoutes metalgate did not
// attach to one of its Gateways or whose backends do not resolve — each with the controller's
// own reason.
func gatewayFindings(s gatewayState) []finding {
	ours := map[string]bool{}
	for _, c := range s.classes {
		if c.Spec.ControllerName == gatewayController {
			ours[c.Name] = true
		}
	}
	var out []finding
	for _, g := range s.gateways {
		if !ours[string(g.Spec.GatewayClassName)] {
			continue
		}
		obj := "Gateway " + g.Namespace + "/" + g.Name
		hint := fmt.Sprintf("kubectl describe gateway -n %s %s", g.Namespace, g.Name)
		for _, typ := range []string{string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayConditionProgrammed)} {
			switch c := meta.FindStatusCondition(g.Status.Conditions, typ); {
			case c == nil || c.ObservedGeneration != g.Generation:
				out = append(out, finding{severityWarning, obj, typ + " not reported for its current generation yet",
					"is metalgate controller running? kubectl -n metalgate-system logs deploy/metalgate-controller"})
			case c.Status != metav1.ConditionTrue:
				out = append(out, finding{severityError, obj, fmt.Sprintf("not %s (%s): %s", typ, c.Reason, c.Message), hint})
			}
		}
		for _, l := range g.Status.Listeners {
			for _, typ := range []string{string(gwv1.ListenerConditionAccepted), string(gwv1.ListenerConditionResolvedRefs)} {
				if c := meta.FindStatusCondition(l.Conditions, typ); c != nil && c.Status != metav1.ConditionTrue {
					out = append(out, finding{severityWarning, obj, fmt.Sprintf("listener %s not %s (%s): %s", l.Name, typ, c.Reason, c.Message), hint})
				}
			}
		}
	}
	type route struct {
		kind    string
		meta    metav1.ObjectMeta
		parents []gwv1.RouteParentStatus
	}
	var routes []route
	for _, r := range s.routes {
		routes = append(routes, route{"HTTPRoute", r.ObjectMeta, r.Status.Parents})
	}
	for _, r := range s.grpc {
		routes = append(routes, route{"GRPCRoute", r.ObjectMeta, r.Status.Parents})
	}
	for _, r := range routes {
		obj := r.kind + " " + r.meta.Namespace + "/" + r.meta.Name
		hint := fmt.Sprintf("kubectl describe %s -n %s %s", strings.ToLower(r.kind), r.meta.Namespace, r.meta.Name)
		for _, p := range r.parents {
			if p.ControllerName != gatewayController {
				continue
			}
			parent := string(p.ParentRef.Name)
			if p.ParentRef.Namespace != nil {
				parent = string(*p.ParentRef.Namespace) + "/" + parent
			}
			if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); c != nil && c.Status != metav1.ConditionTrue {
				out = append(out, finding{severityError, obj, fmt.Sprintf("not attached to Gateway %s (%s): %s", parent, c.Reason, c.Message), hint})
			}
			if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs)); c != nil && c.Status != metav1.ConditionTrue {
				out = append(out, finding{severityError, obj, fmt.Sprintf("backends do not resolve (%s): %s; those requests get 500", c.Reason, c.Message), hint})
			}
		}
	}
	return out
}
