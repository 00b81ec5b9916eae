// Package proxy is metalgate's bundled ingress controller. It has no code of its own; its
// subpackages each do one job:
//
//   - table: build an immutable routing table from Ingresses, Services, EndpointSlices and
//     Secrets (pure, no I/O).
//   - balancer: pick an endpoint of a backend (round robin, least-request, peak EWMA,
//     consistent hash) and keep per-endpoint live counters and passive health.
//   - dataplane: serve HTTP/1.1, HTTP/2, TLS and WebSocket traffic from the current table,
//     swapped atomically.
//   - controlplane: watch the API server, rebuild and swap the table, publish Ingress status
//     and report how fresh the view is.
package proxy
