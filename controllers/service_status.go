package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// statusRecheck is when a Service whose status write was deferred (see publish) is looked at
// again, should the watch event of the earlier write not bring it back first.
const statusRecheck = 2 * time.Second

// writtenStatus is the last status this process wrote to a Service.
type writtenStatus struct {
	resourceVersion string // of the Service after the write
	addrs           string // joinAddrs of what was written
}

// publish writes addrs to svc's status, with the ClaimsReleased condition naming marks (the
// fence, withdraw.go), after checking on the API server that svc holds every claim of addrs
// (confirmClaims; errClaimLost when not: nothing is written). The update carries the
// resourceVersion read, so a stale view fails instead of overwriting.
//
// It writes nothing when this process wrote exactly that status already, no claim is being
// released, and svc, read from the cache, is older than that write. That case is common: the
// watch event of the pool annotation written just before the status brings the Service back
// while the cache still shows the old status, and an update carrying the cached
// resourceVersion would only conflict (issue #15: every other Service cost a failed write and
// a back-off). Then it returns deferred=true: the watch event of the earlier write brings the
// Service back, and the caller also requeues it after statusRecheck. Resource versions are
// compared as Kubernetes 1.35 allows (KEP-5504); a cached object newer than the write (someone
// changed the status since) or versions that do not compare are written as usual.
func (r *ServiceReconciler) publish(ctx context.Context, svc *corev1.Service, addrs []netip.Addr, marks []mark) (deferred bool, err error) {
	key := serviceKey(svc.Namespace, svc.Name)
	want := joinAddrs(addrs)
	next := svc.Status.DeepCopy()
	next.LoadBalancer.Ingress = ingressFor(addrs)
	fence := fenced(next, svc.Generation, marks)
	if ingressEqual(svc.Status.LoadBalancer.Ingress, next.LoadBalancer.Ingress) && !fence {
		r.setWritten(key, nil)
		return false, nil
	}
	r.mu.Lock()
	w, ok := r.written[key]
	r.mu.Unlock()
	if ok && w.addrs == want && len(marks) == 0 {
		if c, err := resourceversion.CompareResourceVersion(svc.ResourceVersion, w.resourceVersion); err == nil && c < 0 {
			return true, nil
		}
	}
	r.setWritten(key, nil)
	if err := r.confirmClaims(ctx, svc, addrs); err != nil {
		return false, err
	}
	svc.Status = *next
	if err := r.Client.Status().Update(ctx, svc); err != nil {
		return false, fmt.Errorf("update Service status: %w", err)
	}
	r.setWritten(key, &writtenStatus{resourceVersion: svc.ResourceVersion, addrs: want})
	return false, nil
}

// setWritten records (or with nil forgets) the last status written to the Service key.
func (r *ServiceReconciler) setWritten(key string, w *writtenStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w == nil {
		delete(r.written, key)
		return
	}
	if r.written == nil {
		r.written = map[string]writtenStatus{}
	}
	r.written[key] = *w
}

// ingressFor is the status.loadBalancer.ingress that shows addrs (ipMode VIP).
func ingressFor(addrs []netip.Addr) []corev1.LoadBalancerIngress {
	out := make([]corev1.LoadBalancerIngress, 0, len(addrs))
	for _, a := range addrs {
		vip := corev1.LoadBalancerIPModeVIP
		out = append(out, corev1.LoadBalancerIngress{IP: a.String(), IPMode: &vip})
	}
	return out
}
