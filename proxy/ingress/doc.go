// Package ingress translates Ingresses into the proxy's routing table: which Ingresses are
// ours (IngressClass), their annotations (metalgate.io/ and ingress-nginx forms, the catalog
// the docs and kubectl-metalgate migrate read), host ownership between namespaces, paths,
// default backends, canaries, TLS certificates and passthrough. Build is pure; what is wrong
// in an Ingress comes back as Problems (Warning Events) and the rest is still routed.
//
// Files: build.go (Build and the tenancy rules), annotations.go (the annotation reader),
// backendtls.go (proxy-ssl-*), catalog.go (every annotation and protection, documented),
// decode.go (an Input from YAML, for --static-config).
package ingress
