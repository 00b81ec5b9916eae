package ingress

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestRoutePath(t *testing.T) {
	exact, prefix, impl := networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific
	tests := []struct {
		name      string
		path      string
		pathType  *networkingv1.PathType
		regex     bool
		wantPath  string
		wantType  string
		wantKind  string
		wantRE    bool
		wantError string // a substring of the problem; "" for none
	}{
		// Hostile first.
		{name: "relative path", path: "api", pathType: &prefix, wantError: `path "api" on host "x.test" must start with /`},
		{name: "relative path with use-regex", path: "api.*", pathType: &impl, regex: true, wantError: "must start with /"},
		{name: "not a regular expression", path: "/(", pathType: &impl, regex: true, wantError: `path "/(" on host "x.test" is not a regular expression (use-regex, RE2 syntax)`},
		{name: "slashes around a prefix do not make another route", path: "//a//", pathType: &prefix, wantPath: "/a", wantType: "Prefix", wantKind: "Prefix"},
		// Ordinary.
		{name: "empty path is /", path: "", pathType: &prefix, wantPath: "/", wantType: "Prefix", wantKind: "Prefix"},
		{name: "unset pathType is ImplementationSpecific, matched as a prefix", path: "/a/", wantPath: "/a", wantType: "ImplementationSpecific", wantKind: "Prefix"},
		{name: "Exact keeps its trailing slash", path: "/a/", pathType: &exact, wantPath: "/a/", wantType: "Exact", wantKind: "Exact"},
		{name: "Exact stays exact with use-regex", path: "/a.*", pathType: &exact, regex: true, wantPath: "/a.*", wantType: "Exact", wantKind: "Exact"},
		{name: "use-regex makes a Prefix path a regular expression", path: "/api/v[0-9]+/", pathType: &prefix, regex: true, wantPath: "/api/v[0-9]+/", wantType: "Prefix", wantKind: "Regex", wantRE: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, pt, kind, re, problem := routePath(networkingv1.HTTPIngressPath{Path: tc.path, PathType: tc.pathType}, "x.test", tc.regex)
			if tc.wantError != "" {
				if !strings.Contains(problem, tc.wantError) {
					t.Fatalf("problem = %q, want it to contain %q", problem, tc.wantError)
				}
				return
			}
			if problem != "" {
				t.Fatalf("problem = %q, want none", problem)
			}
			if path != tc.wantPath || pt != tc.wantType || kind != tc.wantKind || (re != nil) != tc.wantRE {
				t.Errorf("routePath = (%q, %q, %q, regex %v), want (%q, %q, %q, regex %v)", path, pt, kind, re != nil, tc.wantPath, tc.wantType, tc.wantKind, tc.wantRE)
			}
		})
	}
}
