// Package balancer picks an endpoint of a backend for each request: round robin,
// least-request and peak EWMA (both with power-of-two choices) and consistent hashing. It also
// owns the live per-endpoint state (in-flight requests, latency, passive health) that outlives
// table swaps, so a new table keeps what the old one learned.
package balancer
