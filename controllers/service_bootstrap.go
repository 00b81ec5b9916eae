package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
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
//	                                      └─ gone or replaced, or not ours and not shown ──► drop the holder
//	                                      └─ not ours but its status shows the address ──► left to its reconcile
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
	plan := planBootstrap(claims.Items, services.Items, r.LBClass)
	for _, h := range plan.stale {
		if err := r.dropHolder(ctx, h.claim, h.key, h.uid); err != nil {
			return fmt.Errorf("bootstrap: drop stale holder %s of %s: %w", h.key, h.claim, err)
		}
	}
	held, byKey, stale := plan.held, plan.services, len(plan.stale)
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

// bootstrapPlan is what bootstrap learns from the claims and Services it read.
type bootstrapPlan struct {
	// held are the addresses each live holder's claims hold, by Service key, in claim order.
	held map[string][]netip.Addr
	// services are the Services read, by key.
	services map[string]*corev1.Service
	// stale are the holders to drop, in claim order: their Service is gone, was replaced (other
	// UID) or is not one this controller serves.
	stale []staleHolder
}

// staleHolder is the holder key, and the UID it was held for, of the claim named claim.
type staleHolder struct {
	claim, key string
	uid        types.UID
}

// planBootstrap sorts every holder of every claim into held or stale (pure). A claim whose
// address does not parse is left alone.
func planBootstrap(claims []v1alpha1.IPAddressClaim, services []corev1.Service, lbClass string) bootstrapPlan {
	p := bootstrapPlan{held: map[string][]netip.Addr{}, services: map[string]*corev1.Service{}}
	for i := range services {
		s := &services[i]
		p.services[serviceKey(s.Namespace, s.Name)] = s
	}
	for _, c := range claims {
		addr, err := netip.ParseAddr(c.Spec.Address)
		if err != nil {
			continue
		}
		for _, h := range c.Spec.Holders {
			key := serviceKey(h.Namespace, h.Name)
			svc := p.services[key]
			switch {
			case svc == nil || svc.UID != h.UID:
				p.stale = append(p.stale, staleHolder{claim: c.Name, key: key, uid: h.UID})
				continue
			case !servedBy(svc, lbClass):
				// Not ours any more. Its status may still show the address: its own reconcile
				// withdraws it (with the fence) rather than a drop here; until then the address
				// is nobody's to take (holderAlive) and is not restored.
				if !slices.Contains(statusAddresses(svc), addr.Unmap()) {
					p.stale = append(p.stale, staleHolder{claim: c.Name, key: key, uid: h.UID})
				}
				continue
			}
			p.held[key] = append(p.held[key], addr.Unmap())
		}
	}
	return p
}
