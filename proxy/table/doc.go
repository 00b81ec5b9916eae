// Package table is the proxy's routing table: the one representation the data plane reads,
// whatever it was translated from. It holds the routes (each naming its Source), their
// Policy, the backends with their endpoints, the Ingress host index (Lookup, Certificate,
// Passthrough) and the Gateway match index (Match, GatewayCertificate), and patches endpoint
// changes into a new table (PatchEndpoints).
//
// Translators build tables through a Builder: proxy/ingress from Ingresses, proxy/gatewayapi
// from a Gateway's routes. The Builder's resolver (Sources: Services, EndpointSlices,
// Secrets) turns a Service port into a backend with its endpoints, the same way for both.
// Nothing here reads an Ingress annotation or judges a Gateway route; this package imports
// neither translator. Everything is pure: no client, no I/O, no clock.
//
// Files: table.go (Table, Route, Backend, Lookup), index.go (what a translator places),
// resolve.go (Sources, Builder, backends, endpoints, Problems), backendtls.go, options.go
// (Options, DefaultOptions, header and host validation), policy.go, cors.go, gateway.go (the
// Gateway match index and status types), htpasswd.go, patch.go.
package table
