// Package netnslab builds small layer-2 labs out of Linux network namespaces for the speaker's
// root tests (speaker/netns, a package of tests only), the failover benchmark and the e2e
// tests that enter a namespace (InNS): a bridge namespace, N node namespaces each running the real
// `metalgate speaker --static-config`, and a client namespace that observes ARP/NDP. Every
// namespace is named l2t-<id>-<role> and deleted when the test ends.
package netnslab
