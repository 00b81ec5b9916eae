// Package controlplane keeps the proxy's view of the cluster: it watches Ingresses,
// IngressClasses, Services, EndpointSlices and TLS Secrets, rebuilds the routing table in
// coalesced batches and hands it to the data plane, publishes the proxy's own Service address
// into the status of the Ingresses it owns (leader only, without fighting other writers:
// among metalgate proxies one writes by a shared rule, arbitration.go), and reports how fresh
// its watches are.
//
// The status publisher is a pure decision and a thin writer: decide.go decides, for one
// Ingress, whether to write the own Service's addresses, clear what this proxy wrote, yield
// to another writer, wait (back-off, a foreign writer's quiet time) or do nothing, with a
// reason; status.go gathers its inputs (cache, managedFields, the live Services before it
// replaces another writer's value) and carries the decision out (writes, Events, metrics).
// arbitration.go is the rule between metalgate proxies, announce.go how they see each other,
// statuswriter.go the status Lease.
package controlplane
