package gateway

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelfImage is the value of --gateway-proxy-image that means "the controller's own image".
const SelfImage = "self"

// DefaultProxyServiceAccount is the Gateway proxies' ServiceAccount in config/ (config/rbac/
// gateway-proxy): ProxyServiceAccountFor("metalgate-controller").
const DefaultProxyServiceAccount = "metalgate-gateway-proxy"

// ProxyServiceAccountFor is the ServiceAccount of the Gateway proxies that a controller running
// as controllerSA makes: its name with the suffix "controller" replaced by "gateway-proxy".
// config/, its overlays (kustomize namePrefix renames both alike) and the Helm chart
// (<release>-metalgate-controller, <release>-metalgate-gateway-proxy) all follow it, so the
// proxies find their role without a flag; --gateway-proxy-service-account overrides it.
func ProxyServiceAccountFor(controllerSA string) string {
	base, ok := strings.CutSuffix(controllerSA, "controller")
	if !ok || controllerSA == "" {
		return DefaultProxyServiceAccount
	}
	return base + "gateway-proxy"
}

// ProxyFromPod fills what p leaves empty from the controller's own Pod podNS/podName: the
// image, pull policy and pull secrets of its container named container (or its only
// container), and the ServiceAccount by ProxyServiceAccountFor. The Gateway proxies then run
// the same build as the controller, pulled the same way.
func ProxyFromPod(ctx context.Context, r client.Reader, podNS, podName, container string, p ProxyOptions) (ProxyOptions, error) {
	if podNS == "" || podName == "" {
		return p, fmt.Errorf("the controller's own Pod is unknown (POD_NAMESPACE and POD_NAME are not both set): give --gateway-proxy-image an image, or \"\" for no proxies")
	}
	var pod corev1.Pod
	if err := r.Get(ctx, types.NamespacedName{Namespace: podNS, Name: podName}, &pod); err != nil {
		return p, fmt.Errorf("read the controller's own Pod %s/%s for its image: %w", podNS, podName, err)
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container || len(pod.Spec.Containers) == 1 {
			c = &pod.Spec.Containers[i]
			break
		}
	}
	if c == nil || c.Image == "" {
		return p, fmt.Errorf("the controller's own Pod %s/%s has no container %q with an image", podNS, podName, container)
	}
	if p.Image == "" || p.Image == SelfImage {
		p.Image = c.Image
		if p.PullPolicy == "" {
			p.PullPolicy = c.ImagePullPolicy
		}
		if p.PullSecrets == nil {
			p.PullSecrets = pod.Spec.ImagePullSecrets
		}
	}
	if p.ServiceAccount == "" {
		p.ServiceAccount = ProxyServiceAccountFor(pod.Spec.ServiceAccountName)
	}
	return p, nil
}
