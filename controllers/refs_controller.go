package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/refcheck"
)

// RefsFieldOwner is the field manager of the Valid condition: the controller applies it
// (server-side apply on the status subresource) and owns only that entry of
// status.conditions, plus status.observedGeneration where the kind has one. The speakers own
// BGPPeer.status.nodes with their own managers, so neither side can erase the other's fields
// and no write needs a resourceVersion.
const RefsFieldOwner = "metalgate-controller-refs"

// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=l2advertisements;bgpadvertisements;bgppeers;bfdprofiles;communities,verbs=get;list;watch
// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=l2advertisements/status;bgpadvertisements/status;bgppeers/status;bfdprofiles/status;communities/status,verbs=get;patch

// refsKind is what the references reconciler needs of one kind: a new object, the check, and
// where its status keeps the conditions and the observed generation.
type refsKind[T client.Object] struct {
	kind  string
	new   func() T
	check func(T, refcheck.Snapshot) []refcheck.Problem
	// conditions returns the object's status.conditions.
	conditions func(T) []metav1.Condition
	// observed returns status.observedGeneration; nil for a kind without one (BGPPeer, whose
	// status is otherwise the speakers').
	observed func(T) int64
}

// RefsReconciler writes the Valid condition of one kind of configuration object
// (L2Advertisement, BGPAdvertisement, BGPPeer, BFDProfile, Community): whether its references
// resolve, as internal/refcheck decides from the cached objects of the configuration
// namespace. It writes only when the condition or the observed generation differ from what
// the object shows, so a reconcile with nothing new costs no API call.
type RefsReconciler[T client.Object] struct {
	Client client.Client
	k      refsKind[T]
}

var _ reconcile.Reconciler = &RefsReconciler[*v1alpha1.L2Advertisement]{}

// Reconcile checks one object and applies its Valid condition when it changed.
func (r *RefsReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.k.new()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", r.k.kind, err)
	}
	snap, err := r.snapshot(ctx, obj.GetNamespace())
	if err != nil {
		return ctrl.Result{}, err
	}
	cond, write := desiredValid(r.k.conditions(obj), r.observed(obj), r.k.check(obj, snap), obj.GetGeneration())
	if !write {
		return ctrl.Result{}, nil
	}
	if err := r.apply(ctx, obj, cond); err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx)
	log.V(1).Info("Wrote Valid condition", "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	return ctrl.Result{}, nil
}

// observed is the object's status.observedGeneration, or -1 for a kind without one.
func (r *RefsReconciler[T]) observed(obj T) int64 {
	if r.k.observed == nil {
		return -1
	}
	return r.k.observed(obj)
}

// desiredValid is the Valid condition an object of generation with these problems should
// show, given its current conditions and observed generation (-1: the kind has none), and
// whether it differs from what the object shows. The transition time is kept while the
// status stays the same.
func desiredValid(current []metav1.Condition, observed int64, problems []refcheck.Problem, generation int64) (metav1.Condition, bool) {
	want := refcheck.Condition(problems, generation)
	have := meta.FindStatusCondition(current, v1alpha1.ConditionValid)
	if have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message &&
		have.ObservedGeneration == want.ObservedGeneration && (observed < 0 || observed == generation) {
		return *have, false
	}
	conds := append([]metav1.Condition(nil), current...)
	meta.SetStatusCondition(&conds, want)
	return *meta.FindStatusCondition(conds, v1alpha1.ConditionValid), true
}

// snapshot lists the objects references point to, from the cache.
func (r *RefsReconciler[T]) snapshot(ctx context.Context, namespace string) (refcheck.Snapshot, error) {
	var (
		s     refcheck.Snapshot
		pools v1alpha1.IPAddressPoolList
		peers v1alpha1.BGPPeerList
		bfds  v1alpha1.BFDProfileList
		comms v1alpha1.CommunityList
	)
	for _, l := range []client.ObjectList{&pools, &peers, &bfds, &comms} {
		if err := r.Client.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return s, fmt.Errorf("list %T: %w", l, err)
		}
	}
	s.Pools, s.BGPPeers, s.BFDProfiles, s.Communities = pools.Items, peers.Items, bfds.Items, comms.Items
	return s, nil
}

// apply writes cond (and status.observedGeneration, for kinds that have it) by server-side
// apply on the status subresource, as RefsFieldOwner.
func (r *RefsReconciler[T]) apply(ctx context.Context, obj T, cond metav1.Condition) error {
	raw, err := json.Marshal(cond)
	if err != nil {
		return fmt.Errorf("encode condition: %w", err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("encode condition: %w", err)
	}
	status := map[string]any{"conditions": []any{c}}
	if r.k.observed != nil {
		status["observedGeneration"] = obj.GetGeneration()
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       r.k.kind,
		"metadata":   map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		"status":     status,
	}}
	err = r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(RefsFieldOwner), client.ForceOwnership)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("apply status of %s %s: %w", r.k.kind, obj.GetName(), err)
	}
	return nil
}

