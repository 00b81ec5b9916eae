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
//   - an address appears in a Service's status only after that Service holds the address's
//     IPAddressClaim on the API server;
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
func (r *ServiceReconciler) ours(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == r.LBClass
}

// Reconcile brings one Service's addresses, claims and status in line.
func (r *ServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	if err := r.bootstrap(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.pools.sync(ctx); err != nil {
		return ctrl.Result{}, err
	}
	key := serviceKey(req.Namespace, req.Name)

	var svc corev1.Service
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.release(ctx, key)
		}
		return ctrl.Result{}, fmt.Errorf("get Service: %w", err)
	}
	if !svc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, key)
	}
	if !r.ours(&svc) {
		_, held := r.Alloc.Holding(key)
		if err := r.release(ctx, key); err != nil {
			return ctrl.Result{}, err
		}
		if held && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return ctrl.Result{}, r.writeStatus(ctx, &svc, nil)
		}
		return ctrl.Result{}, nil
	}

	var ns corev1.Namespace
	if err := r.Client.Get(ctx, types.NamespacedName{Name: svc.Namespace}, &ns); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get Namespace: %w", err)
	}
	areq, err := buildRequest(&svc, ns.Labels)
	if conflicts := AnnotationConflicts(&svc); len(conflicts) > 0 {
		// The annotation of highest precedence is used either way; the others should go.
		r.Recorder.Eventf(&svc, nil, corev1.EventTypeWarning, contract.ReasonInvalidRequest, "Allocate", "%s", strings.Join(conflicts, "; "))
	}
	if err != nil {
		// The user must edit the Service; its current addresses stay as they are.
		r.Metrics.Failures.WithLabelValues("invalid_request").Inc()
		r.Recorder.Eventf(&svc, nil, corev1.EventTypeWarning, contract.ReasonInvalidRequest, "Allocate", "%v", err)
		logger.Info("invalid address request", "reason", err.Error())
		return ctrl.Result{}, nil
	}
	if _, held := r.Alloc.Holding(key); !held {
		// Adopt what the Service shows (e.g. assigned before a restart and not yet claimed);
		// the claim step below confirms it against the API server.
		if cur := statusAddresses(&svc); len(cur) > 0 {
			_, _ = r.Alloc.Restore(areq, cur)
		}
	}

	var asg allocator.Assignment
	for attempt := 0; ; attempt++ {
		if attempt == maxClaimAttempts {
			return ctrl.Result{}, fmt.Errorf("gave up after %d addresses were claimed by others first", attempt)
		}
		asg, err = r.Alloc.Assign(areq)
		if err != nil {
			r.setPending(req.NamespacedName, true)
			if err := r.fail(ctx, &svc, err); err != nil {
				return ctrl.Result{}, err
			}
			// Also retry later: what frees an address may not pass through this process.
			return ctrl.Result{RequeueAfter: pendingRetry}, nil
		}
		lost, rival, err := r.claimAll(ctx, &svc, areq, asg)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !lost.IsValid() {
			break
		}
		// Another writer got there first: record the address as theirs and choose again.
		r.Metrics.Conflicts.Inc()
		logger.V(1).Info("address claimed by another Service", "address", lost.String(), "holder", rival.key)
		r.Alloc.Release(key)
		if _, err := r.Alloc.Restore(rival.request(), []netip.Addr{lost}); err != nil {
			logger.V(1).Info("could not record rival claim", "address", lost.String(), "reason", err.Error())
		}
	}

	r.setPending(req.NamespacedName, false)
	before := statusAddresses(&svc)
	if svc.Annotations[contract.AnnotationAllocatedFromPool] != asg.Pool {
		patch := client.MergeFrom(svc.DeepCopy())
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[contract.AnnotationAllocatedFromPool] = asg.Pool
		if err := r.Client.Patch(ctx, &svc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("record pool on Service: %w", err)
		}
	}
	// The pool is recorded before the address is published, so whoever sees the address (a
	// speaker, a user) also sees where it came from.
	deferred, err := r.publish(ctx, &svc, asg.Addresses)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A deferred write was made (and announced) by an earlier reconcile.
	if !deferred && !slices.Equal(before, asg.Addresses) {
		r.Metrics.Allocations.Inc()
		r.Recorder.Eventf(&svc, nil, corev1.EventTypeNormal, contract.ReasonAllocated, "Allocate",
			"Assigned %s from pool %s", joinAddrs(asg.Addresses), asg.Pool)
		logger.Info("assigned addresses", "addresses", joinAddrs(asg.Addresses), "pool", asg.Pool)
	}
	if err := r.releaseClaimsExcept(ctx, key, asg.Addresses); err != nil {
		return ctrl.Result{}, err
	}
	r.poolChanged(asg.Pool)
	if deferred {
		return ctrl.Result{RequeueAfter: statusRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// fail reports an allocation error on the Service and withdraws addresses it no longer holds.
func (r *ServiceReconciler) fail(ctx context.Context, svc *corev1.Service, err error) error {
	reason := failureReason(err)
	r.Metrics.Failures.WithLabelValues(reason).Inc()
	r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, contract.ReasonAllocationFailed, "Allocate", "%v", err)
	log.FromContext(ctx).Info("allocation failed", "reason", err.Error())
	key := serviceKey(svc.Namespace, svc.Name)
	if err := r.release(ctx, key); err != nil {
		return err
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return r.writeStatus(ctx, svc, nil)
	}
	return nil
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

// writeStatus sets status.loadBalancer.ingress to addrs (ipMode VIP), if it differs. The
// update carries the resourceVersion read, so a stale view fails instead of overwriting.
func (r *ServiceReconciler) writeStatus(ctx context.Context, svc *corev1.Service, addrs []netip.Addr) error {
	want := ingressFor(addrs)
	if ingressEqual(svc.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	svc.Status.LoadBalancer.Ingress = want
	if err := r.Client.Status().Update(ctx, svc); err != nil {
		return fmt.Errorf("update Service status: %w", err)
	}
	return nil
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
