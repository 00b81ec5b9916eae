package controlplane

import (
	"testing"
	"time"
)

// The status publisher's per-Ingress bookkeeping (status.go), stepped through like the
// publisher does: each step is one overwrite of our value by another writer.
func TestStatusStateConflicts(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const window, base, most = time.Minute, time.Second, 8 * time.Second
	type step struct {
		at          time.Duration // after t0
		wantCount   int
		wantBackoff time.Duration // after backOff (called from the second overwrite on)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"overwrites within the window count up; backoff doubles up to the cap", []step{
			{0, 1, 0},
			{time.Second, 2, base},
			{2 * time.Second, 3, 2 * base},
			{3 * time.Second, 4, 4 * base},
			{4 * time.Second, 5, most},
			{5 * time.Second, 6, most},
		}},
		{"an overwrite older than the window is forgotten", []step{
			{0, 1, 0},
			{window + time.Second, 1, 0},
			{window + 2*time.Second, 2, base},
		}},
		{"exactly one window ago is outside it", []step{
			{0, 1, 0},
			{window, 1, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st statusState
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				n := st.countOverwrite(now, window)
				if n != s.wantCount {
					t.Fatalf("step %d: countOverwrite = %d, want %d", i, n, s.wantCount)
				}
				if n >= 2 {
					st.backOff(now, base, most)
				}
				if st.backoff != s.wantBackoff {
					t.Fatalf("step %d: backoff = %v, want %v", i, st.backoff, s.wantBackoff)
				}
				if s.wantBackoff > 0 && !st.notBefore.Equal(now.Add(s.wantBackoff)) {
					t.Fatalf("step %d: notBefore = %v, want now+%v", i, st.notBefore, s.wantBackoff)
				}
			}
		})
	}
}

func TestSyncRoundWake(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		wakes []time.Time
		want  time.Time
	}{
		{"nothing asked: no wake-up", nil, time.Time{}},
		{"zero asks for nothing", []time.Time{{}, {}}, time.Time{}},
		{"the earliest wins, in any order", []time.Time{t0.Add(3 * time.Second), {}, t0.Add(time.Second), t0.Add(2 * time.Second)}, t0.Add(time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r syncRound
			for _, w := range tc.wakes {
				r.wake(w)
			}
			if !r.next.Equal(tc.want) {
				t.Errorf("next = %v, want %v", r.next, tc.want)
			}
		})
	}
}
