// Package dataplane serves client traffic from the current routing table: HTTP/1.1, HTTP/2
// (ALPN on TLS, optional h2c), TLS termination with SNI, WebSocket and other Upgrades, and
// gRPC to h2c backends. The table is held in an atomic.Pointer and replaced whole by Swap;
// a request keeps the table (and endpoint) it started with until it ends.
package dataplane
