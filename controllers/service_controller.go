package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// claimHolderIndex indexes IPAddressClaims by the "namespace/name" of each holder.
const claimHolderIndex = "spec.holders.key"

// maxClaimAttempts bounds how many addresses one reconcile tries when other writers keep
// winning the race for them; the Service is requeued after that.
const maxClaimAttempts = 32

// ServiceReconciler assigns addresses to Services of type LoadBalancer.
//
// Invariants it keeps (ARCHITECTURE.md 1–3):
//   - an address appears in a Service's status only while that Service holds the address's
//     IPAddressClaim on the API server: checked there right before every status write, and a
//     claim is released only after a status write that fences off writes prepared before the
//     release began (withdraw.go) — with any number of controllers at once;
//   - before it assigns anything it learns every claim and every Service status (bootstrap);
//   - it writes Service status only for Services of its class, with optimistic concurrency.
type ServiceReconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly; used where a stale cache could give an
	// address away twice (claims and their holders).
	APIReader client.Reader
	Alloc     *allocator.Allocator
	Recorder  events.EventRecorder
	Metrics   *Metrics
	// LBClass is the spec.loadBalancerClass this controller serves, besides Services with none.
	LBClass string
	// PoolChanged receives a pool whenever its usage may have changed. Optional.
	PoolChanged chan<- event.GenericEvent
	// Namespace holds the IPAddressPools.
	Namespace string

	pools *poolSync
	// retry re-enqueues Services whose allocation failed when an address is released: they
	// may fit now. Optional.
	retry chan<- event.GenericEvent

	mu           sync.Mutex
	bootstrapped bool
	pending      map[types.NamespacedName]bool // Services whose last allocation failed
	written      map[string]writtenStatus      // by Service key: the last status written (publish)
}

var _ reconcile.Reconciler = &ServiceReconciler{}

// ours reports whether svc is a Service this controller allocates for.
func (r *ServiceReconciler) ours(svc *corev1.Service) bool { return servedBy(svc, r.LBClass) }

// Reconcile brings one Service's addresses, claims and status in line:
//
//	bootstrap, pool sync ─► read Service ─► decideService ─► withdraw (mark, fence, drop)
//	                                                     └─► request ─► adopt the status ─► assign and claim
//	                                                         ─► mark the others, write (checked), drop them
func (r *ServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	if err := r.bootstrap(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.pools.sync(ctx); err != nil {
		return ctrl.Result{}, err
	}
	key := serviceKey(req.Namespace, req.Name)
	svc, err := r.readService(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	_, held := r.Alloc.Holding(key)
	switch decideService(svc, r.LBClass, held) {
	case serviceRelease:
		r.setPending(req.NamespacedName, false) // gone or not ours: not waiting any more
		return r.retryLost(ctx, key, r.withdraw(ctx, key, true, false))
	case serviceReleaseAndClear:
		r.setPending(req.NamespacedName, false)
		return r.retryLost(ctx, key, r.withdraw(ctx, key, true, true))
	}

	areq, ok, err := r.request(ctx, svc)
	if !ok || err != nil {
		return ctrl.Result{}, err
	}
	cur, _ := r.Alloc.Holding(key)
	if cur := adoptable(svc, cur.Addresses); len(cur) > 0 {
		_, _ = r.Alloc.Restore(areq, cur)
	}
	asg, refused, err := r.assignAndClaim(ctx, svc, areq)
	if err != nil {
		return ctrl.Result{}, err
	}
	if refused != nil {
		r.setPending(req.NamespacedName, true)
		if err := r.fail(ctx, svc, refused); err != nil {
			return r.retryLost(ctx, key, err)
		}
		// Also retry later: what frees an address may not pass through this process.
		return ctrl.Result{RequeueAfter: pendingRetry}, nil
	}
	r.setPending(req.NamespacedName, false)
	res, err := r.writeAssignment(ctx, svc, asg, start)
	if err != nil {
		return r.retryLost(ctx, key, err)
	}
	return res, nil
}

// lostRetry is how soon a Service is looked at again after another controller moved one of
// its claims under this one (errClaimLost, errStaleView): soon, but not in a tight loop while
// two controllers with different views disagree.
const lostRetry = 250 * time.Millisecond

// retryLost turns the two errors of a race with another writer into a requeue (they are the
// protocol working, not failures: nothing unsafe was written); other errors pass through.
func (r *ServiceReconciler) retryLost(ctx context.Context, key string, err error) (ctrl.Result, error) {
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case errors.Is(err, errClaimLost):
		r.Metrics.LostClaims.Inc()
		// What this process believed about the Service is wrong: learn it again.
		r.Alloc.Release(key)
		r.setWritten(key, nil)
		log.FromContext(ctx).V(1).Info("claim lost before the status write", "reason", err.Error())
		return ctrl.Result{RequeueAfter: lostRetry}, nil
	case errors.Is(err, errStaleView):
		log.FromContext(ctx).V(1).Info("view behind the API server", "reason", err.Error())
		return ctrl.Result{RequeueAfter: lostRetry}, nil
	}
	return ctrl.Result{}, err
}

// readService reads the Service from the cache; nil when it is gone.
func (r *ServiceReconciler) readService(ctx context.Context, name types.NamespacedName) (*corev1.Service, error) {
	var svc corev1.Service
	if err := r.Client.Get(ctx, name, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get Service: %w", err)
	}
	return &svc, nil
}

// request translates svc into an allocator request. ok is false when the Service asks for
// something invalid: that is reported on it (Event, metric, log) and its current addresses
// stay as they are until the user edits it.
func (r *ServiceReconciler) request(ctx context.Context, svc *corev1.Service) (areq allocator.Request, ok bool, err error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, types.NamespacedName{Name: svc.Namespace}, &ns); err != nil && !apierrors.IsNotFound(err) {
		return areq, false, fmt.Errorf("get Namespace: %w", err)
	}
	areq, invalid := buildRequest(svc, ns.Labels)
	if conflicts := AnnotationConflicts(svc); len(conflicts) > 0 {
		// The annotation of highest precedence is used either way; the others should go.
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, contract.ReasonInvalidRequest, "Allocate", "%s", strings.Join(conflicts, "; "))
	}
	if invalid != nil {
		r.Metrics.Failures.WithLabelValues("invalid_request").Inc()
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, contract.ReasonInvalidRequest, "Allocate", "%v", invalid)
		log.FromContext(ctx).Info("invalid address request", "reason", invalid.Error())
		return areq, false, nil
	}
	return areq, true, nil
}

