package controlplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestBatchSlices: which EndpointSlice events leave a batch to the fast path, and for which
// Services. Anything the builder cannot attribute to a Service for sure is a full build.
func TestBatchSlices(t *testing.T) {
	sl := func(ns, svc string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x"}}
		if svc != "" {
			s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
		}
		return s
	}
	id := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for _, tc := range []struct {
		name     string
		events   [][]any
		full     bool
		services []types.NamespacedName
	}{
		{"an add", [][]any{{sl("a", "web")}}, false, []types.NamespacedName{id("a", "web")}},
		{"an update moving a slice to another Service: both", [][]any{{sl("a", "web"), sl("a", "api")}}, false, []types.NamespacedName{id("a", "api"), id("a", "web")}},
		{"same name, two namespaces", [][]any{{sl("a", "web")}, {sl("b", "web")}}, false, []types.NamespacedName{id("a", "web"), id("b", "web")}},
		{"a slice without the service-name label", [][]any{{sl("a", "web")}, {sl("a", "")}}, true, nil},
		{"an update that drops the label", [][]any{{sl("a", "web"), sl("a", "")}}, true, nil},
		{"a delete seen as a tombstone", [][]any{{toolscache.DeletedFinalStateUnknown{Key: "a/web-x", Obj: sl("a", "web")}}}, true, nil},
		{"not a slice", [][]any{{&metav1.PartialObjectMetadata{}}}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bt batch
			for _, objs := range tc.events {
				bt.slices(objs)
			}
			if bt.full != tc.full {
				t.Fatalf("full = %v, want %v", bt.full, tc.full)
			}
			if tc.full {
				return
			}
			var got []types.NamespacedName
			for s := range bt.services {
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.services, got, cmp.Transformer("sort", func(in []types.NamespacedName) map[types.NamespacedName]bool {
				m := map[types.NamespacedName]bool{}
				for _, s := range in {
					m[s] = true
				}
				return m
			})); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
		})
	}
}
