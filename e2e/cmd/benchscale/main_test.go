package main

import (
	"strings"
	"testing"
)

// TestBuildLine: the summary says how the proxy applied the changes, from the counters' growth
// between two scrapes, and never prints a mean of builds that did not happen.
func TestBuildLine(t *testing.T) {
	before := "# HELP x\nmetalgate_proxy_table_builds_total 3\nmetalgate_proxy_table_patches_total 0\n"
	for _, tc := range []struct {
		name, after string
		want        []string
		notWant     string
	}{
		{"patches only", "\nmetalgate_proxy_table_builds_total 3\nmetalgate_proxy_table_patches_total 100\n",
			[]string{"100 endpoint patches", "no full build"}, "mean -"},
		{"some full builds", "\nmetalgate_proxy_table_builds_total 5\nmetalgate_proxy_table_patches_total 98\n",
			[]string{"98 endpoint patches", "2 full builds, mean 12.5 ms"}, "no full build"},
		{"counters missing", "\nsomething_else 1\n",
			[]string{"-1 endpoint patches", "-1 full builds"}, "no full build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bench{builds: 12.5, applied: 3,
				fullBuilds: counterDelta(before, tc.after, "metalgate_proxy_table_builds_total"),
				patches:    counterDelta(before, tc.after, "metalgate_proxy_table_patches_total")}
			got := b.buildLine()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("buildLine() = %q, want it to contain %q", got, w)
				}
			}
			if strings.Contains(got, tc.notWant) {
				t.Errorf("buildLine() = %q, must not contain %q", got, tc.notWant)
			}
		})
	}
}
