package dataplane

import (
	"strings"
	"testing"
)

func TestNormalizePath(t *testing.T) {
	reject := pathPolicy{slashes: EscapedSlashesReject, mergeSlashes: true}
	keep := pathPolicy{slashes: EscapedSlashesKeep, mergeSlashes: true}
	decode := pathPolicy{slashes: EscapedSlashesDecode, mergeSlashes: true}
	noMerge := pathPolicy{slashes: EscapedSlashesReject}
	for _, tc := range []struct {
		name    string
		policy  pathPolicy
		in      string
		want    string
		wantErr error
	}{
		// Traversal: every spelling of ".." is resolved before routing.
		{"dot-dot", reject, "/public/../admin", "/admin", nil},
		{"encoded dot-dot", reject, "/public/%2e%2e/admin", "/admin", nil},
		{"upper-case encoded dot-dot", reject, "/public/%2E%2E/admin", "/admin", nil},
		{"half-encoded dot-dot", reject, "/public/.%2e/admin", "/admin", nil},
		{"dot-dot past the root", reject, "/../../etc/passwd", "/etc/passwd", nil},
		{"dot segment", reject, "/a/./b", "/a/b", nil},
		{"trailing dot-dot", reject, "/a/b/..", "/a/", nil},
		{"trailing dot", reject, "/a/.", "/a/", nil},
		{"only dot-dot", reject, "/..", "/", nil},
		{"dots inside a name stay", reject, "/a..b/.c/..d", "/a..b/.c/..d", nil},
		{"triple dot is a name", reject, "/a/.../b", "/a/.../b", nil},
		// Duplicate slashes.
		{"double slash", reject, "/public//admin", "/public/admin", nil},
		{"leading double slash", reject, "//admin", "/admin", nil},
		{"trailing slash kept", reject, "/a/b/", "/a/b/", nil},
		{"double slash kept when asked", noMerge, "/a//b", "/a//b", nil},
		// Encoded and bare slashes and backslashes.
		{"encoded slash refused", reject, "/public/..%2fadmin", "", errEscapedSlash},
		{"encoded backslash refused", reject, "/public%5C..%5Cadmin", "", errEscapedSlash},
		{"bare backslash refused", reject, "/public\\..\\admin", "", errEscapedSlash},
		{"encoded slash kept", keep, "/a%2fb/../c", "/c", nil},
		{"encoded slash kept inside a segment", keep, "/a%2F..%2Fb", "/a%2F..%2Fb", nil},
		{"encoded slash decoded", decode, "/public/..%2fadmin", "/admin", nil},
		{"encoded backslash decoded", decode, "/public%5C..%5Cadmin", "/admin", nil},
		{"bare backslash decoded", decode, "/public\\..\\admin", "/admin", nil},
		// Escapes: unreserved decoded, others upper-cased, broken ones refused.
		{"unreserved decoded", reject, "/%7Euser/%41%62c", "/~user/Abc", nil},
		{"reserved kept, hex upper-cased", reject, "/a%3fb%2a", "/a%3Fb%2A", nil},
		{"truncated escape", reject, "/a%2", "", errBadEscape},
		{"bad hex", reject, "/a%zz", "", errBadEscape},
		// Left alone.
		{"plain", reject, "/a/b/c.html", "/a/b/c.html", nil},
		{"root", reject, "/", "/", nil},
		{"asterisk", reject, "*", "*", nil},
		{"empty", reject, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := tc.policy.normalizePath(tc.in)
			if err != tc.wantErr {
				t.Fatalf("normalizePath(%q) error %v, want %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got != tc.want || changed != (got != tc.in) {
				t.Errorf("normalizePath(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
			}
		})
	}
}

// FuzzNormalizePath: whatever the path, the result starts with '/', has no dot-segment and
// no "//", and normalising it again changes nothing.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"/a/../b", "/%2e%2e/x", "//a//b/", "/a%2F..%2Fb", "/./.././", "/a\\b", "/%41%7e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, p := range []pathPolicy{{slashes: EscapedSlashesReject, mergeSlashes: true}, {slashes: EscapedSlashesDecode, mergeSlashes: true}, {slashes: EscapedSlashesKeep, mergeSlashes: true}} {
			out, _, err := p.normalizePath(in)
			if err != nil || in == "" || in[0] != '/' {
				continue
			}
			if out[0] != '/' || strings.Contains(out, "//") || strings.Contains(out+"/", "/./") || strings.Contains(out+"/", "/../") {
				t.Fatalf("%s: normalizePath(%q) = %q", p.slashes, in, out)
			}
			again, changed, err := p.normalizePath(out)
			if err != nil || changed {
				t.Fatalf("%s: normalizePath(%q) = %q, again %q, %v", p.slashes, in, out, again, err)
			}
		}
	})
}
