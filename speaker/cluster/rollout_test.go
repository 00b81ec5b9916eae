package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/metalgate/metalgate/speaker/cluster"
)

// rolloutObjects are a speaker pod of template generation podGen, deleting or not, controlled
// by a DaemonSet of template generation dsGen, on a node.
func rolloutObjects(podGen, dsGen string, deleting bool) (*corev1.Pod, *appsv1.DaemonSet, *corev1.Node) {
	ctrl := true
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metalgate-speaker", UID: "ds-uid",
		Annotations: map[string]string{cluster.TemplateGenerationAnnotation: dsGen}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metalgate-speaker-x1",
		Labels:          map[string]string{cluster.PodTemplateGenerationLabel: podGen},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	if deleting {
		now := metav1.Now()
		pod.DeletionTimestamp = &now
	}
	return pod, ds, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
}

// TestReplacedByRollout: a hold only when the pod is being deleted and its template generation
// is older than its DaemonSet's; every other reason to go away, or anything unreadable, is a
// plain leave.
func TestReplacedByRollout(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		podGen string
		dsGen  string
		change func(*corev1.Pod, *appsv1.DaemonSet, *corev1.Node)
		want   bool
	}{
		{name: "template generation older: replaced", podGen: "3", dsGen: "4", want: true},
		{name: "same generation (kubectl delete pod, node no longer selected)", podGen: "4", dsGen: "4"},
		{name: "pod newer than the DaemonSet read", podGen: "5", dsGen: "4"},
		{name: "not being deleted (a SIGTERM without a deletion)", podGen: "3", dsGen: "4", change: func(p *corev1.Pod, _ *appsv1.DaemonSet, _ *corev1.Node) { p.DeletionTimestamp = nil }},
		{name: "controlled by another DaemonSet (same name, new UID)", podGen: "3", dsGen: "4", change: func(_ *corev1.Pod, d *appsv1.DaemonSet, _ *corev1.Node) { d.UID = "other" }},
		{name: "not controlled by a DaemonSet", podGen: "3", dsGen: "4", change: func(p *corev1.Pod, _ *appsv1.DaemonSet, _ *corev1.Node) { p.OwnerReferences = nil }},
		{name: "DaemonSet being deleted (uninstall)", podGen: "3", dsGen: "4", change: func(_ *corev1.Pod, d *appsv1.DaemonSet, _ *corev1.Node) { d.DeletionTimestamp = &now }},
		{name: "node cordoned (drain)", podGen: "3", dsGen: "4", change: func(_ *corev1.Pod, _ *appsv1.DaemonSet, n *corev1.Node) { n.Spec.Unschedulable = true }},
		{name: "node being deleted", podGen: "3", dsGen: "4", change: func(_ *corev1.Pod, _ *appsv1.DaemonSet, n *corev1.Node) { n.DeletionTimestamp = &now }},
		{name: "pod label missing", podGen: "", dsGen: "4"},
		{name: "pod label not a number", podGen: "x3", dsGen: "4"},
		{name: "DaemonSet annotation missing", podGen: "3", dsGen: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, ds, node := rolloutObjects(tc.podGen, tc.dsGen, true)
			if tc.change != nil {
				tc.change(pod, ds, node)
			}
			got := cluster.ReplacedByRollout(pod, ds, node)
			if got.Replaced != tc.want || got.Reason == "" {
				t.Errorf("got %+v, want replaced %v with a reason", got, tc.want)
			}
		})
	}
}

