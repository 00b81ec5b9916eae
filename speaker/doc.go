// Package speaker makes allocated LoadBalancer addresses reachable: it turns the cluster's view
// (which VIPs exist, which nodes may announce them) and the live speaker membership into the set of
// announcements this node must make, and hands that set to one Announcer per announcement mode.
//
// The decision (who announces what) is pure: Decide, over speaker/election, from a World that
// speaker/config builds. The wire work lives behind the Announcer interface, one implementation
// per mode in its own package (speaker/layer2: ARP/NDP; speaker/bgp: BGP); the core knows the
// modes by name only and passes their configuration (World.Modes) and per-address parameters
// (VIP.Params) through without knowing their types.
package speaker
