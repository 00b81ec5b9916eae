package gateway

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway/claim"
)

// classSupportedFeatures is claim.Features as GatewayClass status holds it: the features
// whose conformance tests pass, sorted by name.
func classSupportedFeatures() []gwv1.SupportedFeature {
	fs := claim.Features()
	out := make([]gwv1.SupportedFeature, 0, len(fs))
	for _, f := range fs {
		out = append(out, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
	}
	return out
}
