package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/internal/adminauth"
	"github.com/metalgate/metalgate/internal/testenv"
)

// speakerAdminMux stands in for the speaker's metrics server: its two paths, each answering
// its own name.
func speakerAdminMux() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/metrics", contract.DebugAnnouncementsPath} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served " + p)) })
	}
	return mux
}

// getFromLoopback GETs path from srv (a real listener on 127.0.0.1: the connection comes from
// loopback, as any process on a speaker's node would) with token when not empty.
func getFromLoopback(t *testing.T, srv *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// tokenReviewer knows tokens by value; "reader" may get both speaker paths.
type tokenReviewer struct{}

func (tokenReviewer) Authenticate(_ context.Context, token string) (adminauth.User, bool, error) {
	switch token {
	case "reader", "stranger":
		return adminauth.User{Name: token}, true, nil
	}
	return adminauth.User{}, false, nil
}

func (tokenReviewer) Authorize(_ context.Context, u adminauth.User, verb, _ string) (bool, error) {
	if verb != "get" {
		return false, errors.New("unexpected verb " + verb)
	}
	return u.Name == "reader", nil
}

// TestSpeakerAdminGuardLoopback: the cluster speaker's guard (speakerGuardOptions, what
// newSpeakerManager hands the metrics server) serves no loopback caller without a token — on
// the host network that is any process on the node — and still serves a granted token from
// loopback (kubectl metalgate arrives there through pods/portforward).
func TestSpeakerAdminGuardLoopback(t *testing.T) {
	opts := speakerGuardOptions(prometheus.NewRegistry(), logr.Discard())
	opts.Reviewer = tokenReviewer{}
	g, err := adminauth.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Wrap(speakerAdminMux()))
	defer srv.Close()
	tests := []struct {
		name, path, token string
		wantCode          int
	}{
		{name: "metrics without token", path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "announcements without token", path: contract.DebugAnnouncementsPath, wantCode: http.StatusUnauthorized},
		{name: "forged token", path: contract.DebugAnnouncementsPath, token: "forged", wantCode: http.StatusUnauthorized},
		{name: "token without the right", path: contract.DebugAnnouncementsPath, token: "stranger", wantCode: http.StatusForbidden},
		{name: "granted metrics", path: "/metrics", token: "reader", wantCode: http.StatusOK},
		{name: "granted announcements", path: contract.DebugAnnouncementsPath, token: "reader", wantCode: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getFromLoopback(t, srv, tc.path, tc.token)
			if code != tc.wantCode {
				t.Fatalf("GET %s from loopback: %d %q, want %d", tc.path, code, body, tc.wantCode)
			}
			if code == http.StatusOK && body != "served "+tc.path {
				t.Errorf("body = %q, want the handler's", body)
			}
		})
	}
}

// TestSpeakerAdminGuardAgainstAPIServer: the speaker's guard as the metrics server builds it
// (adminauth.FilterProvider with the speaker's config) against a real kube-apiserver, the
// speaker running as a ServiceAccount with the review rules of config/speaker, the callers on
// loopback with real ServiceAccount tokens: none (401), one without the right (403), one bound
// to metalgate-metrics-reader (/metrics only), and one of metalgate-debug-reader as
// config/rbac/debug-reader ships it (both paths: what kubectl metalgate announcers reads).
func TestSpeakerAdminGuardAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	const ns = "metalgate-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../config/rbac/debug-reader/debug_reader.yaml", "../../config/rbac/metrics-reader/metrics_reader_role.yaml", "../../config/speaker/rbac.yaml"} {
		for _, o := range decodeManifests(t, f) {
			if k := o.GetKind(); k != "ClusterRole" && k != "ClusterRoleBinding" {
				o.SetNamespace(ns) // as kustomize's namespace: does
			}
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("%s: create %s %s: %v", f, o.GetKind(), o.GetName(), err)
			}
		}
	}
	token := func(sa string, create bool) string {
		t.Helper()
		if create {
			if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	metricsReader := token("prometheus", true)
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metalgate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metalgate-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	speakerCfg := rest.AnonymousClientConfig(env.Config)
	speakerCfg.BearerToken = token("metalgate-speaker", false)
	debugReader, stranger := token("metalgate-debug-reader", false), token("stranger", true)

	filter, err := adminauth.FilterProvider(speakerGuardOptions(prometheus.NewRegistry(), logr.Discard()))(speakerCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), speakerAdminMux())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct {
		name, path, token string
		wantCode          int
	}{
		{name: "no token", path: contract.DebugAnnouncementsPath, wantCode: http.StatusUnauthorized},
		{name: "no token, metrics", path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "not a token", path: "/metrics", token: "not-a-token", wantCode: http.StatusUnauthorized},
		{name: "token without the right", path: contract.DebugAnnouncementsPath, token: stranger, wantCode: http.StatusForbidden},
		{name: "metrics reader, metrics", path: "/metrics", token: metricsReader, wantCode: http.StatusOK},
		{name: "metrics reader, announcements", path: contract.DebugAnnouncementsPath, token: metricsReader, wantCode: http.StatusForbidden},
		{name: "debug reader, metrics", path: "/metrics", token: debugReader, wantCode: http.StatusOK},
		{name: "debug reader, announcements", path: contract.DebugAnnouncementsPath, token: debugReader, wantCode: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getFromLoopback(t, srv, tc.path, tc.token)
			if code != tc.wantCode {
				t.Fatalf("GET %s from loopback: %d %q, want %d", tc.path, code, strings.TrimSpace(body), tc.wantCode)
			}
			if code == http.StatusOK && body != "served "+tc.path {
				t.Errorf("body = %q, want the handler's", body)
			}
		})
	}
}

// decodeManifests reads the objects of a multi-document YAML file.
func decodeManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}