// setupRefs registers one references reconciler per kind. Each watches its own kind and the
// kinds its references point to, by name only: an IPAddressPool or BGPPeer being created or
// deleted, a Community or BFDProfile created, deleted or edited. Secrets are not watched
// (that would take list and watch on Secrets): BGPPeer.spec.passwordSecret is checked by the
// speakers, which report it in status.nodes.
func setupRefs(mgr ctrl.Manager, namespace string, skipNameValidation *bool) error {
	c := mgr.GetClient()
	createDelete := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	specChanged := predicate.GenerationChangedPredicate{}
	all := func(list func() client.ObjectList) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []ctrl.Request {
			return listRequests(ctx, c, namespace, list())
		})
	}
	l2s := func() client.ObjectList { return &v1alpha1.L2AdvertisementList{} }
	bgps := func() client.ObjectList { return &v1alpha1.BGPAdvertisementList{} }
	peers := func() client.ObjectList { return &v1alpha1.BGPPeerList{} }
	comms := func() client.ObjectList { return &v1alpha1.CommunityList{} }
	opts := controller.Options{SkipNameValidation: skipNameValidation}

	err := refsController(mgr, opts, "l2advertisement-refs", namespace, refsKind[*v1alpha1.L2Advertisement]{
		kind: "L2Advertisement", new: func() *v1alpha1.L2Advertisement { return &v1alpha1.L2Advertisement{} },
		check:      refcheck.L2Advertisement,
		conditions: func(o *v1alpha1.L2Advertisement) []metav1.Condition { return o.Status.Conditions },
		observed:   func(o *v1alpha1.L2Advertisement) int64 { return o.Status.ObservedGeneration },
	}, func(b *builder.Builder) *builder.Builder {
		return b.Watches(&v1alpha1.IPAddressPool{}, all(l2s), builder.WithPredicates(createDelete))
	})
	if err != nil {
		return err
	}
	err = refsController(mgr, opts, "bgpadvertisement-refs", namespace, refsKind[*v1alpha1.BGPAdvertisement]{
		kind: "BGPAdvertisement", new: func() *v1alpha1.BGPAdvertisement { return &v1alpha1.BGPAdvertisement{} },
		check:      refcheck.BGPAdvertisement,
		conditions: func(o *v1alpha1.BGPAdvertisement) []metav1.Condition { return o.Status.Conditions },
		observed:   func(o *v1alpha1.BGPAdvertisement) int64 { return o.Status.ObservedGeneration },
	}, func(b *builder.Builder) *builder.Builder {
		return b.Watches(&v1alpha1.IPAddressPool{}, all(bgps), builder.WithPredicates(createDelete)).
			Watches(&v1alpha1.BGPPeer{}, all(bgps), builder.WithPredicates(createDelete)).
			Watches(&v1alpha1.Community{}, all(bgps), builder.WithPredicates(specChanged))
	})
	if err != nil {
		return err
	}
	err = refsController(mgr, opts, "bgppeer-refs", namespace, refsKind[*v1alpha1.BGPPeer]{
		kind: "BGPPeer", new: func() *v1alpha1.BGPPeer { return &v1alpha1.BGPPeer{} },
		check:      refcheck.BGPPeer,
		conditions: func(o *v1alpha1.BGPPeer) []metav1.Condition { return o.Status.Conditions },
	}, func(b *builder.Builder) *builder.Builder {
		return b.Watches(&v1alpha1.BFDProfile{}, all(peers), builder.WithPredicates(specChanged))
	})
	if err != nil {
		return err
	}
	err = refsController(mgr, opts, "bfdprofile-refs", namespace, refsKind[*v1alpha1.BFDProfile]{
		kind: "BFDProfile", new: func() *v1alpha1.BFDProfile { return &v1alpha1.BFDProfile{} },
		check:      func(p *v1alpha1.BFDProfile, _ refcheck.Snapshot) []refcheck.Problem { return refcheck.BFDProfile(p) },
		conditions: func(o *v1alpha1.BFDProfile) []metav1.Condition { return o.Status.Conditions },
		observed:   func(o *v1alpha1.BFDProfile) int64 { return o.Status.ObservedGeneration },
	}, nil)
	if err != nil {
		return err
	}
	return refsController(mgr, opts, "community-refs", namespace, refsKind[*v1alpha1.Community]{
		kind: "Community", new: func() *v1alpha1.Community { return &v1alpha1.Community{} },
		check:      refcheck.Community,
		conditions: func(o *v1alpha1.Community) []metav1.Condition { return o.Status.Conditions },
		observed:   func(o *v1alpha1.Community) int64 { return o.Status.ObservedGeneration },
	}, func(b *builder.Builder) *builder.Builder {
		// A name defined twice concerns both Communities: an edit of one re-checks all.
		return b.Watches(&v1alpha1.Community{}, all(comms), builder.WithPredicates(specChanged))
	})
}

// refsController builds the controller of one kind: For the kind in namespace only, plus the
// watches extra adds. Leader election applies (the builder's default): only the leader
// writes.
func refsController[T client.Object](mgr ctrl.Manager, opts controller.Options, name, namespace string, k refsKind[T],
	extra func(*builder.Builder) *builder.Builder) error {
	inNS := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == namespace })
	b := ctrl.NewControllerManagedBy(mgr).Named(name).WithOptions(opts).
		For(k.new(), builder.WithPredicates(inNS))
	if extra != nil {
		b = extra(b)
	}
	if err := b.Complete(&RefsReconciler[T]{Client: mgr.GetClient(), k: k}); err != nil {
		return fmt.Errorf("set up %s controller: %w", name, err)
	}
	return nil
}

// listRequests lists namespace's objects of one kind as requests.
func listRequests(ctx context.Context, c client.Reader, namespace string, list client.ObjectList) []ctrl.Request {
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(items))
	for _, it := range items {
		o, ok := it.(client.Object)
		if !ok {
			continue
		}
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
	}
	return out
}
