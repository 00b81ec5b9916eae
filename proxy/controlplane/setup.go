package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// RBAC of the proxy. With --watch-namespace the namespaced rules can be a Role in each
// watched namespace (plus the proxy's own namespace for its Service, Pod and Lease);
// IngressClasses are cluster-scoped and always need a ClusterRole.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// The announcement on the proxy's own publish Service (announce.go); config/proxy grants it
// for the Service metalgate-proxy only.
// +kubebuilder:rbac:groups="",resources=services,resourceNames=metalgate-proxy,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// The affinity cookie key Secret (cmd/metalgate, --affinity-key-secret), in the proxy's own namespace:
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// The TLS session ticket keys the replicas share and rotate (cmd/metalgate,
// --tls-ticket-key-secret), in the proxy's own namespace; config/proxy grants it for the
// Secret metalgate-proxy-tls-tickets only:
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=metalgate-proxy-tls-tickets,verbs=get;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// ReferenceGrants open another namespace's Service to an Ingress's auth-url:
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// ControlPlane is the proxy's control plane. Create it with New before the manager (its
// cache options carry the watch-error hook), then call Setup.
type ControlPlane struct {
	opts      Options
	fresh     *Freshness
	snapshots chan ingress.Input
	builder   *builder
}

// New returns a control plane; opts.Swap is required.
func New(opts Options) (*ControlPlane, error) {
	if opts.Swap == nil {
		return nil, fmt.Errorf("controlplane: Options.Swap is required")
	}
	opts.defaults()
	if opts.Gateway.Name != "" && len(opts.WatchNamespaces) > 0 {
		return nil, fmt.Errorf("controlplane: Options.Gateway and WatchNamespaces exclude each other: a Gateway's routes come from any namespace its listeners allow")
	}
	kinds := make([]string, len(opts.kinds()))
	for i, w := range opts.kinds() {
		kinds[i] = w.kind
	}
	cp := &ControlPlane{opts: opts, fresh: NewFreshness(opts.StaleAfter, kinds...), snapshots: make(chan ingress.Input, 1)}
	if opts.Metrics != nil {
		opts.Metrics.freshness = cp.fresh
	}
	return cp, nil
}

// CacheOptions scope the manager's cache: the watched namespaces (plus the proxy's own for
// its Service), Secrets with their data only when of type TLS (certificates) or Opaque
// (htpasswd for basic auth), and managedFields stripped from everything but Ingresses (the
// status publisher reads them there).
func (cp *ControlPlane) CacheOptions() cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:        {Transform: secretTransform},
			&networkingv1.Ingress{}: {Transform: func(o any) (any, error) { return o, nil }},
		},
		DefaultWatchErrorHandler: func(_ context.Context, r *toolscache.Reflector, err error) {
			kind := kindOf(r.TypeDescription())
			cp.fresh.Failed(kind, err)
			if cp.opts.Metrics != nil {
				cp.opts.Metrics.WatchErrors.WithLabelValues(kind).Inc()
			}
			cp.opts.Logger.Info("watch failed; the data plane keeps serving the last table", "kind", kind, "error", err.Error())
		},
	}
	if cp.opts.Gateway.Name != "" {
		o.ByObject[&gatewayv1.Gateway{}] = cache.ByObject{Namespaces: map[string]cache.Config{cp.opts.Gateway.Namespace: {}}}
		o.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Transform: configMapTransform} // gatewayclientcert.go
	}
	if len(cp.opts.WatchNamespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range cp.opts.WatchNamespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
		for _, ns := range []string{cp.opts.PublishService.Namespace, cp.opts.PodNamespace, cp.opts.DefaultBackendService.Namespace} {
			if ns != "" {
				o.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}
	return o
}

// secretTransform keeps what the proxy reads of a Secret: the data of TLS and Opaque Secrets,
// and of any other only the name (Helm releases, tokens and the like can be large, and are
// never the proxy's business).
func secretTransform(o any) (any, error) {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return o, nil
	}
	s.ManagedFields = nil
	if s.Type != corev1.SecretTypeTLS && s.Type != corev1.SecretTypeOpaque && s.Type != "" {
		s.Data, s.StringData = nil, nil
	}
	return s, nil
}

