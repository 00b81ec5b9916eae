package controllers

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// The holders of an IPAddressClaim: who they are, and the pure rule by which a Service joins
// a claim (mergeHolders). The API calls around it are in claims.go.

// holder is one entry of a claim's holder list, with its allocator key.
type holder struct {
	v1alpha1.ClaimHolder
	key string
}

// holderOf is h with its allocator key.
func holderOf(h v1alpha1.ClaimHolder) holder {
	return holder{ClaimHolder: h, key: serviceKey(h.Namespace, h.Name)}
}

// holderFor is the claim holder entry of svc asking with req.
func holderFor(svc *corev1.Service, req allocator.Request) v1alpha1.ClaimHolder {
	h := v1alpha1.ClaimHolder{
		Namespace:  svc.Namespace,
		Name:       svc.Name,
		UID:        svc.UID,
		SharingKey: req.SharingKey,
		BackendKey: req.BackendKey,
	}
	for _, p := range req.Ports {
		h.Ports = append(h.Ports, v1alpha1.ClaimPort{Protocol: corev1.Protocol(p.Protocol), Port: p.Port})
	}
	return h
}

// request is what the allocator needs to know of a rival holder to keep its address taken and
// to judge sharing with it.
func (h holder) request() allocator.Request {
	req := allocator.Request{Key: h.key, Namespace: h.Namespace, SharingKey: h.SharingKey, BackendKey: h.BackendKey}
	for _, p := range h.Ports {
		req.Ports = append(req.Ports, allocator.Port{Protocol: string(p.Protocol), Port: p.Port})
	}
	return req
}

func holderEqual(a, b v1alpha1.ClaimHolder) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID && a.SharingKey == b.SharingKey &&
		a.BackendKey == b.BackendKey && slices.Equal(a.Ports, b.Ports) && a.Releasing == b.Releasing
}

// sameService reports whether a and b name the same Service, whatever its UID.
func sameService(a, b v1alpha1.ClaimHolder) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name
}

// mergeHolders decides a claim's next spec when want asks to hold it for pool. cur is the
// claim as the API server has it now; alive says whether a holder other than want's Service
// still holds the address (asked of the API server, never the cache); shareable says whether
// want may share the address with a live holder.
//
//	holder                                   next holders
//	want's Service, same UID                 want (its current ports and keys; a releasing
//	                                         mark is lifted), unless another kept holder is not
//	                                         shareable with want as it is now: then that holder
//	                                         is the rival and the claim stays as it is
//	want's Service, another UID              dropped: an earlier Service of that name
//	another Service, alive                   kept
//	another Service, not alive               dropped: stale
//	want, not yet a holder                   appended, unless a kept holder is not shareable:
//	                                         then that holder is the rival and want stays out
//
// The claim's pool follows pool when want is its only holder. changed reports whether next
// differs from cur (then it must be written). With a rival, next still drops stale holders,
// except in the first case, where nothing changes: want's Service keeps its entry until its
// own withdrawal (with the fence) removes it.
func mergeHolders(cur v1alpha1.IPAddressClaimSpec, want v1alpha1.ClaimHolder, pool string,
	alive, shareable func(v1alpha1.ClaimHolder) bool) (next v1alpha1.IPAddressClaimSpec, rival *v1alpha1.ClaimHolder, changed bool) {
	next = cur
	var live []v1alpha1.ClaimHolder
	mine := false
	for _, h := range cur.Holders {
		switch {
		case sameService(h, want) && h.UID == want.UID:
			mine = true
			if !holderEqual(h, want) {
				changed = true
			}
			live = append(live, want)
		case sameService(h, want):
			changed = true
		case alive(h):
			live = append(live, h)
		default:
			changed = true
		}
	}
	// Whether want joins or stays, every other holder must be able to share with it as it is
	// now: a Service whose ports or sharing key changed may no longer (issue #30, 4).
	for i := range live {
		if sameService(live[i], want) || shareable(live[i]) {
			continue
		}
		if mine {
			return cur, &live[i], false
		}
		next.Holders = live
		return next, &live[i], changed
	}
	if !mine {
		live = append(live, want)
		changed = true
	}
	if len(live) == 1 && cur.Pool != pool {
		next.Pool = pool
		changed = true
	}
	next.Holders = live
	return next, rival, changed
}