// TestDetectRolloutAPIFailures: when the API server cannot be read (an error, no permission,
// no answer within the deadline), DetectRollout says "not replaced" (a plain leave) and
// returns within its deadline.
func TestDetectRolloutAPIFailures(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod, ds, node := rolloutObjects("3", "4", true)
	pod.Finalizers = []string{"test/keep"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, ds.Name, errors.New("no"))
	for _, tc := range []struct {
		name    string
		get     func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
		want    bool
		wantErr bool
	}{
		{name: "answers: replaced", want: true},
		{name: "DaemonSet forbidden", wantErr: true, get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.DaemonSet); ok {
				return forbidden
			}
			return c.Get(ctx, key, obj, opts...)
		}},
		{name: "pod gone", wantErr: true, get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}},
		{name: "no answer within the deadline", wantErr: true, get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			<-ctx.Done()
			return ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod.DeepCopy(), ds.DeepCopy(), node.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{Get: tc.get}).Build()
			const deadline = 200 * time.Millisecond
			start := time.Now()
			got, err := cluster.DetectRollout(t.Context(), c, ns, pod.Name, deadline)
			if (err != nil) != tc.wantErr || got.Replaced != tc.want {
				t.Errorf("got %+v, %v; want replaced %v, error %v", got, err, tc.want, tc.wantErr)
			}
			if took := time.Since(start); took > 5*deadline {
				t.Errorf("took %v, deadline %v", took, deadline)
			}
		})
	}
}

// TestDetectRolloutAgainstAPIServer runs DetectRollout as the speaker's ServiceAccount with
// the RBAC of config/speaker/rbac.yaml against a real API server: it may read what it needs,
// and the API server itself raises the DaemonSet's template generation when the template
// changes (and only then), which is what tells a rollout from a plain deletion.
func TestDetectRolloutAgainstAPIServer(t *testing.T) {
	cfg, _, admin := startAPIServer(t)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	applyRBAC(t, admin)
	must(admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	sel := map[string]string{"app": "speaker"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metalgate-speaker"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "s", Image: "x:1"}}}}}}
	must(admin.Create(ctx, ds))
	gen := ds.Annotations[cluster.TemplateGenerationAnnotation]
	if gen != "1" {
		t.Fatalf("new DaemonSet: template generation %q, want 1 (set by the API server)", gen)
	}
	// The pod as the DaemonSet controller makes it (no controller runs here), kept by a
	// finalizer once deleted, as the kubelet keeps a terminating pod.
	ctrlRef := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metalgate-speaker-x1", Finalizers: []string{"test.metalgate.io/keep"},
		Labels:          map[string]string{"app": "speaker", cluster.PodTemplateGenerationLabel: gen},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrlRef}}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "s", Image: "x:1"}}}}
	must(admin.Create(ctx, pod))
	t.Cleanup(func() {
		var p corev1.Pod
		if admin.Get(context.Background(), client.ObjectKeyFromObject(pod), &p) == nil {
			p.Finalizers = nil
			_ = admin.Update(context.Background(), &p)
		}
	})
	must(admin.Delete(ctx, pod))

	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":metalgate-speaker"}
	speakerClient, err := client.New(sa, client.Options{Scheme: admin.Scheme()})
	must(err)
	detect := func(what string, want bool) {
		t.Helper()
		got, err := cluster.DetectRollout(ctx, speakerClient, ns, pod.Name, 5*time.Second)
		if err != nil || got.Replaced != want {
			t.Errorf("%s: %+v, %v; want replaced %v", what, got, err, want)
		}
	}
	detect("deleted, current template", false)

	// A change outside the template (updateStrategy) raises metadata.generation, not the
	// template generation: still not a rollout.
	must(admin.Get(ctx, client.ObjectKeyFromObject(ds), ds))
	ds.Spec.MinReadySeconds = 5
	must(admin.Update(ctx, ds))
	if ds.Generation < 2 || ds.Annotations[cluster.TemplateGenerationAnnotation] != "1" {
		t.Fatalf("after a change outside the template: generation %d, template generation %q; want ≥2 and 1", ds.Generation, ds.Annotations[cluster.TemplateGenerationAnnotation])
	}
	detect("deleted, change outside the template", false)

	// A new template (kubectl rollout restart, helm upgrade): replaced.
	ds.Spec.Template.Spec.Containers[0].Image = "x:2"
	must(admin.Update(ctx, ds))
	if got := ds.Annotations[cluster.TemplateGenerationAnnotation]; got != "2" {
		t.Fatalf("after a template change: template generation %q, want 2", got)
	}
	detect("deleted, older template", true)

	// The same during a drain: not replaced.
	var node corev1.Node
	must(admin.Get(ctx, types.NamespacedName{Name: "n1"}, &node))
	node.Spec.Unschedulable = true
	must(admin.Update(ctx, &node))
	detect("deleted, older template, node cordoned", false)
}
