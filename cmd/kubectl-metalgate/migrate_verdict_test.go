package main

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestMigrateNotOneToOne pins the annotations whose ingress-nginx behaviour the proxy does not
// reproduce: migrate reports each as changed, with what differs, never one to one. Each row
// also shows the difference on the proxy's own table (the routes built from the migrated
// Ingress, as migrate builds them), so a row fails — and its verdict must go back to one to one —
// when the proxy comes to behave as ingress-nginx did.
func TestMigrateNotOneToOne(t *testing.T) {
	corsAllows := func(origin string) func(*table.Route) any {
		return func(r *table.Route) any {
			return r.Options.Policy.CORS != nil && r.Options.Policy.CORS.AllowsOrigin(origin)
		}
	}
	redirectCode := func(r *table.Route) any {
		if r.Options.Policy.Redirect == nil {
			return nil
		}
		return r.Options.Policy.Redirect.Code
	}
	tests := []struct {
		name string
		ann  map[string]string // nginx annotations, without the prefix
		key  string            // the annotation whose line is checked, without the prefix
		says string            // a part of its line
		// What the proxy does with the migrated Ingress, unlike ingress-nginx: got(route) is
		// want (when got is set), and refused is the annotation (metalgate.io name) it
		// refuses with InvalidAnnotation ("": none).
		got     func(*table.Route) any
		want    any
		refused string
	}{
		{"a CORS wildcard spans several labels (ingress-nginx: one)",
			map[string]string{"enable-cors": "true", "cors-allow-origin": "https://*.example.org"},
			"cors-allow-origin", "exactly one", corsAllows("https://a.b.example.org"), true, ""},
		{"a CORS list with null allows nothing (ingress-nginx: skipped the entry)",
			map[string]string{"enable-cors": "true", "cors-allow-origin": "https://app.example.org, null"},
			"cors-allow-origin", "allows no origin at all", corsAllows("https://app.example.org"), false, "cors-allow-origin"},
		{"permanent-redirect-code 302 (ingress-nginx: 300 to 308)",
			map[string]string{"permanent-redirect": "https://new.example.org/", "permanent-redirect-code": "302"},
			"permanent-redirect-code", "from 300 to 308", redirectCode, 301, "permanent-redirect-code"},
		{"temporal-redirect-code 301 (ingress-nginx: 300 to 307)",
			map[string]string{"temporal-redirect": "https://new.example.org/", "temporal-redirect-code": "301"},
			"temporal-redirect-code", "from 300 to 307", redirectCode, 302, "temporary-redirect-code"},
		{"auth-method PUT (ingress-nginx took it)",
			map[string]string{"auth-url": "http://auth.ns.svc.cluster.local/check", "auth-method": "PUT"},
			"auth-method", "PUT, PATCH, DELETE", nil, nil, "auth-method"},
		{"basic authentication's default realm (ingress-nginx: empty)",
			map[string]string{"auth-type": "basic", "auth-secret": "users"},
			"auth-type", "realm is Authentication Required",
			func(r *table.Route) any {
				if r.Options.Policy.BasicAuth == nil {
					return nil
				}
				return r.Options.Policy.BasicAuth.Realm
			}, "Authentication Required", ""},
		{"the affinity cookie's default name (ingress-nginx: INGRESSCOOKIE)",
			map[string]string{"affinity": "cookie"},
			"affinity", "INGRESSCOOKIE", func(r *table.Route) any { return r.Options.Balance.AffinityCookie }, table.DefaultAffinityCookie, ""},
		{"load-balance chash (an ingress-nginx algorithm)",
			map[string]string{"load-balance": "chash"},
			"load-balance", "chash", func(r *table.Route) any { return r.Options.Balance.Algorithm }, table.RoundRobin, "load-balance"},
		{"limit-rpm beside limit-rps (ingress-nginx enforced both)",
			map[string]string{"limit-rps": "10", "limit-rpm": "60"},
			"limit-rpm", "only limit-rps applies",
			func(r *table.Route) any {
				if r.Options.Policy.RateLimit == nil {
					return nil
				}
				return r.Options.Policy.RateLimit.RPS
			}, 10.0, ""},
		{"auth-tls-verify-depth 11 (ingress-nginx took any)",
			map[string]string{"auth-tls-secret": "ns/ca", "auth-tls-verify-depth": "11"},
			"auth-tls-verify-depth", "more than 10", nil, nil, "auth-tls-verify-depth"},
	}
	m := newIngressMigrator(defaultSettings())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			for k, v := range tc.ann {
				ann[proxyingress.PrefixNginx+k] = v
			}
			r := m.migrateIngress(routedIngress(ann), "", "nginx", "spec.ingressClassName")
			key := proxyingress.PrefixNginx + tc.key
			var line *entry
			for i, e := range r.rep.entries {
				if e.what == key {
					line = &r.rep.entries[i]
				}
			}
			if line == nil || line.verdict != changed || !strings.Contains(line.detail, tc.says) {
				t.Errorf("%s: line %+v, want changed saying %q", key, line, tc.says)
			}
			routes, problems, err := m.checkIngresses([]*ingressResult{r})
			if err != nil {
				t.Fatal(err)
			}
			id := types.NamespacedName{Namespace: "ns", Name: "in"}
			if len(routes[id]) == 0 {
				t.Fatalf("no route for %s", id)
			}
			if tc.got != nil {
				if got := tc.got(routes[id][0]); got != tc.want {
					t.Errorf("the proxy does not do what the line says: got %v, want %v", got, tc.want)
				}
			}
			var refused []string
			for _, p := range problems[id] {
				if _, rest, ok := strings.Cut(p.Message, "annotation "+proxyingress.PrefixMetalgate); ok {
					name, _, _ := strings.Cut(rest, "=")
					refused = append(refused, name)
				}
			}
			if want := []string{tc.refused}; tc.refused == "" && len(refused) != 0 || tc.refused != "" && !slices.Equal(refused, want) {
				t.Errorf("annotations refused %q, want %q (problems %v)", refused, tc.refused, problems[id])
			}
		})
	}
}

// routedIngress is an ingress-nginx Ingress ns/in with annotations ann and one rule.
func routedIngress(ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"ingressClassName": "nginx",
		"rules": []any{map[string]any{"host": "a.example.org", "http": map[string]any{"paths": []any{map[string]any{
			"path": "/", "pathType": "Prefix",
			"backend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}},
		}}}}},
	}}}
	u.SetAPIVersion("networking.k8s.io/v1")
	u.SetKind("Ingress")
	u.SetNamespace("ns")
	u.SetName("in")
	u.SetAnnotations(ann)
	return u
}
