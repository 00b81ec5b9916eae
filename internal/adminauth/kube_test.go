package adminauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metalgate/metalgate/internal/adminauth"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestGuardAgainstAPIServer runs the Guard against a real kube-apiserver (authorization mode
// RBAC, as envtest starts it) with real ServiceAccount tokens from the TokenRequest API:
//   - the Guard itself runs as a ServiceAccount bound to system:auth-delegator only (create
//     TokenReviews and SubjectAccessReviews: the rules config/ grants metalgate's components)
//     — and without them every review fails;
//   - "reader" is granted get on /metrics by a ClusterRole like metalgate-metrics-reader;
//   - "stranger" is granted nothing; "gone" was deleted after its token was issued.
func TestGuardAgainstAPIServer(t *testing.T) {
	cfg := testenv.Start(t, testenv.Options{}).Config
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	const ns = "metalgate-system"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	bind := func(name, clusterRole, sa string) {
		t.Helper()
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metalgate-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	guardToken, readerToken, strangerToken, goneToken, unboundToken := token("guard"), token("reader"), token("stranger"), token("gone"), token("unbound")
	bind("guard-auth-delegator", "system:auth-delegator", "guard")
	bind("reader-metrics", "metalgate-metrics-reader", "reader")
	if err := admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	as := func(token string) *rest.Config {
		c := rest.AnonymousClientConfig(cfg)
		c.BearerToken = token
		return c
	}

	backend := http.NewServeMux()
	for _, p := range []string{"/metrics", "/debug/backends", "/healthz"} {
		backend.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served " + p)) })
	}
	newGuard := func(t *testing.T, cfg *rest.Config) (*adminauth.Guard, *prometheus.Registry) {
		r, err := adminauth.NewKubeReviewer(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		g, err := adminauth.New(adminauth.Options{Reviewer: r, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		return g, reg
	}
	guard, _ := newGuard(t, as(guardToken))

	// Loopback is the connection's address: a real listener on 127.0.0.1.
	t.Run("loopback connection", func(t *testing.T) {
		srv := httptest.NewServer(guard.Wrap(backend))
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "served /metrics" {
			t.Errorf("got %d %q, want 200 from the handler", resp.StatusCode, b)
		}
	})

	// As the speaker and the controller use it: controller-runtime's metrics server calls the
	// FilterProvider with the manager's config and wraps each handler with the filter.
	t.Run("FilterProvider", func(t *testing.T) {
		filter, err := adminauth.FilterProvider(adminauth.Options{})(as(guardToken), nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := filter(logr.Discard(), backend)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			token string
			want  int
		}{{"", 401}, {strangerToken, 403}, {readerToken, 200}} {
			req := httptest.NewRequest(http.MethodGet, "http://metrics/metrics", nil)
			req.RemoteAddr = "198.51.100.7:43210"
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("token %.8q…: %d %q, want %d", tc.token, rec.Code, rec.Body.String(), tc.want)
			}
		}
	})

	tests := []struct {
		name       string
		guardCfg   *rest.Config // default: the guard ServiceAccount's
		path       string
		token      string
		wantCode   int
		wantReason adminauth.Reason
	}{
		{name: "healthz open", path: "/healthz", wantCode: 200},
		{name: "no token", path: "/metrics", wantCode: 401, wantReason: adminauth.ReasonNoCredentials},
		{name: "not a token", path: "/metrics", token: "not-a-token", wantCode: 401, wantReason: adminauth.ReasonInvalidToken},
		{name: "token of a deleted ServiceAccount", path: "/metrics", token: goneToken, wantCode: 401, wantReason: adminauth.ReasonInvalidToken},
		{name: "token without permission", path: "/metrics", token: strangerToken, wantCode: 403, wantReason: adminauth.ReasonForbidden},
		{name: "token with permission", path: "/metrics", token: readerToken, wantCode: 200},
		{name: "permission for /metrics only", path: "/debug/backends", token: readerToken, wantCode: 403, wantReason: adminauth.ReasonForbidden},
		{name: "guard without auth-delegator", guardCfg: as(unboundToken), path: "/metrics", token: readerToken, wantCode: 503, wantReason: adminauth.ReasonReviewError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, reg := newGuard(t, as(guardToken))
			if tc.guardCfg != nil {
				g, reg = newGuard(t, tc.guardCfg)
			}
			req := httptest.NewRequest(http.MethodGet, "http://admin"+tc.path, nil)
			req.RemoteAddr = "198.51.100.7:43210" // a pod on the node network
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			g.Wrap(backend).ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("code = %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.wantCode)
			}
			if tc.wantCode == 200 && rec.Body.String() != "served "+tc.path {
				t.Errorf("body = %q, want the handler's", rec.Body.String())
			}
			if tc.wantReason != "" {
				if got := refused(t, reg, tc.wantReason); got != 1 {
					t.Errorf("metalgate_admin_requests_refused_total{reason=%q} = %v, want 1", tc.wantReason, got)
				}
			}
		})
	}
}

// refused reads metalgate_admin_requests_refused_total{reason} from reg.
func refused(t *testing.T, reg prometheus.Gatherer, reason adminauth.Reason) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "metalgate_admin_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == string(reason) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metalgate_admin_requests_refused_total{reason=%q}", reason)
	return 0
}
