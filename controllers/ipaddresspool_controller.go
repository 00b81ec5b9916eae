package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// poolResync bounds how stale a pool's status may get if a nudge from the Service reconciler
// was dropped.
const poolResync = 30 * time.Second

// poolStatusInterval is the least time between two status writes of one pool when only its
// counts changed: allocating thousands of Services nudges the pool once per Service, and a
// write per nudge made the pool status as costly as the allocations themselves (issue #15). A
// condition change is written at once.
const poolStatusInterval = time.Second

// PoolReconciler writes each IPAddressPool's status: addresses assigned and available per
// family, and the Overlapping and Valid conditions. It also exports the pool metrics.
type PoolReconciler struct {
	Client   client.Client
	Alloc    *allocator.Allocator
	Recorder events.EventRecorder
	Metrics  *Metrics

	pools    *poolSync
	throttle writeThrottle
}

var _ reconcile.Reconciler = &PoolReconciler{}

// Reconcile updates one pool's status from the allocator.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, err := r.pools.sync(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var pool v1alpha1.IPAddressPool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		if client.IgnoreNotFound(err) == nil {
			for _, fam := range []string{"ipv4", "ipv6"} {
				r.Metrics.InUse.DeleteLabelValues(req.Name, fam)
				r.Metrics.Usable.DeleteLabelValues(req.Name, fam)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get IPAddressPool: %w", err)
	}
	st, known := r.Alloc.Stats(pool.Name)
	if known {
		r.exportMetrics(pool.Name, st)
	}
	status, overlap := desiredPoolStatus(&pool, r.pools.invalidReason(pool.Name), st, known, r.Alloc.Overlaps())
	if equality.Semantic.DeepEqual(status, &pool.Status) {
		return ctrl.Result{RequeueAfter: poolResync}, nil
	}
	return r.writeStatus(ctx, &pool, status, overlap)
}

// desiredPoolStatus is the status pool should show (pure): Valid unless the allocator left
// it out (invalid), the counts of st when the allocator knows the pool, and Overlapping when
// overlaps involve it. overlap is that condition.
func desiredPoolStatus(pool *v1alpha1.IPAddressPool, invalid error, st allocator.PoolStats, known bool, overlaps []allocator.Overlap) (*v1alpha1.IPAddressPoolStatus, metav1.Condition) {
	status := pool.Status.DeepCopy()
	status.Conditions = slicesClone(pool.Status.Conditions)

	valid := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid",
		Message: "the allocator uses this pool", ObservedGeneration: pool.Generation}
	if invalid != nil {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "Invalid", invalid.Error()
	}
	meta.SetStatusCondition(&status.Conditions, valid)

	if known {
		status.AssignedIPv4, status.AssignedIPv6 = st.AssignedV4, st.AssignedV6
		status.AvailableIPv4, status.AvailableIPv6 = st.AvailableV4, st.AvailableV6
	}

	overlap := metav1.Condition{Type: v1alpha1.ConditionOverlap, Status: metav1.ConditionFalse, Reason: "NoOverlap",
		Message: "no other pool has any of these addresses", ObservedGeneration: pool.Generation}
	if msgs := overlapsOf(overlaps, pool.Name); len(msgs) > 0 {
		overlap.Status, overlap.Reason = metav1.ConditionTrue, "Overlapping"
		overlap.Message = "addresses also in " + strings.Join(msgs, "; ") +
			": an address in several pools is assigned from the first by priority, then name"
	}
	meta.SetStatusCondition(&status.Conditions, overlap)
	return status, overlap
}

// exportMetrics sets the pool's in-use and usable gauges per family.
func (r *PoolReconciler) exportMetrics(name string, st allocator.PoolStats) {
	r.Metrics.InUse.WithLabelValues(name, "ipv4").Set(float64(st.AssignedV4))
	r.Metrics.InUse.WithLabelValues(name, "ipv6").Set(float64(st.AssignedV6))
	r.Metrics.Usable.WithLabelValues(name, "ipv4").Set(float64(st.AssignedV4) + float64(st.AvailableV4))
	r.Metrics.Usable.WithLabelValues(name, "ipv6").Set(float64(st.AssignedV6) + float64(st.AvailableV6))
}

// writeStatus writes status to pool, at most once per poolStatusInterval when only the counts
// changed, and records a Warning when the pool starts overlapping another.
func (r *PoolReconciler) writeStatus(ctx context.Context, pool *v1alpha1.IPAddressPool, status *v1alpha1.IPAddressPoolStatus, overlap metav1.Condition) (ctrl.Result, error) {
	now := time.Now()
	if equality.Semantic.DeepEqual(status.Conditions, pool.Status.Conditions) {
		if wait := r.throttle.wait(pool.Name, now, poolStatusInterval); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	r.throttle.wrote(pool.Name, now)
	wasOverlapping := meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionOverlap)
	pool.Status = *status
	if err := r.Client.Status().Update(ctx, pool); err != nil {
		return ctrl.Result{}, fmt.Errorf("update IPAddressPool status: %w", err)
	}
	if overlap.Status == metav1.ConditionTrue && !wasOverlapping {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, contract.ReasonPoolOverlap, "Validate", "%s", overlap.Message)
	}
	return ctrl.Result{RequeueAfter: poolResync}, nil
}

// writeThrottle remembers when each object's status was last written.
type writeThrottle struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// wait returns how long to wait before writing name's status again, at most one write per
// interval; zero means write now.
func (t *writeThrottle) wait(name string, now time.Time, interval time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.last[name]
	if !ok {
		return 0
	}
	return max(0, last.Add(interval).Sub(now))
}

// wrote records a write of name's status at now.
func (t *writeThrottle) wrote(name string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	t.last[name] = now
}

// overlapsOf describes the overlaps that involve pool, sorted: `pool "b" (192.0.2.0-192.0.2.9)`.
func overlapsOf(all []allocator.Overlap, pool string) []string {
	var out []string
	for _, o := range all {
		switch pool {
		case o.PoolA:
			out = append(out, fmt.Sprintf("pool %q (%s)", o.PoolB, o.Prefix))
		case o.PoolB:
			out = append(out, fmt.Sprintf("pool %q (%s)", o.PoolA, o.Prefix))
		}
	}
	sort.Strings(out)
	return out
}

func slicesClone(c []metav1.Condition) []metav1.Condition {
	if c == nil {
		return nil
	}
	return append([]metav1.Condition(nil), c...)
}
