package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// Taking an address away from a Service, and the check before giving one, so that a Service's
// status names an address only while the address's claim names that Service — however many
// controllers run at once (a Lease handover, a partition, a second install). The argument is
// in docs/architecture.md, "Why two controllers cannot double-assign"; in short:
//
//	withdraw:  mark the Service's holder entry releasing   (claim write, at version v)
//	           write the Service's status without the address, with the ClaimsReleased
//	           condition naming the claim at version v      (Service write: the fence)
//	           remove the holder, only if the claim is still at version v
//	publish:   the Service as read (version s)
//	           the claim holds the Service by UID, not releasing   (read live, after s)
//	           write the status at version s (optimistic concurrency)
//
// A publisher that checked the claim before the mark wrote at a Service version older than
// the fence, so its write fails; one that checked after the mark sees the mark and writes
// nothing. A release never removes a holder whose claim changed since it was marked (someone
// may have unmarked it and published again): it starts over instead.

// errClaimLost: a claim this reconcile was about to publish is no longer the Service's (another
// holder, gone, or being released). Nothing was written; the Service is reconciled again.
var errClaimLost = errors.New("address claim lost before the status write")

// errStaleView: the cache said a Service is gone or not ours, but the API server has it as a
// LoadBalancer of ours. Nothing was released; the Service is reconciled again.
var errStaleView = errors.New("the cache is behind the API server")

// mark is a claim whose holder entries for one Service were marked releasing, with the claim's
// resourceVersion once marked.
type mark struct {
	claim, address, pool, version string
}

// markReleasing marks key's holder entries releasing on every claim it holds for an address
// not in keep, as the API server has them. It returns the marks, sorted by claim name.
func (r *ServiceReconciler) markReleasing(ctx context.Context, key string, keep []netip.Addr) ([]mark, error) {
	var list v1alpha1.IPAddressClaimList
	if err := r.Client.List(ctx, &list, client.MatchingFields{claimHolderIndex: key}); err != nil {
		return nil, fmt.Errorf("list claims of %s: %w", key, err)
	}
	var marks []mark
	for _, c := range list.Items {
		if addr, err := netip.ParseAddr(c.Spec.Address); err == nil && slices.Contains(keep, addr.Unmap()) {
			continue
		}
		m, ok, err := r.markClaim(ctx, c.Name, key)
		if err != nil {
			return nil, err
		}
		if ok {
			marks = append(marks, m)
		}
	}
	slices.SortFunc(marks, func(a, b mark) int { return strings.Compare(a.claim, b.claim) })
	return marks, nil
}

// markClaim marks key's entries of the claim releasing. ok is false when the claim is gone or
// key holds no entry in it.
func (r *ServiceReconciler) markClaim(ctx context.Context, name, key string) (m mark, ok bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ok = false
		var cur v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		found, changed := false, false
		for i := range cur.Spec.Holders {
			h := &cur.Spec.Holders[i]
			if serviceKey(h.Namespace, h.Name) != key {
				continue
			}
			found = true
			if !h.Releasing {
				h.Releasing, changed = true, true
			}
		}
		if !found {
			return nil
		}
		if changed {
			if err := r.Client.Update(ctx, &cur); err != nil {
				return err
			}
		}
		m, ok = mark{claim: cur.Name, address: cur.Spec.Address, pool: cur.Spec.Pool, version: cur.ResourceVersion}, true
		return nil
	})
	if err != nil {
		return mark{}, false, fmt.Errorf("mark claim %s releasing for %s: %w", name, key, err)
	}
	return m, ok, nil
}

// dropMarked removes key from each marked claim, only where the claim is still at the version
// it was marked at; a claim deleted meanwhile is fine. A claim that changed since (unmarked
// by a rival, say) is left as it is and reported with errStaleView after the others.
func (r *ServiceReconciler) dropMarked(ctx context.Context, key string, marks []mark) error {
	moved := 0
	for _, m := range marks {
		var cur v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: m.claim}, &cur); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get claim %s: %w", m.claim, err)
		}
		if cur.ResourceVersion != m.version {
			moved++
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(cur.Spec.Holders), func(h v1alpha1.ClaimHolder) bool {
			return serviceKey(h.Namespace, h.Name) == key
		})
		var err error
		if len(kept) == 0 {
			rv, uid := m.version, cur.UID
			err = r.Client.Delete(ctx, &cur, client.Preconditions{ResourceVersion: &rv, UID: &uid})
		} else {
			cur.Spec.Holders = kept
			err = r.Client.Update(ctx, &cur) // carries m.version: fails if the claim moved
		}
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			moved++
			continue
		case err != nil:
			return fmt.Errorf("release claim %s of %s: %w", m.claim, key, err)
		}
		log.FromContext(ctx).V(1).Info("released claim", "claim", m.claim, "holder", key)
		r.Metrics.Releases.Inc()
		r.poolChanged(m.pool)
	}
	if len(marks) > moved {
		r.retryPending()
	}
	if moved > 0 {
		return fmt.Errorf("%d claim(s) of %s changed after they were marked releasing: %w", moved, key, errStaleView)
	}
	return nil
}

