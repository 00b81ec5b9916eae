package table

import "testing"

// TestCORSOriginWildcard: the one origin matcher of Ingress and Gateway CORS. A left-most "*"
// label matches names under the suffix, never the suffix itself, never a name that only
// contains it, and never what is not an origin (a path, user information, "null"); scheme
// and port must match. Hostile cases first.
func TestCORSOriginWildcard(t *testing.T) {
	p, ok := ParseOriginPattern("https://*.example.org")
	if !ok {
		t.Fatal("https://*.example.org not parsed")
	}
	ing := &CORS{AllowOrigins: []string{"https://*.example.org"}, Origins: []OriginPattern{p}}
	gw := &CORS{Gateway: &GatewayCORS{Origins: []OriginPattern{p}}}
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"https://evil.com/.example.org", false},
		{"https://example.org.evil.com", false},
		{"https://a.example.org@evil.com", false},
		{"null", false},
		{"https://evilexample.org", false},
		{"https://example.org", false},
		{"http://a.example.org", false},
		{"https://a.example.org:8443", false},
		{"https://*.example.org", false},
		{"https://a.example.org", true},
		{"https://A.Example.ORG:443", true},
	} {
		for _, c := range []struct {
			name string
			cors *CORS
		}{{"ingress", ing}, {"gateway", gw}} {
			if got := c.cors.AllowsOrigin(tc.origin); got != tc.want {
				t.Errorf("%s: AllowsOrigin(%q) = %v, want %v", c.name, tc.origin, got, tc.want)
			}
		}
	}
}
