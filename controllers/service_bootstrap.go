package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

// bootstrap learns every existing assignment before the first allocation (ARCHITECTURE.md
// invariant 2). It runs once per process (per leadership: the reconciler only runs as leader):
//
//	claims (read from the API server) ──► holder alive and ours? ──yes──► allocator.Restore
//	                                                              └─no──► drop the holder
//
// Services whose status shows an address without a claim are adopted by their own reconcile.
func (r *ServiceReconciler) bootstrap(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bootstrapped {
		return nil
	}
	logger := log.FromContext(ctx)
	if _, err := r.pools.sync(ctx); err != nil {
		return err
	}
	var claims v1alpha1.IPAddressClaimList
	if err := r.APIReader.List(ctx, &claims); err != nil {
		return fmt.Errorf("bootstrap: list IPAddressClaims: %w", err)
	}
	var services corev1.ServiceList
	if err := r.APIReader.List(ctx, &services); err != nil {
		return fmt.Errorf("bootstrap: list Services: %w", err)
	}
	byKey := map[string]*corev1.Service{}
	for i := range services.Items {
		s := &services.Items[i]
		byKey[serviceKey(s.Namespace, s.Name)] = s
	}

	held := map[string][]netip.Addr{}
	stale := 0
	for _, c := range claims.Items {
		addr, err := netip.ParseAddr(c.Spec.Address)
		if err != nil {
			continue
		}
		for _, h := range c.Spec.Holders {
			key := serviceKey(h.Namespace, h.Name)
			svc := byKey[key]
			if svc == nil || svc.UID != h.UID || !r.ours(svc) {
				if err := r.dropHolder(ctx, c.Name, key); err != nil {
					return fmt.Errorf("bootstrap: drop stale holder %s of %s: %w", key, c.Name, err)
				}
				stale++
				continue
			}
			held[key] = append(held[key], addr.Unmap())
		}
	}
	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic: the same state gives the same allocator
	restored := 0
	for _, key := range keys {
		svc := byKey[key]
		var ns corev1.Namespace
		_ = r.Client.Get(ctx, types.NamespacedName{Name: svc.Namespace}, &ns) // labels only; absent is fine
		req, err := buildRequest(svc, ns.Labels)
		if err != nil {
			continue // the Service's own reconcile reports it
		}
		if _, err := r.Alloc.Restore(req, held[key]); err != nil {
			logger.Info("existing assignment not restored", "service", key, "reason", err.Error())
			continue
		}
		restored++
	}
	logger.Info("learned existing assignments", "claims", len(claims.Items), "restored", restored, "staleHolders", stale)
	r.bootstrapped = true
	return nil
}
