package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/metalgate/metalgate/speaker/cluster"
)

// TestSpeakerHoldOnStop: the speaker leaves with --l2-hold only when the API server says its
// DaemonSet's rollout replaces its pod; with --l2-hold 0 or no pod name it never asks, and an
// API error is a plain leave.
func TestSpeakerHoldOnStop(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objects := func(podGen string) []client.Object {
		ctrl, now := true, metav1.Now()
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "mg", Name: "metalgate-speaker", UID: "u1",
			Annotations: map[string]string{cluster.TemplateGenerationAnnotation: "2"}}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mg", Name: "sp-1", DeletionTimestamp: &now, Finalizers: []string{"t/keep"},
			Labels:          map[string]string{cluster.PodTemplateGenerationLabel: podGen},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrl}}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		return []client.Object{ds, pod, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	}
	failing := interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("API server away")
	}}
	for _, tc := range []struct {
		name    string
		hold    time.Duration
		pod     string
		podGen  string
		funcs   interceptor.Funcs
		wantNil bool
		want    time.Duration
	}{
		{name: "rollout: the hold", hold: 10 * time.Second, pod: "sp-1", podGen: "1", want: 10 * time.Second},
		{name: "current template: no hold", hold: 10 * time.Second, pod: "sp-1", podGen: "2"},
		{name: "API error: no hold", hold: 10 * time.Second, pod: "sp-1", podGen: "1", funcs: failing},
		{name: "--l2-hold 0: never asks", pod: "sp-1", podGen: "1", wantNil: true},
		{name: "no pod name: never asks", hold: 10 * time.Second, podGen: "1", wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects(tc.podGen)...).WithInterceptorFuncs(tc.funcs).Build()
			f := holdOnStop(speakerOptions{L2Hold: tc.hold, PodName: tc.pod, Namespace: "mg"}, c, logr.Discard())
			if (f == nil) != tc.wantNil {
				t.Fatalf("HoldOnStop nil: %v, want %v", f == nil, tc.wantNil)
			}
			if f == nil {
				return
			}
			if got := f(t.Context()); got != tc.want {
				t.Errorf("hold %v, want %v", got, tc.want)
			}
		})
	}
}
