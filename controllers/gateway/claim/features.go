// Package claim holds the list of Gateway API features metalgate claims. It is a leaf
// package so that the conformance run (e2e/conformance, a module of its own) claims the same
// list that GatewayClass status shows without building the controller.
package claim

import (
	"slices"

	"sigs.k8s.io/gateway-api/pkg/features"
)

// Features returns the Gateway API features metalgate claims, sorted by name: the features
// whose conformance tests pass in `make conformance` (docs/conformance/). The conformance run
// claims exactly this list and GatewayClass status lists it, so the two cannot drift apart.
func Features() []features.FeatureName {
	fs := []features.FeatureName{
		// GATEWAY-HTTP core.
		features.SupportGateway,
		features.SupportHTTPRoute,
		features.SupportReferenceGrant,
		// GATEWAY-HTTP extended, each with its conformance tests passing.
		features.SupportGatewayPort8080,
		features.SupportGatewayAddressEmpty,
		features.SupportGatewayStaticAddresses,
		features.SupportGatewayHTTPSListenerDetectMisdirectedRequests,
		features.SupportHTTPRouteBackendProtocolWebSocket,
		features.SupportHTTPRouteDestinationPortMatching,
		features.SupportGatewayHTTPListenerIsolation,
		features.SupportHTTPRouteNamedRouteRule,
		features.SupportHTTPRouteParentRefPort,
		features.SupportHTTPRouteMethodMatching,
		features.SupportHTTPRouteQueryParamMatching,
		features.SupportHTTPRouteResponseHeaderModification,
		features.SupportHTTPRouteHostRewrite,
		features.SupportHTTPRoutePathRewrite,
		features.SupportHTTPRoutePathRedirect,
		features.SupportHTTPRoutePortRedirect,
		features.SupportHTTPRouteSchemeRedirect,
		features.SupportHTTPRoute303RedirectStatusCode,
		features.SupportHTTPRoute307RedirectStatusCode,
		features.SupportHTTPRoute308RedirectStatusCode,
		features.SupportHTTPRouteRequestTimeout,
		features.SupportHTTPRouteBackendTimeout,
		features.SupportHTTPRouteRequestMirror,
		features.SupportHTTPRouteRequestMultipleMirrors,
		features.SupportHTTPRouteRequestPercentageMirror,
		features.SupportHTTPRouteBackendProtocolH2C,
		features.SupportHTTPRouteBackendRequestHeaderModification,
		features.SupportHTTPRouteCORS,
		// BackendTLSPolicy (its own conformance profile-less feature set) and its extended
		// subjectAltNames validation.
		features.SupportBackendTLSPolicy,
		features.SupportBackendTLSPolicySANValidation,
		// The Gateway's client certificate to backends (spec.tls.backend).
		features.SupportGatewayBackendClientCertificate,
		// Client certificate validation on the Gateway's HTTPS listeners (spec.tls.frontend),
		// in both modes: AllowValidOnly refuses the handshake, AllowInsecureFallback lets the
		// client through and tells the backend.
		features.SupportGatewayFrontendClientCertificateValidation,
		features.SupportGatewayFrontendClientCertificateValidationInsecureFallback,
		// ListenerSets: listeners attached to a Gateway from ListenerSets it admits
		// (spec.allowedListeners), in every profile.
		features.SupportListenerSet,
		// GATEWAY-GRPC core, and the one GRPCRoute extended feature whose test passes.
		features.SupportGRPCRoute,
		features.SupportGRPCRouteNamedRouteRule,
		// GATEWAY-TLS core: TLSRoute on TLS listeners in mode Passthrough (TLSRouteModeTerminate
		// and TLSRouteModeMixed, extended, are not served).
		features.SupportTLSRoute,
	}
	slices.Sort(fs)
	return fs
}
