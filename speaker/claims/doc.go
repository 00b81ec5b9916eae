// Package claims is the layer-2 claims state of the speakers: per node, the set of layer-2
// addresses it announces, with a version, and the wire format the speakers gossip it in.
//
// A speaker only ever sends its own claims; the others keep them while it is a live member
// and use them to keep an address where it is (speaker.Decide: the current owner keeps a
// layer-2 address while it is still a candidate).
package claims
