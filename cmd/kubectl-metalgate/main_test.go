package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"no command", nil, 2, "Usage:"},
		{"unknown", []string{"frob"}, 2, `unknown command "frob"`},
		{"two commands", []string{"pools", "check"}, 2, `unexpected argument "check"`},
		{"bad kubeconfig", []string{"pools", "--kubeconfig", "/nonexistent"}, 1, "load kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(context.Background(), tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit = %d, want %d (stderr %q)", got, tc.want, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
}

// TestAgainstAPIServer runs each command against a real API server holding pools, an
// advertisement and Services whose status is written as the controller would.
func TestAgainstAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs a real kube-apiserver + etcd: set KUBEBUILDER_ASSETS or run 'make test-integration'")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newClient(options{kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metalgate-system"}}))
	announced := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "announced"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"100.64.0.0/16", "2001:db8:100::/64"}}}
	silent := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "silent"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/28"}}}
	must(c.Create(ctx, announced))
	must(c.Create(ctx, silent))
	announced.Status = v1alpha1.IPAddressPoolStatus{AssignedIPv4: 1, AvailableIPv4: 65535, AvailableIPv6: 1000}
	must(c.Status().Update(ctx, announced))
	must(c.Create(ctx, &v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "l2"},
		Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"announced"}}}))
	for _, name := range []string{"web", "stuck"} {
		must(c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}))
	}
	var web corev1.Service
	must(c.Get(ctx, clientKey("default", "web"), &web))
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "100.64.0.0"}}
	must(c.Status().Update(ctx, &web))
	web.Annotations = map[string]string{annotationPool: "announced"}
	must(c.Update(ctx, &web))

	tests := []struct {
		args     []string
		wantCode int
		want     []string
	}{
		{[]string{"pools"}, 0, []string{"announced  IPv4    1", "announced  IPv6    0", "silent"}},
		{[]string{"allocations"}, 0, []string{"default    stuck    <pending>", "default    web      100.64.0.0  announced"}},
		{[]string{"check"}, 1, []string{
			"pool silent: no L2Advertisement or BGPAdvertisement selects it",
			"service default/stuck: no address yet",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.args[0], func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append(tc.args, "--kubeconfig", kubeconfig)
			if code := run(ctx, args, &out, &errOut); code != tc.wantCode {
				t.Errorf("exit = %d, want %d; stderr %q", code, tc.wantCode, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "pool announced: no") {
				t.Errorf("announced pool reported as not advertised:\n%s", out.String())
			}
		})
	}
}

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
