// Package conformance runs the upstream Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, the release of the CRDs metalgate installs) against a
// lab with metalgate deployed. It is a Go module of its own, so the main module does not carry
// the suite's dependencies; `make conformance` (hack/conformance.sh) builds the suite's echo
// backend from this module, brings the lab up and runs the test binary inside the lab
// client's network namespace, where the Gateways' VIPs are reachable.
package conformance