// Setup adds the table builder and the API prober (every replica) and the status publisher
// (leader only) to the manager. A Gateway proxy first asks the API server whether it serves
// GRPCRoute and TLSRoute, and leaves a kind out when it does not (checkGRPCRoute).
func (cp *ControlPlane) Setup(mgr manager.Manager) error {
	if err := cp.opts.checkGRPCRoute(mgr.GetRESTMapper()); err != nil {
		return err
	}
	if cp.opts.noGRPCRoute {
		cp.fresh.Forget(KindGRPCRoute) // not watched: its age would only grow
	}
	if cp.opts.noReferenceGrant {
		cp.fresh.Forget(KindReferenceGrant)
	}
	if cp.opts.noTLSRoute {
		cp.fresh.Forget(KindTLSRoute)
	}
	if cp.opts.noListenerSet {
		cp.fresh.Forget(KindListenerSet)
	}
	if cp.opts.Recorder == nil {
		cp.opts.Recorder = mgr.GetEventRecorder("metalgate-proxy")
	}
	arb := &arbiter{opts: cp.opts, presence: newPresence(cp.opts.GoneAfter, timeNow), bad: map[string]bool{},
		self: &selfResolver{opts: cp.opts, reader: mgr.GetAPIReader()}}
	cp.builder = &builder{opts: cp.opts, cache: mgr.GetCache(), fresh: cp.fresh, kick: make(chan struct{}, 1),
		built: make(chan struct{}), snapshots: cp.snapshots, reported: map[types.NamespacedName]string{}, elected: mgr.Elected(), arb: arb}
	newPublisher := func(in chan ingress.Input) *publisher {
		return &publisher{opts: cp.opts, client: mgr.GetClient(), reader: mgr.GetAPIReader(), snapshots: in, arb: arb,
			kick: make(chan struct{}, 1), states: map[types.NamespacedName]*statusState{}, now: timeNow}
	}
	runs := []manager.Runnable{cp.builder, &prober{reader: mgr.GetAPIReader(), fresh: cp.fresh, opts: cp.opts}}
	switch {
	case cp.opts.Gateway.Name != "": // a Gateway proxy writes no Ingress status
	case cp.opts.StatusElection != nil:
		w, err := cp.statusWriter(newPublisher)
		if err != nil {
			return err
		}
		cp.builder.leads = w.Writing
		runs = append(runs, w)
	default:
		runs = append(runs, newPublisher(cp.snapshots))
	}
	for _, r := range runs {
		if err := mgr.Add(r); err != nil {
			return fmt.Errorf("add proxy control plane: %w", err)
		}
	}
	return nil
}

// statusWriter is the publisher under its own Lease (Options.StatusElection): a fresh
// publisher per term, fed the builder's snapshots.
func (cp *ControlPlane) statusWriter(newPublisher func(chan ingress.Input) *publisher) (*statusWriter, error) {
	e := *cp.opts.StatusElection
	if err := e.defaults(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, fmt.Errorf("controlplane: client of the status Lease: %w", err)
	}
	w := &statusWriter{election: e, leases: cs, source: cp.snapshots, log: cp.opts.Logger.WithName("status-writer"),
		// The publisher only reads in: the term's channel, which only the relay sends to.
		run: func(ctx context.Context, in chan ingress.Input) error { return newPublisher(in).Start(ctx) }}
	if cp.opts.Metrics != nil {
		w.gauge = cp.opts.Metrics.StatusWriter
	}
	return w, nil
}

// Ready returns nil once the first table is built and while no watch has been failing for
// longer than StaleAfter.
func (cp *ControlPlane) Ready() error {
	if cp.builder == nil {
		return fmt.Errorf("control plane not set up")
	}
	select {
	case <-cp.builder.built:
	default:
		return fmt.Errorf("first routing table not built yet")
	}
	return cp.fresh.Ready()
}
