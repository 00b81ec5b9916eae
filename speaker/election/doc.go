// Package election decides, without any I/O, which node announces each address: every speaker
// runs it on the same view and gets the same answer.
//
// The owner of an address is chosen by rendezvous (highest random weight) hashing over the
// candidate nodes: weight(node, vip) = sha256(node + "#" + vip), the highest weight wins, ties
// (which need a sha256 collision) go to the smaller name. Compared with "sort and take
// hash mod n", a node joining or leaving only moves the addresses it wins or owned, and the
// addresses spread evenly over the nodes.
package election
