package gateway

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// ControllerName is the spec.controllerName of the GatewayClasses metalgate serves, and of the
// route parent statuses the translator computes (gatewayapi.ControllerName).
const ControllerName = gatewayapi.ControllerName

// Options configure the Gateway controllers. The zero value works.
type Options struct {
	// Namespace is where the Gateways' Services are made. Defaults to
	// controllers.DefaultNamespace.
	Namespace string
	// Proxy describes the proxy Deployment made per Gateway; with no Proxy.Image (the
	// default) none is made.
	Proxy ProxyOptions
	// SkipNameValidation lets several managers run in one process (tests only).
	SkipNameValidation bool
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses;gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses/status;gateways/status,verbs=get;update;patch
// Route status (routes.go): what the Gateways' proxies read, and the routes' status.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;tlsroutes;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes/status;grpcroutes/status;tlsroutes/status,verbs=get;update;patch
// ListenerSets (listenerset.go): their listeners merged into their Gateway's, their status.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=listenersets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// The Secrets HTTPS listeners name, read one by one to report ResolvedRefs (never listed):
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=services,verbs=create;delete
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=events,verbs=list
// +kubebuilder:rbac:groups=apps,namespace=metalgate-system,resources=deployments,verbs=get;list;watch;create;update;delete
// The controller's own Pod, for the image its Gateway proxies run (--gateway-proxy-image=self):
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=pods,verbs=get

// Setup registers the GatewayClass and Gateway reconcilers with mgr, whose scheme must know
// gateway.networking.k8s.io/v1. When the API server does not serve Gateway API (the CRDs of
// GatewayClass, Gateway, HTTPRoute or ReferenceGrant are not installed), it registers
// nothing, says so in the log, and returns nil: the rest of the controller runs as before.
// When only GRPCRoute is missing (an install of Gateway API before v1.1, whose standard
// channel lacked it), it says so and serves HTTPRoutes alone: GRPCRoutes are neither
// watched nor listed, so nothing waits for a kind the API server lacks; a GRPCRoute CRD
// installed later is served after a restart (of the controller, and of the Gateway proxies,
// which decide the same way: proxy/controlplane). TLSRoute (standard channel since v1.5) is
// treated the same way: without its CRD, TLS Passthrough listeners take no routes. Like every reconciler of the manager, both
// run on the leader only, so only the leader writes status.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (enabled bool, err error) {
	if opts.Namespace == "" {
		opts.Namespace = controllers.DefaultNamespace
	}
	log := ctrl.LoggerFrom(ctx).WithName("gateway")
	for _, kind := range []struct{ kind, version string }{
		{"GatewayClass", gwv1.GroupVersion.Version}, {"Gateway", gwv1.GroupVersion.Version},
		{"HTTPRoute", gwv1.GroupVersion.Version}, {"ReferenceGrant", gwv1beta1.GroupVersion.Version},
	} {
		ok, err := served(mgr.GetRESTMapper(), kind.kind, kind.version)
		if err != nil {
			return false, err
		}
		if !ok {
			log.Info("Gateway API is not installed: Gateway controller disabled", "missing", kind.kind+"/"+kind.version)
			return false, nil
		}
	}
	grpc, err := served(mgr.GetRESTMapper(), "GRPCRoute", gwv1.GroupVersion.Version)
	if err != nil {
		return false, err
	}
	if !grpc {
		log.Info("GRPCRoute is not installed: Gateways serve HTTPRoutes only", "missing", "GRPCRoute/"+gwv1.GroupVersion.Version)
	}
	tlsr, err := served(mgr.GetRESTMapper(), "TLSRoute", gwv1.GroupVersion.Version)
	if err != nil {
		return false, err
	}
	if !tlsr {
		log.Info("TLSRoute is not installed: TLS Passthrough listeners take no routes", "missing", "TLSRoute/"+gwv1.GroupVersion.Version)
	}
	lsets, err := served(mgr.GetRESTMapper(), "ListenerSet", gwv1.GroupVersion.Version)
	if err != nil {
		return false, err
	}
	if !lsets {
		log.Info("ListenerSet is not installed: Gateways take no listeners from ListenerSets", "missing", "ListenerSet/"+gwv1.GroupVersion.Version)
	}
	btls, err := served(mgr.GetRESTMapper(), "BackendTLSPolicy", gwv1.GroupVersion.Version)
	if err != nil {
		return false, err
	}
	if !btls {
		log.Info("BackendTLSPolicy v1 is not installed: backend TLS policies are ignored", "missing", "BackendTLSPolicy/"+gwv1.GroupVersion.Version)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &gwv1.HTTPRoute{}, indexBackend, routeBackends); err != nil {
		return false, fmt.Errorf("index HTTPRoutes by backend: %w", err)
	}
	if grpc {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &gwv1.GRPCRoute{}, indexBackend, routeBackends); err != nil {
			return false, fmt.Errorf("index GRPCRoutes by backend: %w", err)
		}
	}
	if tlsr {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &gwv1.TLSRoute{}, indexBackend, routeBackends); err != nil {
			return false, fmt.Errorf("index TLSRoutes by backend: %w", err)
		}
	}
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).
		Named("gatewayclass").
		WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
		For(&gwv1.GatewayClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(&ClassReconciler{Client: c})
	if err != nil {
		return false, fmt.Errorf("set up GatewayClass controller: %w", err)
	}
	r := &Reconciler{Client: c, APIReader: mgr.GetAPIReader(), Namespace: opts.Namespace, Proxy: opts.Proxy, GRPCRoutes: grpc, TLSRoutes: tlsr, ListenerSets: lsets, BackendTLSPolicies: btls}
	b := ctrl.NewControllerManagedBy(mgr)
	routeParents := routeParentsOf(c, lsets)
	if lsets {
		// A ListenerSet made, changed or deleted: its Gateway (the old one's too, on a change
		// of parentRef: the handler maps both objects of an update). Not its status.
		b = b.Watches(&gwv1.ListenerSet{}, handler.EnqueueRequestsFromMapFunc(listenerSetGateway),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if opts.Proxy.Image != "" {
		// Deployments only from metalgate's namespace: a cache of its own, so the manager's
		// cache (and the controller's RBAC) need not cover Deployments everywhere.
		dc, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}})
		if err != nil {
			return false, fmt.Errorf("create Deployment cache: %w", err)
		}
		if err := mgr.Add(dc); err != nil {
			return false, fmt.Errorf("add Deployment cache: %w", err)
		}
		r.Deployments = dc
		b = b.WatchesRawSource(source.Kind(dc, client.Object(&appsv1.Deployment{}), handler.EnqueueRequestsFromMapFunc(serviceGateway),
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetAnnotations()[contract.AnnotationGateway] != "" })))
	}
	if grpc {
		b = b.Watches(&gwv1.GRPCRoute{}, handler.EnqueueRequestsFromMapFunc(routeParents))
	}
	if tlsr {
		b = b.Watches(&gwv1.TLSRoute{}, handler.EnqueueRequestsFromMapFunc(routeParents))
	}
	if btls {
		b = watchBackendTLS(b, c, routeParents, grpc)
	}
	err = b.
		Named("gateway").
		WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
		// Spec edits, and annotation edits (the pool is chosen by annotation); not status.
		For(&gwv1.Gateway{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A class accepted (or changed hands) changes which of its Gateways are ours.
		Watches(&gwv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []ctrl.Request { return gatewaysOfClass(ctx, c, o.GetName()) })).
		// The Services made for Gateways: a VIP assigned, and Services whose Gateway is gone;
		// and a backend Service made or deleted changes its routes' ResolvedRefs.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			if o.GetNamespace() == opts.Namespace && o.GetAnnotations()[contract.AnnotationGateway] != "" {
				return serviceGateway(ctx, o)
			}
			return gatewaysOfBackend(ctx, c, routeParents, grpc, tlsr, o)
		}), builder.WithPredicates(serviceEvents(opts.Namespace))).
		// Routes: the Gateways they name, and those whose status they hold.
		Watches(&gwv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(routeParents)).
		// Grants and namespace labels decide which routes attach: every Gateway.
		Watches(&gwv1beta1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []ctrl.Request { return allGateways(ctx, c) })).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []ctrl.Request { return allGateways(ctx, c) }),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
	if err != nil {
		return false, fmt.Errorf("set up Gateway controller: %w", err)
	}
	return true, nil
}

