package main

import (
	"fmt"
	"math"
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

// TestBucketQuantile: the p99 bucket of a histogram's observations between two scrapes.
func TestBucketQuantile(t *testing.T) {
	const name = "metalgate_proxy_change_applied_seconds"
	scrape := func(counts ...int) string {
		les := []string{"0.005", "0.01", "0.025", "0.05", "+Inf"}
		var b strings.Builder
		for i, le := range les {
			fmt.Fprintf(&b, "%s_bucket{le=%q} %d\n", name, le, counts[i])
		}
		return b.String()
	}
	before := scrape(10, 10, 10, 10, 10) // ten observations before the changes, all fast
	for _, tc := range []struct {
		name  string
		after string
		want  float64
	}{
		{"all within 5 ms", scrape(110, 110, 110, 110, 110), 5},
		{"two of 100 slower than 10 ms", scrape(108, 108, 110, 110, 110), 25},
		{"one of 100 above every bucket", scrape(109, 109, 109, 109, 110), 5}, // p99 = the 99th
		{"two above every bucket", scrape(108, 108, 108, 108, 110), math.Inf(1)},
		{"no observation", scrape(10, 10, 10, 10, 10), -1},
		{"no histogram", "other 1\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bucketQuantile(before, tc.after, name, 0.99); got != tc.want {
				t.Errorf("bucketQuantile = %v, want %v", got, tc.want)
			}
		})
	}
}
