package gateway

import "testing"

func TestProxyServiceAccountFor(t *testing.T) {
	for _, tc := range []struct{ controller, want string }{
		{"metalgate-controller", "metalgate-gateway-proxy"},         // config/
		{"ov1-metalgate-controller", "ov1-metalgate-gateway-proxy"}, // a kustomize namePrefix
		{"lb-metalgate-controller", "lb-metalgate-gateway-proxy"},   // a Helm release
		{"", DefaultProxyServiceAccount},                            // not in a Pod
		{"my-operator", DefaultProxyServiceAccount},                 // no rule applies: the default
	} {
		if got := ProxyServiceAccountFor(tc.controller); got != tc.want {
			t.Errorf("ProxyServiceAccountFor(%q) = %q, want %q", tc.controller, got, tc.want)
		}
	}
}