// indexBackend indexes HTTPRoutes and GRPCRoutes by the Services their backendRefs and
// RequestMirror filters name, "namespace/name".
const indexBackend = "metalgate.io/route-backend"

// routeBackends are the Services an HTTPRoute's or GRPCRoute's rules name as backendRefs or
// in RequestMirror filters (a mirror's Service counts as a backend: its absence is a
// ResolvedRefs), each once, as "namespace/name".
func routeBackends(o client.Object) []string {
	var out []string
	add := func(ref gwv1.BackendObjectReference) {
		if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service" {
			return
		}
		ns := o.GetNamespace()
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if k := ns + "/" + string(ref.Name); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	mirror := func(m *gwv1.HTTPRequestMirrorFilter) {
		if m != nil {
			add(m.BackendRef)
		}
	}
	switch rt := o.(type) {
	case *gwv1.HTTPRoute:
		for _, rule := range rt.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
			for _, f := range rule.Filters {
				if f.Type == gwv1.HTTPRouteFilterRequestMirror {
					mirror(f.RequestMirror)
				}
			}
		}
	case *gwv1.TLSRoute:
		for _, rule := range rt.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
		}
	case *gwv1.GRPCRoute:
		for _, rule := range rt.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
			for _, f := range rule.Filters {
				if f.Type == gwv1.GRPCRouteFilterRequestMirror { // refused by ingress.Build today (UnsupportedValue)
					mirror(f.RequestMirror)
				}
			}
		}
	}
	return out
}

