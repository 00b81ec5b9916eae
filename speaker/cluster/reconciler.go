package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/config"
)

// Event reasons on Services, recorded by the node that takes an address over.
const (
	// ReasonAnnouncingL2: this node now answers ARP/NDP for the address (first owner).
	ReasonAnnouncingL2 = "AnnouncingL2"
	// ReasonL2OwnerChanged: this node took the address over from another node.
	ReasonL2OwnerChanged = "L2OwnerChanged"
)

// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=ipaddresspools;l2advertisements;bgppeers;bgpadvertisements;bfdprofiles;communities,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options configure the watcher.
type Options struct {
	// Namespace holds the config objects and the speaker Pods.
	Namespace string
	// SpeakerSelector selects the speaker Pods in Namespace.
	SpeakerSelector labels.Selector
	// Build options (LB class, memberlist port).
	Build config.Options
}

// CacheOptions restricts the manager's cache: config objects and speaker Pods only in
// opts.Namespace, speaker Pods only by label. Nothing cached keeps managedFields, and Services,
// EndpointSlices and Nodes keep only the fields the speaker reads (transform.go).
func CacheOptions(opts Options) cache.Options {
	ns := map[string]cache.Config{opts.Namespace: {}}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Service{}:            {Transform: trimService},
		&discoveryv1.EndpointSlice{}: {Transform: trimEndpointSlice},
		&corev1.Node{}:               {Transform: trimNode},
		&corev1.Pod{}:                {Namespaces: ns, Label: opts.SpeakerSelector},
		&v1alpha1.IPAddressPool{}:    {Namespaces: ns},
		&v1alpha1.L2Advertisement{}:  {Namespaces: ns},
		&v1alpha1.BGPPeer{}:          {Namespaces: ns},
		&v1alpha1.BGPAdvertisement{}: {Namespaces: ns},
		&v1alpha1.BFDProfile{}:       {Namespaces: ns},
		&v1alpha1.Community{}:        {Namespaces: ns},
	}}
}

// worldKey is the only request: every change rebuilds the whole World.
var worldKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "world"}}

// Reconciler rebuilds the World from the cache.
type Reconciler struct {
	Client client.Reader
	// Secrets reads the BGPPeer password Secrets, uncached (the speaker may only get Secrets,
	// not list or watch them; mgr.GetAPIReader()). Nil: passwordSecret is not resolved.
	Secrets client.Reader
	Speaker *speaker.Speaker
	// BGPStatus, if set, gets every World too: it writes this node's BGPPeer.status entries.
	BGPStatus *BGPStatus
	Opts      Options
}

var _ reconcile.Reconciler = &Reconciler{}

// Setup registers the reconciler with mgr.
func Setup(mgr ctrl.Manager, r *Reconciler) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{worldKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("speaker").
		Watches(&corev1.Service{}, one).
		Watches(&discoveryv1.EndpointSlice{}, one).
		Watches(&corev1.Node{}, one).
		Watches(&corev1.Pod{}, one).
		Watches(&v1alpha1.IPAddressPool{}, one).
		Watches(&v1alpha1.L2Advertisement{}, one).
		Watches(&v1alpha1.BGPPeer{}, one).
		Watches(&v1alpha1.BGPAdvertisement{}, one).
		Watches(&v1alpha1.BFDProfile{}, one).
		Watches(&v1alpha1.Community{}, one).
		Complete(r)
}

// Reconcile lists everything and hands the new World to the Speaker.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var (
		svcs  corev1.ServiceList
		eps   discoveryv1.EndpointSliceList
		nodes corev1.NodeList
		pods  corev1.PodList
		pools v1alpha1.IPAddressPoolList
		ads   v1alpha1.L2AdvertisementList
		peers v1alpha1.BGPPeerList
		bads  v1alpha1.BGPAdvertisementList
		bfds  v1alpha1.BFDProfileList
		comms v1alpha1.CommunityList
	)
	inNS := client.InNamespace(r.Opts.Namespace)
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&svcs, nil}, {&eps, nil}, {&nodes, nil},
		{&pods, []client.ListOption{inNS, client.MatchingLabelsSelector{Selector: r.Opts.SpeakerSelector}}},
		{&pools, []client.ListOption{inNS}}, {&ads, []client.ListOption{inNS}},
		{&peers, []client.ListOption{inNS}}, {&bads, []client.ListOption{inNS}},
		{&bfds, []client.ListOption{inNS}}, {&comms, []client.ListOption{inNS}},
	} {
		// No deep copy of the cache: config.Build and passwords only read the objects (Build
		// sorts clones of the lists; TestBuildDoesNotMutateSnapshot), and the World keeps only
		// values and maps it never writes. At 2,000 Services the copies were half of all
		// allocations of the speaker.
		if err := r.Client.List(ctx, l.list, append(l.opts, client.UnsafeDisableDeepCopy)...); err != nil {
			return reconcile.Result{}, fmt.Errorf("list %T: %w", l.list, err)
		}
	}
	pws, pwErrs := r.passwords(ctx, peers.Items)
	w, errs := config.Build(config.Snapshot{
		Services: svcs.Items, EndpointSlices: eps.Items, Nodes: nodes.Items, SpeakerPods: pods.Items,
		Pools: pools.Items, L2Advertisements: ads.Items,
		BGPPeers: peers.Items, BGPAdvertisements: bads.Items, BFDProfiles: bfds.Items, Communities: comms.Items,
		Passwords: pws, PasswordErrors: pwErrs,
	}, r.Opts.Build)
	for _, err := range errs {
		log.FromContext(ctx).Info("ignoring invalid configuration", "error", err.Error())
	}
	r.Speaker.SetWorld(w)
	if r.BGPStatus != nil {
		r.BGPStatus.SetWorld(w)
	}
	if r.Secrets != nil {
		// Secrets are not watched: pick up a created Secret within seconds and a changed
		// password within a minute.
		if len(pwErrs) > 0 {
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
		for _, p := range peers.Items {
			if p.Spec.PasswordSecret.Name != "" {
				return reconcile.Result{RequeueAfter: time.Minute}, nil
			}
		}
	}
	return reconcile.Result{}, nil
}

