package gateway_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// TestProxyFromPod: --gateway-proxy-image=self reads the controller's own Pod from the API
// server: its container's image and pull policy, the Pod's pull secrets, and the proxies'
// ServiceAccount named after its own; what the flags give is kept; a Pod that is not there, or
// has no such container, is an error naming it.
func TestProxyFromPod(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	ns := namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controller-0"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "lb-metalgate-controller",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "registry.test/sidecar:1"},
				{Name: "controller", Image: "registry.test/metalgate@sha256:0123", ImagePullPolicy: corev1.PullAlways},
			},
		},
	}
	create(t, pod)

	got, err := gateway.ProxyFromPod(ctx, k8sClient, ns, "controller-0", "controller", gateway.ProxyOptions{Image: gateway.SelfImage})
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != "registry.test/metalgate@sha256:0123" || got.PullPolicy != corev1.PullAlways ||
		len(got.PullSecrets) != 1 || got.PullSecrets[0].Name != "registry" || got.ServiceAccount != "lb-metalgate-gateway-proxy" {
		t.Errorf("from the Pod: %+v", got)
	}

	given := gateway.ProxyOptions{Image: "registry.test/other:2", ServiceAccount: "mine"}
	if got, err := gateway.ProxyFromPod(ctx, k8sClient, ns, "controller-0", "controller", given); err != nil ||
		got.Image != given.Image || got.ServiceAccount != "mine" || got.PullPolicy != "" || got.PullSecrets != nil {
		t.Errorf("flags given: %+v, %v; want them kept and nothing of the Pod's image settings", got, err)
	}

	for _, tc := range []struct{ name, pod, container, want string }{
		{"no such Pod", "gone", "controller", `controller's own Pod ` + ns + `/gone`},
		{"no such container", "controller-0", "manager", `no container "manager"`},
		{"not in a Pod", "", "controller", "POD_NAME"},
	} {
		_, err := gateway.ProxyFromPod(ctx, k8sClient, ns, tc.pod, tc.container, gateway.ProxyOptions{Image: gateway.SelfImage})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
