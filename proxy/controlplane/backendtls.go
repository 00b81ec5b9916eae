package controlplane

import (
	"context"
	"fmt"

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

// backendTLSPolicies lists the cached BackendTLSPolicies (none when the API server does not
// serve them); their CA ConfigMaps come with the others (listConfigMaps).
func (b *builder) backendTLSPolicies(ctx context.Context) ([]*gatewayv1.BackendTLSPolicy, error) {
	if b.opts.noBackendTLSPolicy {
		return nil, nil
	}
	var list gatewayv1.BackendTLSPolicyList
	if err := b.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list BackendTLSPolicies: %w", err)
	}
	policies := make([]*gatewayv1.BackendTLSPolicy, len(list.Items))
	for i := range list.Items {
		policies[i] = &list.Items[i]
	}
	return policies, nil
}
