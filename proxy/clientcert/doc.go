// Package clientcert decides client-certificate authentication (mutual TLS): it reads a CA
// bundle (and, optionally, revocation lists), verifies the chain a client presented against
// it with a depth limit, and says what a request gets under each verification mode, with the
// values of the headers a backend is told the result in. It does no I/O and knows no
// Kubernetes object: the Ingress translator (ingress-nginx's auth-tls-* annotations) and the
// Gateway translator (a Gateway's spec.tls.frontend) both resolve their objects into an
// Authority and a Policy, and the data plane asks Verify and Decide for each request.
//
// Files: authority.go (the CA bundle and CRLs), verify.go (chain verification, depth,
// revocation, the failure reasons), policy.go (modes, what a result is answered with, the
// CN match), headers.go (the values of ssl-client-verify, -subject-dn, -issuer-dn, -cert).
package clientcert
