package controllers

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// ClaimName is the name of the IPAddressClaim for addr: "v4-100-64-0-1" for IPv4 and "v6-"
// followed by the 32 hex digits of the address for IPv6. Names are a bijection with
// addresses, which is what makes the API server's name uniqueness a lock on the address.
func ClaimName(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is4() {
		return "v4-" + strings.ReplaceAll(addr.String(), ".", "-")
	}
	b := addr.As16()
	return "v6-" + hex.EncodeToString(b[:])
}

// claimAll makes svc a holder of the claim of every address in asg. It returns the first
// address that another live Service holds (and that holder) when svc may not join it.
func (r *ServiceReconciler) claimAll(ctx context.Context, svc *corev1.Service, req allocator.Request, asg allocator.Assignment) (netip.Addr, holder, error) {
	want := holderFor(svc, req)
	for _, addr := range asg.Addresses {
		rival, err := r.claim(ctx, addr, asg.Pool, want)
		if err != nil {
			return netip.Addr{}, holder{}, fmt.Errorf("claim %s: %w", addr, err)
		}
		if rival != nil {
			return addr, *rival, nil
		}
	}
	return netip.Addr{}, holder{}, nil
}

// claim creates or joins the IPAddressClaim of addr. It returns a live rival holder when the
// address is taken and cannot be shared.
func (r *ServiceReconciler) claim(ctx context.Context, addr netip.Addr, pool string, want v1alpha1.ClaimHolder) (*holder, error) {
	// Fast path, no API call: the cache shows the claim as this Service's alone. A claim only
	// changes hands when its holders are gone, and any change re-enqueues this Service.
	var cached v1alpha1.IPAddressClaim
	if err := r.Client.Get(ctx, types.NamespacedName{Name: ClaimName(addr)}, &cached); err == nil &&
		len(cached.Spec.Holders) == 1 && holderEqual(cached.Spec.Holders[0], want) && cached.Spec.Pool == pool {
		return nil, nil
	}
	var rival *holder
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rival = nil
		obj := &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Name: ClaimName(addr)},
			Spec:       v1alpha1.IPAddressClaimSpec{Address: addr.String(), Pool: pool, Holders: []v1alpha1.ClaimHolder{want}},
		}
		err := r.Client.Create(ctx, obj)
		if err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Someone holds it already (perhaps this Service). Decide on the live object, never the
		// cache: a stale view here is exactly how an address would be given out twice.
		var cur v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: obj.Name}, &cur); err != nil {
			if apierrors.IsNotFound(err) {
				return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("ipaddressclaims").GroupResource(), obj.Name, err)
			}
			return err
		}
		alive, err := r.foreignHoldersAlive(ctx, cur.Spec.Holders, want)
		if err != nil {
			return err
		}
		next, rv, changed := mergeHolders(cur.Spec, want, pool, alive.has, func(o v1alpha1.ClaimHolder) bool {
			return r.Alloc.SharingConflict(addr, pool, holderOf(want).request(), holderOf(o).request()) == nil
		})
		if rv != nil {
			h := holderOf(*rv)
			rival = &h
		}
		if !changed {
			return nil
		}
		cur.Spec = next
		return r.Client.Update(ctx, &cur)
	})
	return rival, err
}

// holderAlive asks the API server whether the Service a claim names still exists and is still
// a LoadBalancer: a claim whose holder is gone is stale and may be taken over.
func (r *ServiceReconciler) holderAlive(ctx context.Context, h v1alpha1.ClaimHolder) (bool, error) {
	var svc corev1.Service
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Name}, &svc)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get claim holder %s/%s: %w", h.Namespace, h.Name, err)
	}
	return svc.UID == h.UID && r.ours(&svc), nil
}

// holderIDs is a set of claim holders, by Service and UID.
type holderIDs map[holderID]bool

type holderID struct {
	namespace, name string
	uid             types.UID
}

func (s holderIDs) has(h v1alpha1.ClaimHolder) bool {
	return s[holderID{h.Namespace, h.Name, h.UID}]
}

// foreignHoldersAlive asks the API server which of holders, other than Services named as want
// is, still exist as a LoadBalancer of this controller (holderAlive).
func (r *ServiceReconciler) foreignHoldersAlive(ctx context.Context, holders []v1alpha1.ClaimHolder, want v1alpha1.ClaimHolder) (holderIDs, error) {
	alive := holderIDs{}
	for _, h := range holders {
		if sameService(h, want) {
			continue
		}
		ok, err := r.holderAlive(ctx, h)
		if err != nil {
			return nil, err
		}
		alive[holderID{h.Namespace, h.Name, h.UID}] = ok
	}
	return alive, nil
}

// release forgets key in the allocator and drops every claim it holds.
func (r *ServiceReconciler) release(ctx context.Context, key string) error {
	r.Alloc.Release(key)
	r.setWritten(key, nil)
	return r.releaseClaimsExcept(ctx, key, nil)
}

// releaseClaimsExcept removes key from the claims it holds for addresses not in keep.
func (r *ServiceReconciler) releaseClaimsExcept(ctx context.Context, key string, keep []netip.Addr) error {
	var list v1alpha1.IPAddressClaimList
	if err := r.Client.List(ctx, &list, client.MatchingFields{claimHolderIndex: key}); err != nil {
		return fmt.Errorf("list claims of %s: %w", key, err)
	}
	released := false
	for _, c := range list.Items {
		addr, err := netip.ParseAddr(c.Spec.Address)
		if err == nil && slices.Contains(keep, addr.Unmap()) {
			continue
		}
		if err := r.dropHolder(ctx, c.Name, key); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("released claim", "claim", c.Name, "holder", key)
		r.poolChanged(c.Spec.Pool)
		released = true
	}
	if released {
		r.retryPending()
	}
	return nil
}

// dropHolder removes key from the claim's holders and deletes the claim when none is left.
func (r *ServiceReconciler) dropHolder(ctx context.Context, name, key string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		kept := slices.DeleteFunc(slices.Clone(cur.Spec.Holders), func(h v1alpha1.ClaimHolder) bool {
			return serviceKey(h.Namespace, h.Name) == key
		})
		if len(kept) == len(cur.Spec.Holders) {
			return nil
		}
		if len(kept) == 0 {
			rv := cur.ResourceVersion
			err := r.Client.Delete(ctx, &cur, client.Preconditions{ResourceVersion: &rv})
			return client.IgnoreNotFound(err)
		}
		cur.Spec.Holders = kept
		return r.Client.Update(ctx, &cur)
	})
}

// claimHolderKeys is the index function for claimHolderIndex.
func claimHolderKeys(obj client.Object) []string {
	c, ok := obj.(*v1alpha1.IPAddressClaim)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(c.Spec.Holders))
	for _, h := range c.Spec.Holders {
		keys = append(keys, serviceKey(h.Namespace, h.Name))
	}
	return keys
}
