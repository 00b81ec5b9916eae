// Package controlplane keeps the proxy's view of the cluster: it watches Ingresses,
// IngressClasses, Services, EndpointSlices and TLS Secrets, rebuilds the routing table in
// coalesced batches and hands it to the data plane, publishes the proxy's own Service address
// into the status of the Ingresses it owns (leader only, without fighting other writers:
// among metalgate proxies one writes by a shared rule, arbitration.go), and reports how fresh
// its watches are.
package controlplane
