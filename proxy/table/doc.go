// Package table builds the proxy's immutable routing table from a snapshot of Ingresses,
// IngressClasses, Services, EndpointSlices and TLS Secrets, and answers "which backend serves
// this host and path". Build is pure: no client, no I/O, no clock.
package table
