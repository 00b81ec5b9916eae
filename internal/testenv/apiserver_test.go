package testenv

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

func TestSkipReasonSaysHow(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	got := SkipReason()
	for _, want := range []string{"KUBEBUILDER_ASSETS is not set", "make test-integration", "bin/k8s-v"} {
		if !strings.Contains(got, want) {
			t.Errorf("skip reason %q does not say %q", got, want)
		}
	}
}

// TestBrokenAssetsFail: KUBEBUILDER_ASSETS set to a directory without the binaries is an
// error naming it, not a skip.
func TestBrokenAssetsFail(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	_, err := start(Options{})
	if err == nil || !strings.Contains(err.Error(), "KUBEBUILDER_ASSETS="+dir+" has no kube-apiserver") {
		t.Errorf("start = %v, want an error naming the directory and the missing binary", err)
	}
}

// TestStart: the server holds metalgate's CRDs, serves dual-stack Services, and the
// kubeconfig file and kubectl reach it.
func TestStart(t *testing.T) {
	e := Start(t, Options{CRDs: []string{MetalgateCRDs}, DualStack: true})
	ctx := context.Background()
	pool := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/24"}}}
	if err := e.Client.Create(ctx, pool); err != nil {
		t.Fatalf("create a pool (CRDs installed?): %v", err)
	}
	v6 := corev1.IPv6Protocol
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "v6"},
		Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{v6}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := e.Client.Create(ctx, svc); err != nil {
		t.Fatalf("create an IPv6 Service (dual-stack range?): %v", err)
	}
	if b, err := os.ReadFile(e.Kubeconfig); err != nil || !strings.Contains(string(b), strings.TrimSuffix(e.Config.Host, "/")) {
		t.Errorf("kubeconfig %s does not name %s: %v", e.Kubeconfig, e.Config.Host, err)
	}
	if p := e.Kubectl(t); p == "" {
		t.Error("no kubectl")
	}
}