// fenced sets the ClaimsReleased condition naming marks on status (a copy is not made: status
// is the one about to be written). It reports whether the condition changed. An unchanged
// condition means a write naming exactly these claim versions was made after they were
// marked, which is all the fence needs.
func fenced(status *corev1.ServiceStatus, generation int64, marks []mark) bool {
	if len(marks) == 0 {
		return false
	}
	parts := make([]string, len(marks))
	for i, m := range marks {
		parts[i] = fmt.Sprintf("%s (%s) at version %s", m.claim, m.address, m.version)
	}
	return meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               contract.ConditionClaimsReleased,
		Status:             metav1.ConditionTrue,
		Reason:             contract.ReasonClaimsReleased,
		Message:            "released " + strings.Join(parts, ", "),
		ObservedGeneration: generation,
	})
}

// confirmClaims checks on the API server, right before a status write that shows addrs, that
// the claim of each address holds svc (by UID) and is not being released for it.
func (r *ServiceReconciler) confirmClaims(ctx context.Context, svc *corev1.Service, addrs []netip.Addr) error {
	for _, a := range addrs {
		var c v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: ClaimName(a)}, &c); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: claim %s is gone: %w", a, ClaimName(a), errClaimLost)
			}
			return fmt.Errorf("confirm claim %s: %w", ClaimName(a), err)
		}
		held := slices.ContainsFunc(c.Spec.Holders, func(h v1alpha1.ClaimHolder) bool {
			return h.Namespace == svc.Namespace && h.Name == svc.Name && h.UID == svc.UID && !h.Releasing
		})
		if !held {
			return fmt.Errorf("%s: claim %s does not hold %s/%s: %w", a, c.Name, svc.Namespace, svc.Name, errClaimLost)
		}
	}
	return nil
}

// withdraw takes every claim of key away from its Service: mark, fence, drop. gone says the
// caller decided from its cache that the Service is gone or not one of ours; then a live
// Service that is ours stops it (errStaleView). clear empties the status of a live Service
// that is ours (an allocation that failed); otherwise only the withdrawn addresses leave it.
func (r *ServiceReconciler) withdraw(ctx context.Context, key string, gone, clear bool) error {
	r.Alloc.Release(key)
	r.setWritten(key, nil)
	marks, err := r.markReleasing(ctx, key, nil)
	if err != nil {
		return err
	}
	if len(marks) == 0 && !clear {
		return nil
	}
	ns, name, _ := strings.Cut(key, "/")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live corev1.Service
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &live); err != nil {
			// Gone: no status to fence, and no write can make one.
			return client.IgnoreNotFound(err)
		}
		ours := r.ours(&live) && live.DeletionTimestamp.IsZero()
		if gone && ours {
			return fmt.Errorf("release %s: %w", key, errStaleView)
		}
		shown := statusAddresses(&live)
		keep := slices.DeleteFunc(slices.Clone(shown), func(a netip.Addr) bool {
			return clear || slices.ContainsFunc(marks, func(m mark) bool { return m.address == a.String() })
		})
		// A Service that is not ours (any more) or is being deleted needs no fence: whatever
		// made it so changed its resourceVersion after any publisher read it, so a prepared
		// write fails anyway. Only an address of ours still shown must go.
		if !ours && len(keep) == len(shown) {
			return nil
		}
		changed := len(keep) != len(shown)
		live.Status.LoadBalancer.Ingress = ingressFor(keep)
		if ours && fenced(&live.Status, live.Generation, marks) {
			changed = true
		}
		if !changed {
			return nil
		}
		return r.Client.Status().Update(ctx, &live)
	})
	if err != nil {
		return fmt.Errorf("withdraw addresses of %s: %w", key, err)
	}
	return r.dropMarked(ctx, key, marks)
}
