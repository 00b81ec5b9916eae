// Package netnslab builds small labs out of Linux network namespaces for root tests. Both kinds
// are a bridge namespace with host namespaces attached to it by veths (eth0 inside), named
// <prefix><id>-<role> with a random id per lab, and torn down when the test ends: whatever still
// runs in them is killed and the namespaces deleted. NETNSLAB_PREFIX, when set, goes before
// every name (NETNSLAB_PREFIX=h27c- gives h27c-l2t-<id>-n1): labs of several people on one
// machine stay apart by name.
//
//   - Lab (New, prefix l2t-): N node namespaces each running the real
//     `metalgate speaker --static-config`, and a client namespace that observes ARP/NDP
//     (Observer); used by speaker/netns (a package of tests only), the failover benchmark and
//     the e2e tests that enter a namespace (with internal/nsexec).
//   - FRR (NewFRR, prefix frrt-): a router namespace running FRR (zebra, bfdd, bgpd) and a
//     speaker namespace, with Vtysh, Route, Has, NeighborState and a kernel RouteMonitor; used
//     by speaker/bgp's tests, which run their speaker in the speaker namespace.
package netnslab
