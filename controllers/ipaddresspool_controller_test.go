package controllers

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

func TestDesiredPoolStatus(t *testing.T) {
	pool := func(mut func(*v1alpha1.IPAddressPool)) *v1alpha1.IPAddressPool {
		p := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 7}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	overlapAB := allocator.Overlap{PoolA: "a", PoolB: "b", Prefix: "192.0.2.0/30"}
	overlapBC := allocator.Overlap{PoolA: "b", PoolB: "c", Prefix: "198.51.100.0/30"}
	stats := allocator.PoolStats{AssignedV4: 1, AvailableV4: 3, AssignedV6: 2, AvailableV6: 100}
	tests := []struct {
		name        string
		pool        *v1alpha1.IPAddressPool
		invalid     error
		known       bool
		overlaps    []allocator.Overlap
		wantValid   metav1.ConditionStatus
		wantMessage string // of Valid
		wantOverlap metav1.ConditionStatus
		wantOvMsg   string
		wantV4      [2]int64 // assigned, available
	}{
		// Hostile first.
		{name: "left out by the allocator: Invalid with its reason, counts untouched",
			pool:    pool(func(p *v1alpha1.IPAddressPool) { p.Status.AssignedIPv4, p.Status.AvailableIPv4 = 5, 5 }),
			invalid: errors.New(`spec.addresses[0]: "10.0.0.9-10.0.0.1": first after last`), known: false,
			wantValid: metav1.ConditionFalse, wantMessage: `spec.addresses[0]: "10.0.0.9-10.0.0.1": first after last`,
			wantOverlap: metav1.ConditionFalse, wantOvMsg: "no other pool has any of these addresses", wantV4: [2]int64{5, 5}},
		{name: "overlapping another pool: named with the shared range",
			pool: pool(nil), known: true, overlaps: []allocator.Overlap{overlapBC, overlapAB},
			wantValid: metav1.ConditionTrue, wantMessage: "the allocator uses this pool",
			wantOverlap: metav1.ConditionTrue,
			wantOvMsg:   `addresses also in pool "b" (192.0.2.0/30): an address in several pools is assigned from the first by priority, then name`,
			wantV4:      [2]int64{1, 3}},
		{name: "overlaps of other pools only: no overlap here",
			pool: pool(nil), known: true, overlaps: []allocator.Overlap{overlapBC},
			wantValid: metav1.ConditionTrue, wantMessage: "the allocator uses this pool",
			wantOverlap: metav1.ConditionFalse, wantOvMsg: "no other pool has any of these addresses", wantV4: [2]int64{1, 3}},
		{name: "valid, counted",
			pool: pool(nil), known: true,
			wantValid: metav1.ConditionTrue, wantMessage: "the allocator uses this pool",
			wantOverlap: metav1.ConditionFalse, wantOvMsg: "no other pool has any of these addresses", wantV4: [2]int64{1, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pool.Status.DeepCopy()
			got, overlap := desiredPoolStatus(tc.pool, tc.invalid, stats, tc.known, tc.overlaps)
			v := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionValid)
			o := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionOverlap)
			if v == nil || o == nil {
				t.Fatalf("conditions = %+v, want Valid and Overlapping", got.Conditions)
			}
			if v.Status != tc.wantValid || v.Message != tc.wantMessage || v.ObservedGeneration != 7 {
				t.Errorf("Valid = %s %q (generation %d), want %s %q (generation 7)", v.Status, v.Message, v.ObservedGeneration, tc.wantValid, tc.wantMessage)
			}
			if o.Status != tc.wantOverlap || o.Message != tc.wantOvMsg || overlap.Status != o.Status || overlap.Message != o.Message {
				t.Errorf("Overlapping = %s %q (returned %s %q), want %s %q", o.Status, o.Message, overlap.Status, overlap.Message, tc.wantOverlap, tc.wantOvMsg)
			}
			if got.AssignedIPv4 != tc.wantV4[0] || got.AvailableIPv4 != tc.wantV4[1] {
				t.Errorf("IPv4 assigned/available = %d/%d, want %d/%d", got.AssignedIPv4, got.AvailableIPv4, tc.wantV4[0], tc.wantV4[1])
			}
			if tc.known && (got.AssignedIPv6 != 2 || got.AvailableIPv6 != 100) {
				t.Errorf("IPv6 assigned/available = %d/%d, want 2/100", got.AssignedIPv6, got.AvailableIPv6)
			}
			if len(tc.pool.Status.Conditions) != len(before.Conditions) || tc.pool.Status.AssignedIPv4 != before.AssignedIPv4 {
				t.Errorf("the pool's own status changed: %+v", tc.pool.Status)
			}
		})
	}
}
