package ingress

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestErrorPagesRetriesAffinityModeAnnotations pins how custom-http-errors, default-backend,
// proxy-next-upstream*, and affinity-mode are read: a bad value is a Problem naming the
// annotation, and never widens what the route does (no error pages from another namespace's
// Service, no retries it did not ask for).
func TestErrorPagesRetriesAffinityModeAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ann        map[string]string
		wantPages  *table.ErrorPages // Backend compared by Service only
		wantSvc    string
		wantNext   *table.NextUpstream
		wantMode   table.AffinityMode
		wantBadKey string
	}{
		// Hostile first.
		{name: "default-backend in another namespace: refused, no pages", ann: map[string]string{"custom-http-errors": "503", "default-backend": "other/pages"},
			wantBadKey: "default-backend"},
		{name: "a code out of range", ann: map[string]string{"custom-http-errors": "200,503"}, wantBadKey: "custom-http-errors"},
		{name: "not a code", ann: map[string]string{"custom-http-errors": "5xx"}, wantBadKey: "custom-http-errors"},
		{name: "an unknown retry condition", ann: map[string]string{"proxy-next-upstream": "error always"},
			wantNext: &table.NextUpstream{On: table.NextError | table.NextTimeout, Tries: 3}, wantBadKey: "proxy-next-upstream"},
		{name: "tries out of range", ann: map[string]string{"proxy-next-upstream-tries": "1000"},
			wantNext: &table.NextUpstream{On: table.NextError | table.NextTimeout, Tries: 3}, wantBadKey: "proxy-next-upstream-tries"},
		{name: "a bad timeout", ann: map[string]string{"proxy-next-upstream-timeout": "soon"},
			wantNext: &table.NextUpstream{On: table.NextError | table.NextTimeout, Tries: 3}, wantBadKey: "proxy-next-upstream-timeout"},
		{name: "an unknown affinity mode", ann: map[string]string{"affinity": "cookie", "affinity-mode": "sticky"}, wantBadKey: "affinity-mode"},
		// Good values.
		{name: "codes with the Ingress's own Service, port by name", ann: map[string]string{"custom-http-errors": "503, 404,503", "default-backend": "pages:http"},
			wantPages: &table.ErrorPages{Codes: []int{404, 503}}, wantSvc: "ns/pages"},
		{name: "codes without a default-backend: the proxy's own", ann: map[string]string{"custom-http-errors": "502"},
			wantPages: &table.ErrorPages{Codes: []int{502}}},
		{name: "every condition", ann: map[string]string{"proxy-next-upstream": "error timeout invalid_header http_500 http_502 http_503 http_504 http_403 http_404 http_429 non_idempotent",
			"proxy-next-upstream-tries": "5", "proxy-next-upstream-timeout": "10"},
			wantNext: &table.NextUpstream{On: 1<<11 - 1, Tries: 5, Timeout: 10 * time.Second}},
		{name: "off wins", ann: map[string]string{"proxy-next-upstream": "error off"}, wantNext: &table.NextUpstream{Tries: 3}},
		{name: "persistent", ann: map[string]string{"affinity": "cookie", "affinity-mode": "persistent"}, wantMode: table.AffinityPersistent},
		{name: "affinity-mode alone does nothing", ann: map[string]string{"affinity-mode": "persistent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := ingress("i", 0, path{"a.com", "/", "Prefix", "s"})
			ing.Annotations = map[string]string{}
			for k, v := range tc.ann {
				ing.Annotations[PrefixNginx+k] = v
			}
			pages := &corev1.Service{}
			pages.Namespace, pages.Name = "ns", "pages"
			pages.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 8080}}
			in := Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{ing},
				Services: []*corev1.Service{svc("s"), pages}, NginxAnnotations: true,
				DefaultBackendService: types.NamespacedName{Namespace: "sys", Name: "errors"}}
			tab, problems := Build(in)
			var bad []string
			for _, p := range problems {
				if p.Reason == table.ReasonInvalidAnnotation {
					bad = append(bad, p.Message)
				}
			}
			switch {
			case tc.wantBadKey == "" && len(bad) > 0:
				t.Errorf("problems %v; want none", bad)
			case tc.wantBadKey != "" && (len(bad) != 1 || !strings.Contains(bad[0], PrefixNginx+tc.wantBadKey+"=")):
				t.Errorf("problems %v; want one naming %s", bad, tc.wantBadKey)
			}
			pol := tab.Lookup("a.com", "/").Options.Policy
			got := pol.ErrorPages
			if got != nil && got.Backend != nil {
				if got.Backend.Service.String() != tc.wantSvc || len(got.Backend.Endpoints) != 0 && got.Backend.Port != "http" {
					t.Errorf("error backend %s port %s; want %s", got.Backend.Service, got.Backend.Port, tc.wantSvc)
				}
				c := *got
				c.Backend = nil
				got = &c
			} else if tc.wantSvc != "" {
				t.Errorf("no error backend; want %s", tc.wantSvc)
			}
			if diff := cmp.Diff(tc.wantPages, got); diff != "" {
				t.Errorf("error pages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNext, pol.NextUpstream); diff != "" {
				t.Errorf("next upstream (-want +got):\n%s", diff)
			}
			if m := tab.Lookup("a.com", "/").Backend.Balance.AffinityMode; m != tc.wantMode {
				t.Errorf("affinity mode %q; want %q", m, tc.wantMode)
			}
		})
	}
}
