// Package cluster is the speaker's side of the API server: it watches the objects
// speaker/config.Build needs and rebuilds the speaker's World on every change (Reconciler),
// records Events on Services when this node takes an address over (TakeoverEvents), and writes
// this node's entries of BGPPeer.status.nodes (BGPStatus). It writes nothing else.
package cluster
