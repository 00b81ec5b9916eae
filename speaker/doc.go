// Package speaker makes allocated LoadBalancer addresses reachable: it turns the cluster's view
// (which VIPs exist, which nodes may announce them) and the live speaker membership into the set of
// announcements this node must make, and hands that set to one Announcer per announcement mode.
//
// The decision (who announces what) is pure and lives in speaker/election and speaker/config; the
// wire work (ARP, NDP, BGP) lives behind the Announcer interface, so a BGP announcer plugs in the
// same way as layer 2 (speaker/layer2).
package speaker