// serviceEvents lets through the events of the Services made for Gateways (in namespace),
// and the creation and deletion of any other Service (a backend appearing or going).
func serviceEvents(namespace string) predicate.Funcs {
	made := func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetAnnotations()[contract.AnnotationGateway] != ""
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(e event.UpdateEvent) bool { return made(e.ObjectNew) },
		GenericFunc: func(e event.GenericEvent) bool { return made(e.Object) },
	}
}

// routeParentsOf maps a route to the Gateways it concerns: routeGateways, and when lsets
// (ListenerSets are served) also the Gateways of the ListenerSets it names — a route may
// name only ListenerSets.
func routeParentsOf(c client.Reader, lsets bool) handler.MapFunc {
	if !lsets {
		return routeGateways
	}
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		return appendNew(routeGateways(ctx, o), routeListenerSetGateways(ctx, c, o)...)
	}
}

// gatewaysOfBackend are the Gateways, by parents, of the routes (HTTPRoutes, GRPCRoutes when
// grpc, TLSRoutes when tlsr) whose backendRefs name Service o.
func gatewaysOfBackend(ctx context.Context, c client.Reader, parents handler.MapFunc, grpc, tlsr bool, o client.Object) []ctrl.Request {
	key := client.MatchingFields{indexBackend: o.GetNamespace() + "/" + o.GetName()}
	var out []ctrl.Request
	var hrs gwv1.HTTPRouteList
	if err := c.List(ctx, &hrs, key); err == nil {
		for i := range hrs.Items {
			out = appendNew(out, parents(ctx, &hrs.Items[i])...)
		}
	}
	var grs gwv1.GRPCRouteList
	if grpc && c.List(ctx, &grs, key) == nil {
		for i := range grs.Items {
			out = appendNew(out, parents(ctx, &grs.Items[i])...)
		}
	}
	var trs gwv1.TLSRouteList
	if tlsr && c.List(ctx, &trs, key) == nil {
		for i := range trs.Items {
			out = appendNew(out, parents(ctx, &trs.Items[i])...)
		}
	}
	return out
}

// appendNew appends the requests of add that reqs does not hold yet.
func appendNew(reqs []ctrl.Request, add ...ctrl.Request) []ctrl.Request {
	for _, r := range add {
		if !slices.Contains(reqs, r) {
			reqs = append(reqs, r)
		}
	}
	return reqs
}

// routeGateways are the Gateways an HTTPRoute or GRPCRoute names in its parentRefs, and
// those metalgate holds a parent status for (a parentRef removed: that status must go).
func routeGateways(_ context.Context, o client.Object) []ctrl.Request {
	p, ok := partsOf(o)
	if !ok {
		return nil
	}
	var out []ctrl.Request
	add := func(ref gwv1.ParentReference) {
		if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
			return
		}
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: string(ref.Name)}
		if ref.Namespace != nil {
			key.Namespace = string(*ref.Namespace)
		}
		out = appendNew(out, ctrl.Request{NamespacedName: key})
	}
	for _, ref := range p.spec.ParentRefs {
		add(ref)
	}
	for _, ps := range p.status.Parents {
		if ps.ControllerName == ControllerName {
			add(ps.ParentRef)
		}
	}
	return out
}

// allGateways is every Gateway (the reconciler leaves other controllers' alone).
func allGateways(ctx context.Context, c client.Reader) []ctrl.Request {
	var list gwv1.GatewayList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]ctrl.Request, len(list.Items))
	for i, g := range list.Items {
		out[i] = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}}
	}
	return out
}

func gatewaysOfClass(ctx context.Context, c client.Reader, class string) []ctrl.Request {
	var list gwv1.GatewayList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	var out []ctrl.Request
	for _, g := range list.Items {
		if string(g.Spec.GatewayClassName) == class {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
		}
	}
	return out
}

// serviceGateway maps a Service or Deployment made for a Gateway to that Gateway, by its
// annotation.
func serviceGateway(_ context.Context, o client.Object) []ctrl.Request {
	ns, name, ok := splitKey(o.GetAnnotations()[contract.AnnotationGateway])
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func splitKey(s string) (namespace, name string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

// served says whether the API server serves kind of gateway.networking.k8s.io at version;
// an error is a failed lookup, not an absent kind.
func served(m meta.RESTMapper, kind, version string) (bool, error) {
	_, err := m.RESTMapping(schema.GroupKind{Group: gwv1.GroupName, Kind: kind}, version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up %s/%s in the API server: %w", kind, version, err)
	}
	return true, nil
}