// assignAndClaim asks the allocator for addresses and claims each on the API server. While
// another writer wins the race for one, it records that address as the rival's and chooses
// again, up to maxClaimAttempts. refused is the allocator's refusal (no address fits); err
// is a failure to talk to the API server.
func (r *ServiceReconciler) assignAndClaim(ctx context.Context, svc *corev1.Service, areq allocator.Request) (asg allocator.Assignment, refused, err error) {
	for attempt := 0; attempt < maxClaimAttempts; attempt++ {
		asg, refused = r.Alloc.Assign(areq)
		if refused != nil {
			return asg, refused, nil
		}
		lost, rival, err := r.claimAll(ctx, svc, areq, asg)
		if err != nil {
			return asg, nil, err
		}
		if !lost.IsValid() {
			return asg, nil, nil
		}
		r.yieldAddress(ctx, areq.Key, lost, rival)
	}
	return asg, nil, fmt.Errorf("gave up after %d addresses were claimed by others first", maxClaimAttempts)
}

// yieldAddress records in the allocator that addr belongs to rival, who claimed it first,
// and forgets what it had chosen for key, so the next Assign chooses again.
func (r *ServiceReconciler) yieldAddress(ctx context.Context, key string, addr netip.Addr, rival holder) {
	logger := log.FromContext(ctx)
	r.Metrics.Conflicts.Inc()
	logger.V(1).Info("address claimed by another Service", "address", addr.String(), "holder", rival.key)
	r.Alloc.Release(key)
	if _, err := r.Alloc.Restore(rival.request(), []netip.Addr{addr}); err != nil {
		logger.V(1).Info("could not record rival claim", "address", addr.String(), "reason", err.Error())
	}
}

