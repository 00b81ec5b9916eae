package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// caCertificateKey is the only key of a ConfigMap a Gateway proxy keeps (configMapTransform).
const caCertificateKey = "ca.crt"

// configMapTransform keeps what a Gateway proxy reads of a ConfigMap: ca.crt, the CA bundle a
// caCertificateRef names; every other key (application settings, scripts, large blobs) is
// dropped from the cache.
func configMapTransform(o any) (any, error) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return o, nil
	}
	cm.ManagedFields = nil
	var data map[string]string
	if v, ok := cm.Data[caCertificateKey]; ok {
		data = map[string]string{caCertificateKey: v}
	}
	var bin map[string][]byte
	if v, ok := cm.BinaryData[caCertificateKey]; ok {
		bin = map[string][]byte{caCertificateKey: v}
	}
	cm.Data, cm.BinaryData = data, bin
	return cm, nil
}

// listConfigMaps lists the cached ConfigMaps (each with ca.crt only) for the translation,
// which reads those the Gateway's caCertificateRefs name.
func (b *builder) listConfigMaps(ctx context.Context) ([]*corev1.ConfigMap, error) {
	var cms corev1.ConfigMapList
	if err := b.cache.List(ctx, &cms, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ConfigMaps: %w", err)
	}
	out := make([]*corev1.ConfigMap, len(cms.Items))
	for i := range cms.Items {
		out[i] = &cms.Items[i]
	}
	return out, nil
}
