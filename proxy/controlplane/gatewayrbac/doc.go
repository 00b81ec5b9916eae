// Package gatewayrbac holds the RBAC markers of `metalgate proxy --gateway`: what a Gateway's
// proxy reads and writes. It has no code. `make generate` turns these markers (with the admin
// port's in proxy/dataplane) into config/rbac/gateway-proxy/role.yaml, the role of the
// ServiceAccount the Gateway controller runs those proxies as; the markers of the Ingress
// proxy (proxy/controlplane) go to config/rbac/proxy instead, so neither kind of proxy is
// granted what only the other needs.
//
// A Gateway proxy watches its Gateway, every HTTPRoute, GRPCRoute, TLSRoute, ListenerSet and
// ReferenceGrant (routes, ListenerSets and backends may be in any namespace the listeners
// allow) and Namespaces (for the listeners' and the Gateway's allowedListeners namespace
// selectors), the Services and EndpointSlices of the backends, and Secrets (the HTTPS
// listeners' certificateRefs; the data is kept only for TLS and Opaque Secrets),
// BackendTLSPolicies and ConfigMaps (the CA bundles of spec.tls.frontend and of the
// policies; only ca.crt is kept). It writes nothing: no status (the controller does), no
// Event, no Lease.
package gatewayrbac

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes;grpcroutes;tlsroutes;listenersets;referencegrants;backendtlspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;services;configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// The CA bundles of the Gateway's client-certificate validation (spec.tls.frontend):
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
