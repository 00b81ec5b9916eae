// Package netns builds small layer-2 labs out of Linux network namespaces for the speaker's root
// tests and the failover benchmark: a bridge namespace, N node namespaces each running the real
// `metalgate speaker --static-config`, and a client namespace that observes ARP/NDP. Every
// namespace is named l2t-<id>-<role> and deleted when the test ends.
package netns
