package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// Options configure the controllers. The zero value is not usable: set Registerer's metrics.
type Options struct {
	// LBClass is the spec.loadBalancerClass served besides Services with none.
	// Defaults to DefaultLBClass.
	LBClass string
	// Metrics receive the controller's metrics. Required.
	Metrics *Metrics
	// Namespace holds the configuration objects (IPAddressPools, advertisements, peers), as
	// in MetalLB. Defaults to DefaultNamespace.
	Namespace string
	// ServiceWorkers is how many Services are reconciled at once. Defaults to
	// DefaultServiceWorkers. Any number is safe: an address is only published after its
	// IPAddressClaim was created (or joined) on the API server, and the allocator is shared
	// under its own lock.
	ServiceWorkers int
	// SkipNameValidation lets several managers run in one process (tests only).
	SkipNameValidation bool
}

// DefaultServiceWorkers is the default of Options.ServiceWorkers. Allocating one Service is
// three API round trips (claim, pool annotation, status); with one worker their latency, not
// the API server, bounds the rate (issue #15). Measured with make bench-alloc-api.
const DefaultServiceWorkers = 16

// DefaultLBClass is the loadBalancerClass metalgate serves unless told otherwise.
const DefaultLBClass = "metalgate.io/metalgate"

// DefaultNamespace is where metalgate is installed and reads its configuration from.
const DefaultNamespace = "metalgate-system"

// CacheOptions restrict the manager's cache to what the controllers need: configuration
// objects only from the configuration namespace (the controller's Role grants no more).
func CacheOptions(namespace string) cache.Options {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	ns := map[string]cache.Config{namespace: {}}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&v1alpha1.IPAddressPool{}:    {Namespaces: ns},
		&v1alpha1.L2Advertisement{}:  {Namespaces: ns},
		&v1alpha1.BGPAdvertisement{}: {Namespaces: ns},
		&v1alpha1.BGPPeer{}:          {Namespaces: ns},
		&v1alpha1.BFDProfile{}:       {Namespaces: ns},
		&v1alpha1.Community{}:        {Namespaces: ns},
	}}
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=metalgate-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=ipaddresspools,verbs=get;list;watch
// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=ipaddresspools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metalgate.io,resources=ipaddressclaims,verbs=get;list;watch;create;update;patch;delete

// Setup registers the Service and IPAddressPool reconcilers with mgr (they share one
// allocator), and the references reconcilers (refs_controller.go).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Metrics == nil {
		return fmt.Errorf("controllers: Options.Metrics is required")
	}
	if opts.LBClass == "" {
		opts.LBClass = DefaultLBClass
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.ServiceWorkers == 0 {
		opts.ServiceWorkers = DefaultServiceWorkers
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.IPAddressClaim{}, claimHolderIndex, claimHolderKeys); err != nil {
		return fmt.Errorf("index claims by holder: %w", err)
	}
	alloc := allocator.New()
	ps := &poolSync{client: mgr.GetClient(), alloc: alloc, namespace: opts.Namespace}
	poolEvents := make(chan event.GenericEvent, 1024)
	retryEvents := make(chan event.GenericEvent, 1024)
	recorder := mgr.GetEventRecorder("metalgate-controller")

	svcR := &ServiceReconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Alloc:       alloc,
		Recorder:    recorder,
		Metrics:     opts.Metrics,
		LBClass:     opts.LBClass,
		PoolChanged: poolEvents,
		Namespace:   opts.Namespace,
		pools:       ps,
		retry:       retryEvents,
	}
	c := mgr.GetClient()
	noPriorityQueue := false
	err := ctrl.NewControllerManagedBy(mgr).
		Named("service").
		For(&corev1.Service{}).
		// Several workers share one allocator (it locks) and one bootstrap (every worker waits
		// for it: learn before assign). Two workers never hold one Service, and an address
		// reaches a status only after its claim was won on the API server, so concurrency
		// changes which free address a Service gets, never whether two get the same one.
		//
		// The classic work queue, not controller-runtime's priority queue: in v0.23.3 the
		// priority queue can deadlock on shutdown when several workers wait on it
		// (kubernetes-sigs/controller-runtime#3538, fixed by #3540), and the manager then
		// never stops (seen here as TestRestartKeepsAssignments' 30 s grace period running out).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.ServiceWorkers, UsePriorityQueue: &noPriorityQueue,
			SkipNameValidation: &opts.SkipNameValidation}).
		// Only spec edits matter to allocation; the pool status this controller writes does not.
		Watches(&v1alpha1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []ctrl.Request { return loadBalancers(ctx, c, "") }),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Namespace labels feed serviceAllocation.namespaceSelectors.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []ctrl.Request { return loadBalancers(ctx, c, o.GetName()) }),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(claimHolders)).
		WatchesRawSource(source.Channel(retryEvents, &handler.EnqueueRequestForObject{})).
		Complete(svcR)
	if err != nil {
		return fmt.Errorf("set up Service controller: %w", err)
	}

	poolR := &PoolReconciler{Client: c, Alloc: alloc, Recorder: recorder, Metrics: opts.Metrics, pools: ps}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("ipaddresspool").
		WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
		// An edit of one pool can change another's overlap condition: look at them all.
		Watches(&v1alpha1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []ctrl.Request { return allPools(ctx, c, opts.Namespace) }),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(poolEvents, &handler.EnqueueRequestForObject{})).
		Complete(poolR)
	if err != nil {
		return fmt.Errorf("set up IPAddressPool controller: %w", err)
	}
	// The Valid condition of advertisements, peers, BFD profiles and communities.
	return setupRefs(mgr, opts.Namespace, &opts.SkipNameValidation)
}

// loadBalancers lists the LoadBalancer Services of a namespace ("" for all) as requests.
func loadBalancers(ctx context.Context, c client.Reader, namespace string) []ctrl.Request {
	var list corev1.ServiceList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []ctrl.Request
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return out
}

func allPools(ctx context.Context, c client.Reader, namespace string) []ctrl.Request {
	var list v1alpha1.IPAddressPoolList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return out
}

// claimHolders maps a claim to its holders, so a claim deleted or edited behind the
// controller's back is put right by the holder's reconcile.
func claimHolders(_ context.Context, o client.Object) []ctrl.Request {
	c, ok := o.(*v1alpha1.IPAddressClaim)
	if !ok {
		return nil
	}
	out := make([]ctrl.Request, 0, len(c.Spec.Holders))
	for _, h := range c.Spec.Holders {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: h.Namespace, Name: h.Name}})
	}
	return out
}
