package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// opts.Namespace, speaker Pods only by label.
func CacheOptions(opts Options) cache.Options {
	ns := map[string]cache.Config{opts.Namespace: {}}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
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
		if err := r.Client.List(ctx, l.list, l.opts...); err != nil {
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

// TakeoverEvents returns a speaker.Options.OnTakeover that records an Event on the Service:
// AnnouncingL2 for a first owner, L2OwnerChanged when taken from another node.
func TakeoverEvents(c client.Reader, rec events.EventRecorder, node string) func(speaker.Takeover) {
	return func(t speaker.Takeover) {
		ns, name, ok := strings.Cut(t.VIP.Service, "/")
		if !ok {
			return
		}
		var svc corev1.Service
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
			return // gone meanwhile: nobody to tell
		}
		where := strings.Join(t.Where, ",")
		if t.Previous == "" {
			rec.Eventf(&svc, nil, corev1.EventTypeNormal, ReasonAnnouncingL2, "Announce",
				"node %s announces %s on %s", node, t.VIP.VIP, where)
			return
		}
		rec.Eventf(&svc, nil, corev1.EventTypeNormal, ReasonL2OwnerChanged, "Announce",
			"node %s took %s over from %s, announcing on %s", node, t.VIP.VIP, t.Previous, where)
	}
}