// writeAssignment makes svc show asg, whose claims it holds: it marks the claims of addresses
// svc keeps no longer releasing (withdraw.go), writes the pool annotation, so whoever sees the
// address (a speaker, a user) also sees where it came from, then the status (publish: checked
// against the claims on the API server, and the fence for the marks), an Event when the
// addresses changed, and last it drops the marked claims. start is when the reconcile began
// (metalgate_allocation_duration_seconds).
func (r *ServiceReconciler) writeAssignment(ctx context.Context, svc *corev1.Service, asg allocator.Assignment, start time.Time) (ctrl.Result, error) {
	key := serviceKey(svc.Namespace, svc.Name)
	before := statusAddresses(svc)
	marks, err := r.markReleasing(ctx, key, asg.Addresses)
	if err != nil {
		return ctrl.Result{}, err
	}
	if needsPoolAnnotation(svc, asg.Pool) {
		if err := r.writePoolAnnotation(ctx, svc, asg.Pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	deferred, err := r.publish(ctx, svc, asg.Addresses, marks)
	if err != nil {
		return ctrl.Result{}, err
	}
	if newlyAssigned(before, asg.Addresses, deferred) {
		r.Metrics.Allocations.Inc()
		r.Metrics.AllocationDuration.Observe(time.Since(start).Seconds())
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, contract.ReasonAllocated, "Allocate",
			"Assigned %s from pool %s", joinAddrs(asg.Addresses), asg.Pool)
		log.FromContext(ctx).Info("assigned addresses", "addresses", joinAddrs(asg.Addresses), "pool", asg.Pool)
	}
	r.poolChanged(asg.Pool)
	if deferred {
		// The marks stay; the reconcile the deferred write waits for drops them.
		return ctrl.Result{RequeueAfter: statusRecheck}, nil
	}
	if err := r.dropMarked(ctx, key, marks); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// writePoolAnnotation patches metalgate.io/ip-allocated-from-pool on svc to pool.
func (r *ServiceReconciler) writePoolAnnotation(ctx context.Context, svc *corev1.Service, pool string) error {
	patch := client.MergeFrom(svc.DeepCopy())
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[contract.AnnotationAllocatedFromPool] = pool
	if err := r.Client.Patch(ctx, svc, patch); err != nil {
		return fmt.Errorf("record pool on Service: %w", err)
	}
	return nil
}

// fail reports an allocation error on the Service and withdraws whatever it showed.
func (r *ServiceReconciler) fail(ctx context.Context, svc *corev1.Service, err error) error {
	reason := failureReason(err)
	r.Metrics.Failures.WithLabelValues(reason).Inc()
	r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, contract.ReasonAllocationFailed, "Allocate", "%v", err)
	log.FromContext(ctx).Info("allocation failed", "reason", err.Error())
	return r.withdraw(ctx, serviceKey(svc.Namespace, svc.Name), false, true)
}

func failureReason(err error) string {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{allocator.ErrPoolExhausted, "exhausted"},
		{allocator.ErrInUse, "in_use"},
		{allocator.ErrNotInPool, "not_in_pool"},
		{allocator.ErrFamilyUnavailable, "family_unavailable"},
		{allocator.ErrSharingRefused, "sharing_refused"},
		{allocator.ErrNoSuchPool, "no_such_pool"},
		{allocator.ErrPoolNotEligible, "pool_not_eligible"},
	} {
		if errors.Is(err, c.err) {
			return c.reason
		}
	}
	return "other"
}

func ingressEqual(a, b []corev1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == "" && len(x.Ports) == 0 &&
			x.IPMode != nil && y.IPMode != nil && *x.IPMode == *y.IPMode
	})
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// pendingRetry is how often a Service that could not be allocated is tried again when no
// release in this process triggered it sooner.
const pendingRetry = time.Minute

func (r *ServiceReconciler) setPending(key types.NamespacedName, pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.Metrics.Pending.Set(float64(len(r.pending))) }()
	if !pending {
		delete(r.pending, key)
		return
	}
	if r.pending == nil {
		r.pending = map[types.NamespacedName]bool{}
	}
	r.pending[key] = true
}

// retryPending asks for another try of every Service waiting for an address.
func (r *ServiceReconciler) retryPending() {
	if r.retry == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.pending {
		obj := &corev1.Service{}
		obj.Namespace, obj.Name = key.Namespace, key.Name
		select {
		case r.retry <- event.GenericEvent{Object: obj}:
		default: // the periodic retry covers a full channel
		}
	}
}

func (r *ServiceReconciler) poolChanged(pool string) {
	if r.PoolChanged == nil || pool == "" {
		return
	}
	obj := &v1alpha1.IPAddressPool{}
	obj.Namespace, obj.Name = r.Namespace, pool
	select {
	case r.PoolChanged <- event.GenericEvent{Object: obj}:
	default:
		// The pool reconciler also resyncs periodically; a dropped nudge only delays status.
	}
}