// passwords reads the "password" key of the Secrets named by the peers' passwordSecret. A
// Secret that cannot be read, or has no such key, goes to the errors; config.Build then reports
// the peer with it.
func (r *Reconciler) passwords(ctx context.Context, peers []v1alpha1.BGPPeer) (map[string]string, map[string]error) {
	out, bad := map[string]string{}, map[string]error{}
	if r.Secrets == nil {
		return out, bad
	}
	for _, p := range peers {
		name := p.Spec.PasswordSecret.Name
		if name == "" {
			continue
		}
		if _, done := out[name]; done {
			continue
		}
		if _, done := bad[name]; done {
			continue
		}
		var sec corev1.Secret
		err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: r.Opts.Namespace, Name: name}, &sec)
		switch {
		case apierrors.IsNotFound(err):
			bad[name] = fmt.Errorf("no Secret %q in namespace %s", name, r.Opts.Namespace)
		case err != nil:
			bad[name] = fmt.Errorf("read Secret %q: %w", name, err)
		default:
			pw, ok := sec.Data["password"]
			if !ok {
				bad[name] = fmt.Errorf("no key \"password\" in Secret %q", name)
				continue
			}
			out[name] = string(pw)
		}
	}
	return out, bad
}

// TakeoverEventsOptions configure TakeoverEvents.
type TakeoverEventsOptions struct {
	// Client reads the Service (the manager's cached client).
	Client client.Reader
	// Recorder records the Events.
	Recorder events.EventRecorder
	// Node is this node's name, named in every Event.
	Node string
	// Burst is how many Events may be recorded at once; 0 means 100.
	Burst int
	// PerSecond is how many Events per second refill the burst; 0 means 1.
	PerSecond float64
	// Logger reports Events not recorded; defaults to logr.Discard().
	Logger logr.Logger
	// Registerer receives metalgate_speaker_takeover_events_dropped_total; nil registers
	// nothing.
	Registerer prometheus.Registerer
}

// TakeoverEvents returns a speaker.Options.OnTakeover that records an Event on the Service:
// AnnouncingL2 for a first owner, L2OwnerChanged when taken from another node.
//
// At most Burst Events, refilled at PerSecond, are recorded: a speaker starting with 10,000
// addresses would otherwise queue 10,000 Events behind its client's rate limit and keep every
// recorded one in the event broadcaster's cache for minutes (27 MiB measured). The others are
// counted (metalgate_speaker_takeover_events_dropped_total) and logged at most every 10
// seconds; metalgate_speaker_announced and /debug/announcements still show every owned address.
func TakeoverEvents(opts TakeoverEventsOptions) (func(speaker.Takeover), error) {
	if opts.Burst == 0 {
		opts.Burst = 100
	}
	if opts.PerSecond == 0 {
		opts.PerSecond = 1
	}
	if opts.Burst < 0 || opts.PerSecond < 0 {
		return nil, fmt.Errorf("takeover events: burst %d and per-second %g must not be negative", opts.Burst, opts.PerSecond)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metalgate_speaker_takeover_events_dropped_total",
		Help: "Takeover Events (AnnouncingL2, L2OwnerChanged) not recorded because more than the allowed rate were due.",
	})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(dropped); err != nil {
			return nil, fmt.Errorf("register takeover event metrics: %w", err)
		}
	}
	limit := rate.NewLimiter(rate.Limit(opts.PerSecond), opts.Burst)
	var (
		mu         sync.Mutex
		unreported int
		lastLog    time.Time
	)
	drop := func(t speaker.Takeover) {
		dropped.Inc()
		mu.Lock()
		defer mu.Unlock()
		unreported++
		if time.Since(lastLog) < 10*time.Second {
			return
		}
		opts.Logger.Info("takeover Events not recorded: more than the allowed rate", "dropped", unreported,
			"burst", opts.Burst, "perSecond", opts.PerSecond, "lastService", t.VIP.Service)
		unreported, lastLog = 0, time.Now()
	}
	return func(t speaker.Takeover) {
		ns, name, ok := strings.Cut(t.VIP.Service, "/")
		if !ok {
			return
		}
		if !limit.Allow() {
			drop(t)
			return
		}
		var svc corev1.Service
		if err := opts.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
			return // gone meanwhile: nobody to tell
		}
		where := strings.Join(t.Where, ",")
		if t.Previous == "" {
			opts.Recorder.Eventf(&svc, nil, corev1.EventTypeNormal, ReasonAnnouncingL2, "Announce",
				"node %s announces %s on %s", opts.Node, t.VIP.VIP, where)
			return
		}
		opts.Recorder.Eventf(&svc, nil, corev1.EventTypeNormal, ReasonL2OwnerChanged, "Announce",
			"node %s took %s over from %s, announcing on %s", opts.Node, t.VIP.VIP, t.Previous, where)
	}, nil
}
