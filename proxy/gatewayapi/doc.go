// Package gatewayapi translates one Gateway, its listeners and the HTTPRoutes and GRPCRoutes
// attached to them into the proxy's routing table, with every status the translation
// decides: the listeners' verdict (Listeners, which the controller's plan also calls), each
// route's parent statuses, attachedRoutes, and the HTTPS listeners without a certificate.
// Translate is pure; the controller writes the statuses, the Gateway's proxy serves the table,
// both from the same call.
//
// Files: listeners.go (the listener verdict, CertificateRef), translate.go (Translate,
// attachment, HTTPRoute rules and filters, backendRefs and ReferenceGrants), grpcroute.go,
// backendfilters.go (backendRef filters), cors.go (the CORS filter).
package gatewayapi
