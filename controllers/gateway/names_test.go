package gateway

import (
	"regexp"
	"strings"
	"testing"
)

var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
var labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

func TestServiceName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name, namespace, gateway string
		want                     string // "" when only the form is checked
	}{
		{name: "short", namespace: "team-a", gateway: "web", want: "gw-team-a-web-" + hash("team-a/web")},
		{name: "dots become dashes", namespace: "ns", gateway: "web.example.com", want: "gw-ns-web-example-com-" + hash("ns/web.example.com")},
		{name: "long namespace and name are cut", namespace: long, gateway: strings.Repeat("b", 253)},
		{name: "cut ends on a dash", namespace: strings.Repeat("c", 50), gateway: "x"},
		{name: "cut ends on a dot", namespace: strings.Repeat("d", 49), gateway: "e.f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ServiceName(tc.namespace, tc.gateway)
			if tc.want != "" && got != tc.want {
				t.Errorf("ServiceName(%q, %q) = %q, want %q", tc.namespace, tc.gateway, got, tc.want)
			}
			if len(got) > 63 || !dns1035.MatchString(got) {
				t.Errorf("ServiceName(%q, %q) = %q (%d characters): not a valid Service name", tc.namespace, tc.gateway, got, len(got))
			}
			if again := ServiceName(tc.namespace, tc.gateway); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

// TestServiceNameCollisions: names that read alike once cut or once '.' and '-' are mixed
// (or the namespace/name boundary moves) still get different Services.
func TestServiceNameCollisions(t *testing.T) {
	long := strings.Repeat("n", 60)
	pairs := [][4]string{
		{long, "gateway-one", long, "gateway-two"},
		{"a-b", "c", "a", "b-c"},
		{"ns", "web.x", "ns", "web-x"},
	}
	for _, p := range pairs {
		a, b := ServiceName(p[0], p[1]), ServiceName(p[2], p[3])
		if a == b {
			t.Errorf("%s/%s and %s/%s both get Service %q", p[0], p[1], p[2], p[3], a)
		}
	}
}

func TestLabelValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"web", "web"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{strings.Repeat("a", 64), strings.Repeat("a", 54) + "-" + hash(strings.Repeat("a", 64))},
		{strings.Repeat("a", 53) + "." + strings.Repeat("b", 20), strings.Repeat("a", 53) + "-" + hash(strings.Repeat("a", 53)+"."+strings.Repeat("b", 20))},
	} {
		got := LabelValue(tc.in)
		if got != tc.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > 63 || !labelValue.MatchString(got) {
			t.Errorf("LabelValue(%q) = %q: not a valid label value", tc.in, got)
		}
	}
}
