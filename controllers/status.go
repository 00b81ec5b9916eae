package controllers

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// statusRecheck is when a Service whose status write was deferred (see publish) is looked at
// again if the watch event of the earlier write has not already brought it back.
const statusRecheck = 2 * time.Second

// writtenStatus is the last status this process wrote to a Service.
type writtenStatus struct {
	resourceVersion string // of the Service after the write
	addrs           string // joinAddrs of what was written
	deferred        bool   // a later write was already deferred once
}

// publish writes addrs to svc's status (writeStatus) unless this process wrote exactly that
// status already and the cache has not caught up with the write yet. That case is common: the
// watch event of the pool annotation written just before the status brings the Service back
// while the cache still shows the old status, and an update carrying the cached
// resourceVersion would only conflict (issue #15: every other Service cost a failed write and
// a back-off). Then it returns defer=true and writes nothing: the event of the earlier write
// brings the Service back, and the caller requeues it after statusRecheck in case it does
// not. A write is deferred at most once in a row: if the cache shows another version and the
// old status again, the status was changed after our write and is written as usual.
func (r *ServiceReconciler) publish(ctx context.Context, svc *corev1.Service, addrs []netip.Addr) (deferred bool, err error) {
	key := serviceKey(svc.Namespace, svc.Name)
	want := joinAddrs(addrs)
	if ingressEqual(svc.Status.LoadBalancer.Ingress, ingressFor(addrs)) {
		r.setWritten(key, nil)
		return false, nil
	}
	r.mu.Lock()
	w, ok := r.written[key]
	if ok && w.addrs == want && w.resourceVersion != svc.ResourceVersion && !w.deferred {
		w.deferred = true
		r.written[key] = w
		r.mu.Unlock()
		return true, nil
	}
	r.mu.Unlock()
	if err := r.writeStatus(ctx, svc, addrs); err != nil {
		r.setWritten(key, nil)
		return false, err
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
