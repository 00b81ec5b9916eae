package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// overlay is a kustomization of a user's: base (a directory under config/) with the overlay's
// namespace: and namePrefix: ("" for none; both "" means base as it is).
type overlay struct {
	base, namespace, prefix string
}

func (o overlay) String() string {
	s := strings.ReplaceAll(o.base, "/", "_")
	if o.namespace != "" {
		s += "/namespace=" + o.namespace
	}
	if o.prefix != "" {
		s += "/namePrefix=" + o.prefix
	}
	return s
}

// render builds the overlay with the kubectl beside the API server (its kustomize).
func (o overlay) render(ctx context.Context, t *testing.T, s *apiServer) []byte {
	t.Helper()
	dir := o.base
	if o.namespace != "" || o.prefix != "" {
		dir = t.TempDir()
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		// kustomize refuses absolute paths to a base: a relative one from the overlay.
		rel, err := filepath.Rel(dir, filepath.Join(wd, o.base))
		if err != nil {
			t.Fatal(err)
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "\n"
		if o.namespace != "" {
			k += "namespace: " + o.namespace + "\n"
		}
		if o.prefix != "" {
			k += "namePrefix: " + o.prefix + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.run(ctx, nil, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", o, err, out)
	}
	return []byte(out)
}

// overlays: every kustomization a user installs, as it is and under an overlay's namespace:
// and namePrefix:. Those with a prefix, and those as they are that name their cluster-scoped
// objects themselves (edge, the demo tenants), are installed side by side.
var overlays = []overlay{
	{base: "default", namespace: "ov-default"},
	{base: "default", prefix: "ov1-"},
	{base: "default", namespace: "ov-default-2", prefix: "ov2-"},
	{base: "speaker", namespace: "ov-speaker"},
	{base: "speaker", namespace: "ov-speaker-3", prefix: "ov3-"},
	{base: "proxy", namespace: "ov-proxy"},
	{base: "proxy", prefix: "ov4-"},
	{base: "proxy", namespace: "ov-proxy-5", prefix: "ov5-"},
	{base: "proxy/namespaced", namespace: "ov-team-a"},
	{base: "proxy/namespaced", namespace: "ov-team-b", prefix: "team-b-"},
	{base: "proxy/namespaced", namespace: "ov-team-c", prefix: "team-c-"},
	{base: "edge"},
	{base: "edge", namespace: "ov-edge-6", prefix: "ov6-"},
	{base: "demo/one"},
	{base: "demo/two"},
}

// TestOverlays: against a real API server with config/default installed (the operator, and
// the IngressClass reader ClusterRole the proxies bind), each overlay renders, passes a
// server-side dry run, is applied, and each of its components' ServiceAccount — the one its
// Deployment or DaemonSet runs as — may do everything the component needs, where it needs it,
// and not more where that is checkable (a namespace-scoped proxy nothing namespaced outside
// its namespace; the Lease, the own Pod and the named Service only in its own namespace). The
// needs are the roles generated from the code (config/rbac/proxy, config/rbac/controller) and
// the speaker's own. Then, with all of them installed, each one that names its cluster-scoped
// objects apart still may: a second install took nothing from the first.
//
// An overlay without a namePrefix shares the cluster-scoped names of its base (a second one
// replaces the first one's ClusterRoleBindings: docs/install.md), so its bindings are removed
// again after its check.
func TestOverlays(t *testing.T) {
	t.Parallel() // its own API server
	s := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s.install(ctx, t, "config/default", overlay{base: "default"}.render(ctx, t, s))

	type installed struct {
		o    overlay
		objs []*unstructured.Unstructured
	}
	var together []installed
	for _, o := range overlays {
		t.Run(o.String(), func(t *testing.T) {
			manifests := o.render(ctx, t, s)
			objs := decodeAll(t, o.String(), manifests)
			ws := workloads(t, objs)
			if len(ws) == 0 {
				t.Fatalf("%s: no metalgate Deployment or DaemonSet", o)
			}
			s.install(ctx, t, o.String(), manifests)
			for _, w := range ws {
				if o.namespace != "" && w.namespace != o.namespace {
					t.Errorf("%s is not in the overlay's namespace %s", w, o.namespace)
				}
				if !strings.HasPrefix(w.serviceAccount, o.prefix) {
					t.Errorf("%s: ServiceAccount without the overlay's namePrefix %s", w, o.prefix)
				}
				s.checkAccess(ctx, t, w, s.required(t, w, objs))
			}
			if o.prefix == "" && o.namespace != "" {
				for _, obj := range objs {
					if obj.GetKind() != "ClusterRoleBinding" {
						continue
					}
					if err := s.cs.RbacV1().ClusterRoleBindings().Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete ClusterRoleBinding %s: %v", obj.GetName(), err)
					}
				}
				return
			}
			together = append(together, installed{o, objs})
		})
	}
	t.Run("side_by_side", func(t *testing.T) {
		if len(together) < 2 {
			t.Fatalf("only %d installs side by side", len(together))
		}
		seen := map[string]string{} // cluster-scoped "Kind name" → install
		for _, in := range together {
			for _, obj := range in.objs {
				if obj.GetNamespace() != "" || obj.GetKind() == "CustomResourceDefinition" || obj.GetKind() == "Namespace" {
					continue
				}
				key := obj.GetKind() + " " + obj.GetName()
				if other, dup := seen[key]; dup {
					t.Errorf("%s and %s both install %s", other, in.o, key)
				}
				seen[key] = in.o.String()
			}
			for _, w := range workloads(t, in.objs) {
				s.checkAccess(ctx, t, w, s.required(t, w, in.objs))
			}
		}
	})
}
