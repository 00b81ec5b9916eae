package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// checkBackendTLSPolicy sets o.noBackendTLSPolicy when the API server (asked through m) does
// not serve BackendTLSPolicy v1 (Gateway API before v1.4): the Gateway proxy then speaks
// plain HTTP to every backend, as the Gateway controller decides on such a cluster
// (controllers/gateway), instead of failing readiness on a watch that cannot start.
func (o *Options) checkBackendTLSPolicy(m meta.RESTMapper) error {
	_, err := m.RESTMapping(schema.GroupKind{Group: gatewayv1.GroupName, Kind: KindBackendTLSPolicy}, gatewayv1.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(err):
		o.noBackendTLSPolicy = true
		o.Logger.Info("BackendTLSPolicy v1 is not installed: this Gateway proxy ignores backend TLS policies", "gateway", o.Gateway.String())
	case err != nil:
		return fmt.Errorf("look up BackendTLSPolicy in the API server: %w", err)
	}
	return nil
}

// backendTLSSnapshot lists every BackendTLSPolicy (unless not served) and ConfigMap (only
// their ca.crt is cached) for gatewayapi.Input; the translator reads a ConfigMap only for a
// policy of its own namespace.
func (b *builder) backendTLSSnapshot(ctx context.Context) ([]*gatewayv1.BackendTLSPolicy, []*corev1.ConfigMap, error) {
	nocopy := client.UnsafeDisableDeepCopy
	var policies []*gatewayv1.BackendTLSPolicy
	if !b.opts.noBackendTLSPolicy {
		var list gatewayv1.BackendTLSPolicyList
		if err := b.cache.List(ctx, &list, nocopy); err != nil {
			return nil, nil, fmt.Errorf("list BackendTLSPolicies: %w", err)
		}
		for i := range list.Items {
			policies = append(policies, &list.Items[i])
		}
	}
	if len(policies) == 0 {
		return nil, nil, nil
	}
	var cms corev1.ConfigMapList
	if err := b.cache.List(ctx, &cms, nocopy); err != nil {
		return nil, nil, fmt.Errorf("list ConfigMaps: %w", err)
	}
	out := make([]*corev1.ConfigMap, len(cms.Items))
	for i := range cms.Items {
		out[i] = &cms.Items[i]
	}
	return policies, out, nil
}

// configMapTransform keeps of a ConfigMap only what a BackendTLSPolicy reads, its ca.crt:
// any other key (application configuration, possibly large) is never the proxy's business.
func configMapTransform(o any) (any, error) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return o, nil
	}
	cm.ManagedFields, cm.BinaryData, cm.Annotations = nil, nil, nil
	if ca, ok := cm.Data["ca.crt"]; ok {
		cm.Data = map[string]string{"ca.crt": ca}
	} else {
		cm.Data = nil
	}
	return cm, nil
}
