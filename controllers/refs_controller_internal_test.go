package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/refcheck"
)

// TestDesiredValid: the reconciler writes only when the condition or the observed generation
// differ from what the object shows, and keeps the transition time while the status stays.
func TestDesiredValid(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	missing := []refcheck.Problem{{Field: "spec.ipAddressPools[0]", Reason: v1alpha1.ReasonPoolNotFound, Message: `IPAddressPool "x" not found`}}
	valid := func(status metav1.ConditionStatus, reason, msg string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionValid, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: then}}
	}
	falseMsg := `spec.ipAddressPools[0]: IPAddressPool "x" not found`
	tests := []struct {
		name      string
		current   []metav1.Condition
		observed  int64
		problems  []refcheck.Problem
		gen       int64
		wantWrite bool
		wantKeep  bool // lastTransitionTime kept
	}{
		{name: "no condition yet: write", observed: 0, problems: missing, gen: 1, wantWrite: true},
		{name: "same condition, same generation: no write", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, falseMsg, 3),
			observed: 3, problems: missing, gen: 3, wantKeep: true},
		{name: "same condition, kind without observedGeneration: no write", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, falseMsg, 3),
			observed: -1, problems: missing, gen: 3, wantKeep: true},
		{name: "status.observedGeneration behind: write, transition kept", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, falseMsg, 3),
			observed: 2, problems: missing, gen: 3, wantWrite: true, wantKeep: true},
		{name: "new generation, same problems: write, transition kept", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, falseMsg, 3),
			observed: 3, problems: missing, gen: 4, wantWrite: true, wantKeep: true},
		{name: "resolved: write, new transition", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, falseMsg, 3),
			observed: 3, gen: 3, wantWrite: true},
		{name: "another message, same status: write, transition kept", current: valid(metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, "old", 3),
			observed: 3, problems: missing, gen: 3, wantWrite: true, wantKeep: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, write := desiredValid(tc.current, tc.observed, tc.problems, tc.gen)
			if write != tc.wantWrite {
				t.Errorf("write = %v, want %v", write, tc.wantWrite)
			}
			want := refcheck.Condition(tc.problems, tc.gen)
			if got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.ObservedGeneration != tc.gen {
				t.Errorf("condition = %+v, want %+v", got, want)
			}
			if kept := got.LastTransitionTime.Equal(&then); kept != tc.wantKeep {
				t.Errorf("lastTransitionTime %v kept = %v, want %v", got.LastTransitionTime, kept, tc.wantKeep)
			}
			if got.LastTransitionTime.IsZero() {
				t.Error("lastTransitionTime unset")
			}
		})
	}
}
