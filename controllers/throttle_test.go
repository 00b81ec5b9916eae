package controllers

import (
	"testing"
	"time"
)

// TestWriteThrottle: one status write per interval and per object; the first is never held.
func TestWriteThrottle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var th writeThrottle
	steps := []struct {
		desc  string
		name  string
		at    time.Duration // after t0
		write bool          // record a write when wait is 0
		want  time.Duration
	}{
		{desc: "first write of a pool is not held", name: "a", at: 0, write: true, want: 0},
		{desc: "a nudge right after waits the rest of the interval", name: "a", at: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{desc: "another pool is not held by the first", name: "b", at: 300 * time.Millisecond, write: true, want: 0},
		{desc: "at the end of the interval the write goes", name: "a", at: time.Second, write: true, want: 0},
		{desc: "the interval restarts from the last write", name: "a", at: 1500 * time.Millisecond, want: 500 * time.Millisecond},
		{desc: "long after, no wait", name: "b", at: time.Hour, want: 0},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		got := th.wait(s.name, now, time.Second)
		if got != s.want {
			t.Fatalf("%s: wait(%s, +%v) = %v, want %v", s.desc, s.name, s.at, got, s.want)
		}
		if s.write && got == 0 {
			th.wrote(s.name, now)
		}
	}
}
