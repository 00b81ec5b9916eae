package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

func TestMergeHolders(t *testing.T) {
	h := func(ns, name, uid string, ports ...int32) v1alpha1.ClaimHolder {
		c := v1alpha1.ClaimHolder{Namespace: ns, Name: name, UID: types.UID(uid), SharingKey: "k"}
		for _, p := range ports {
			c.Ports = append(c.Ports, v1alpha1.ClaimPort{Protocol: corev1.ProtocolTCP, Port: p})
		}
		return c
	}
	want := h("ns", "web", "u1", 80)
	everyoneAlive := func(v1alpha1.ClaimHolder) bool { return true }
	noneAlive := func(v1alpha1.ClaimHolder) bool { return false }
	shareAll := func(v1alpha1.ClaimHolder) bool { return true }
	shareNone := func(v1alpha1.ClaimHolder) bool { return false }
	spec := func(pool string, holders ...v1alpha1.ClaimHolder) v1alpha1.IPAddressClaimSpec {
		return v1alpha1.IPAddressClaimSpec{Address: "192.0.2.1", Pool: pool, Holders: holders}
	}

	tests := []struct {
		name        string
		cur         v1alpha1.IPAddressClaimSpec
		pool        string
		alive       func(v1alpha1.ClaimHolder) bool
		shareable   func(v1alpha1.ClaimHolder) bool
		wantNext    v1alpha1.IPAddressClaimSpec
		wantRival   *v1alpha1.ClaimHolder
		wantChanged bool
	}{
		// Hostile cases first: someone else holds the address.
		{
			name: "a live holder that may not share is the rival; want stays out",
			cur:  spec("p", h("other", "db", "u9", 80)), pool: "p", alive: everyoneAlive, shareable: shareNone,
			wantNext: spec("p", h("other", "db", "u9", 80)), wantRival: ptr.To(h("other", "db", "u9", 80)),
		},
		{
			name: "the first holder that may not share is the rival, stale ones are dropped",
			cur:  spec("p", h("gone", "x", "u7"), h("a", "s1", "u2", 80), h("b", "s2", "u3", 80)), pool: "p",
			alive:     func(c v1alpha1.ClaimHolder) bool { return c.Namespace != "gone" },
			shareable: func(c v1alpha1.ClaimHolder) bool { return c.Name == "s1" },
			wantNext:  spec("p", h("a", "s1", "u2", 80), h("b", "s2", "u3", 80)), wantRival: ptr.To(h("b", "s2", "u3", 80)),
			wantChanged: true,
		},
		{
			name: "a rival does not move the claim to want's pool",
			cur:  spec("old", h("other", "db", "u9")), pool: "new", alive: everyoneAlive, shareable: shareNone,
			wantNext: spec("old", h("other", "db", "u9")), wantRival: ptr.To(h("other", "db", "u9")),
		},
		{
			name: "an earlier Service of the same name (other UID) is not a holder any more",
			cur:  spec("p", h("ns", "web", "u0", 80)), pool: "p", alive: everyoneAlive, shareable: shareNone,
			wantNext: spec("p", want), wantChanged: true,
		},
		{
			name: "stale holders are dropped and want takes the claim and its pool",
			cur:  spec("old", h("gone", "a", "u5"), h("gone", "b", "u6")), pool: "new", alive: noneAlive, shareable: shareNone,
			wantNext: spec("new", want), wantChanged: true,
		},
		{
			name: "a live holder that may share: want joins after it, the pool stays",
			cur:  spec("old", h("ns", "api", "u2", 443)), pool: "new", alive: everyoneAlive, shareable: shareAll,
			wantNext: spec("old", h("ns", "api", "u2", 443), want), wantChanged: true,
		},
		// Want holds it already.
		{
			name: "want alone, nothing to change",
			cur:  spec("p", want), pool: "p", alive: noneAlive, shareable: shareNone,
			wantNext: spec("p", want),
		},
		{
			name: "want alone, other ports: its entry is updated in place",
			cur:  spec("p", h("ns", "web", "u1", 8080)), pool: "p", alive: noneAlive, shareable: shareNone,
			wantNext: spec("p", want), wantChanged: true,
		},
		{
			name: "want alone, pool changed: the claim follows",
			cur:  spec("old", want), pool: "new", alive: noneAlive, shareable: shareNone,
			wantNext: spec("new", want), wantChanged: true,
		},
		{
			// Issue #30, 4: two controllers must not leave a sharing key's address with a
			// Service that may no longer share it (its ports or key changed since it joined).
			name: "want among live sharers it may no longer share with: the sharer is the rival, nothing changes",
			cur:  spec("old", h("ns", "api", "u2", 80), h("ns", "web", "u1", 443)), pool: "new", alive: everyoneAlive, shareable: shareNone,
			wantNext: spec("old", h("ns", "api", "u2", 80), h("ns", "web", "u1", 443)), wantRival: ptr.To(h("ns", "api", "u2", 80)),
		},
		{
			name: "want among live sharers: kept in its place, pool stays",
			cur:  spec("old", h("ns", "api", "u2", 443), want), pool: "new", alive: everyoneAlive, shareable: shareAll,
			wantNext: spec("old", h("ns", "api", "u2", 443), want),
		},
		{
			name: "want marked releasing by another controller: the mark is lifted (the releaser's drop then fails)",
			cur:  spec("p", func() v1alpha1.ClaimHolder { r := want; r.Releasing = true; return r }()), pool: "p", alive: noneAlive, shareable: shareNone,
			wantNext: spec("p", want), wantChanged: true,
		},
		{
			name: "want among stale sharers: they go, the pool follows",
			cur:  spec("old", h("ns", "api", "u2", 443), want), pool: "new", alive: noneAlive, shareable: shareNone,
			wantNext: spec("new", want), wantChanged: true,
		},
		{
			name: "an empty claim is taken",
			cur:  spec("p"), pool: "p", alive: noneAlive, shareable: shareNone,
			wantNext: spec("p", want), wantChanged: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive := func(c v1alpha1.ClaimHolder) bool {
				if sameService(c, want) {
					t.Errorf("alive asked about want's own Service %s/%s", c.Namespace, c.Name)
				}
				return tc.alive(c)
			}
			next, rival, changed := mergeHolders(tc.cur, want, tc.pool, alive, tc.shareable)
			if diff := cmp.Diff(tc.wantNext, next); diff != "" {
				t.Errorf("next spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRival, rival); diff != "" {
				t.Errorf("rival (-want +got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
		})
	}
}

// TestMergeHoldersLeavesInputAlone: the caller's live object is only replaced by next when
// it is written, so the merge must not edit it in place.
func TestMergeHoldersLeavesInputAlone(t *testing.T) {
	other := v1alpha1.ClaimHolder{Namespace: "ns", Name: "web", UID: "u0"}
	cur := v1alpha1.IPAddressClaimSpec{Pool: "old", Holders: []v1alpha1.ClaimHolder{other}}
	want := v1alpha1.ClaimHolder{Namespace: "ns", Name: "web", UID: "u1"}
	next, _, _ := mergeHolders(cur, want, "new", func(v1alpha1.ClaimHolder) bool { return true },
		func(v1alpha1.ClaimHolder) bool { return true })
	if cur.Pool != "old" || len(cur.Holders) != 1 || !holderEqual(cur.Holders[0], other) {
		t.Errorf("input changed to %+v", cur)
	}
	if len(next.Holders) != 1 || next.Holders[0].UID != "u1" {
		t.Errorf("next holders = %+v, want only u1", next.Holders)
	}
}
