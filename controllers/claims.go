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
		alive, err := r.foreignHoldersAlive(ctx, addr, cur.Spec.Holders, want)
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

// holderAlive asks the API server whether the Service a claim names still exists and still
// holds the address: a LoadBalancer of this controller, or any Service whose status still
// shows addr (its own reconcile withdraws it first, with the fence: taking the claim over now
// would put the address in two statuses). A claim whose holder is gone is stale and may be
// taken over.
func (r *ServiceReconciler) holderAlive(ctx context.Context, addr netip.Addr, h v1alpha1.ClaimHolder) (bool, error) {
	var svc corev1.Service
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Name}, &svc)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get claim holder %s/%s: %w", h.Namespace, h.Name, err)
	}
	return svc.UID == h.UID && (r.ours(&svc) || slices.Contains(statusAddresses(&svc), addr.Unmap())), nil
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

// foreignHoldersAlive asks the API server which of the holders of addr, other than Services
// named as want is, still hold it (holderAlive).
func (r *ServiceReconciler) foreignHoldersAlive(ctx context.Context, addr netip.Addr, holders []v1alpha1.ClaimHolder, want v1alpha1.ClaimHolder) (holderIDs, error) {
	alive := holderIDs{}
	for _, h := range holders {
		if sameService(h, want) {
			continue
		}
		ok, err := r.holderAlive(ctx, addr, h)
		if err != nil {
			return nil, err
		}
		alive[holderID{h.Namespace, h.Name, h.UID}] = ok
	}
	return alive, nil
}

// dropHolder removes key's entry for uid from the claim's holders and deletes the claim when
// none is left. Only for holders whose Service is gone or was replaced, or is no longer ours
// and does not show the address (bootstrap): no status of theirs can show it, so no fence is
// needed. Every other release goes through withdraw. An entry of the same name with another
// UID (the Service that replaced it) stays.
func (r *ServiceReconciler) dropHolder(ctx context.Context, name, key string, uid types.UID) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.IPAddressClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		kept := slices.DeleteFunc(slices.Clone(cur.Spec.Holders), func(h v1alpha1.ClaimHolder) bool {
			return serviceKey(h.Namespace, h.Name) == key && h.UID == uid
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
