package bgp

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The deny-set decisions of SetAdvertisements, apart from GoBGP.

func prefixSet(pfxs ...string) map[netip.Prefix]struct{} {
	out := map[netip.Prefix]struct{}{}
	for _, p := range pfxs {
		out[netip.MustParsePrefix(p)] = struct{}{}
	}
	return out
}

func prefixStrings(pfxs []netip.Prefix) []string {
	var out []string
	for _, p := range pfxs {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

func setKeys(m map[netip.Prefix]struct{}) []string {
	var out []string
	for p := range m {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

const (
	pfxA = "100.64.0.1/32"
	pfxB = "100.64.0.2/32"
	pfxC = "2001:db8::1/128"
)

func TestPeerDenies(t *testing.T) {
	toAll := &pathEntry{all: true}
	toR1 := &pathEntry{peers: map[string]bool{"r1": true}}
	want := func(m map[string]*pathEntry) map[netip.Prefix]*pathEntry {
		out := map[netip.Prefix]*pathEntry{}
		for p, e := range m {
			out[netip.MustParsePrefix(p)] = e
		}
		return out
	}
	tests := []struct {
		name       string
		peer       string
		want       map[netip.Prefix]*pathEntry
		cur        map[netip.Prefix]struct{}
		advertised []string
		wantNext   []string
		wantAdd    []string
		wantReset  bool
	}{
		// Hostile first: a prefix that is already out there must reach or leave the peer now.
		{"an advertised prefix newly denied: deny it and reset", "r2", want(map[string]*pathEntry{pfxA: toR1}), prefixSet(), []string{pfxA},
			[]string{pfxA}, []string{pfxA}, true},
		{"an advertised prefix no longer denied: reset so the peer gets it", "r2", want(map[string]*pathEntry{pfxA: toAll}), prefixSet(pfxA), []string{pfxA},
			nil, nil, true},
		{"a new prefix denied before it is advertised: no reset needed", "r2", want(map[string]*pathEntry{pfxA: toR1}), prefixSet(), nil,
			[]string{pfxA}, []string{pfxA}, false},
		{"already denied: nothing to add, no reset", "r2", want(map[string]*pathEntry{pfxA: toR1, pfxC: toR1}), prefixSet(pfxA, pfxC), []string{pfxA, pfxC},
			[]string{pfxA, pfxC}, nil, false},
		{"allowed and was not denied: nothing", "r1", want(map[string]*pathEntry{pfxA: toR1, pfxB: toAll}), prefixSet(), []string{pfxA, pfxB},
			nil, nil, false},
		{"denials of prefixes no longer wanted are not in next (lifted later)", "r2", want(map[string]*pathEntry{pfxB: toAll}), prefixSet(pfxA), []string{pfxA},
			nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			adv := prefixSet(tc.advertised...)
			next, add, reset := peerDenies(tc.peer, tc.want, tc.cur, func(p netip.Prefix) bool { _, ok := adv[p]; return ok })
			if diff := cmp.Diff(tc.wantNext, setKeys(next)); diff != "" {
				t.Errorf("next deny set (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAdd, prefixStrings(add)); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			if reset != tc.wantReset {
				t.Errorf("reset = %v, want %v", reset, tc.wantReset)
			}
		})
	}
}

func TestLiftedDenies(t *testing.T) {
	entry := &pathEntry{all: true}
	tests := []struct {
		name       string
		cur, next  map[netip.Prefix]struct{}
		want       []string // prefixes still wanted
		advertised []string
		wantLifted []string
	}{
		{"a withdrawal that failed keeps its denial", prefixSet(pfxA), prefixSet(), nil, []string{pfxA}, nil},
		{"withdrawn and no longer wanted: lifted", prefixSet(pfxA), prefixSet(), nil, nil, []string{pfxA}},
		{"wanted and now allowed: lifted", prefixSet(pfxA), prefixSet(), []string{pfxA}, []string{pfxA}, []string{pfxA}},
		{"still denied: kept", prefixSet(pfxA, pfxB), prefixSet(pfxB), nil, nil, []string{pfxA}},
		{"nothing denied", prefixSet(), prefixSet(), []string{pfxA}, []string{pfxA}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := map[netip.Prefix]*pathEntry{}
			for _, p := range tc.want {
				want[netip.MustParsePrefix(p)] = entry
			}
			adv := prefixSet(tc.advertised...)
			got := liftedDenies(tc.cur, tc.next, want, func(p netip.Prefix) bool { _, ok := adv[p]; return ok })
			if diff := cmp.Diff(tc.wantLifted, prefixStrings(got)); diff != "" {
				t.Errorf("lifted (-want +got):\n%s", diff)
			}
		})
	}
}
