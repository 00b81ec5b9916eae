// Package controllers holds the controller-runtime reconcilers of `metalgate controller`: the
// Service reconciler that assigns LoadBalancer addresses from IPAddressPools (through the pure
// allocator, with an IPAddressClaim per address so the API server is the lock) and the
// IPAddressPool reconciler that reports usage and overlaps in each pool's status, and the
// references reconcilers (refs_controller.go) that write the Valid condition of
// L2Advertisements, BGPAdvertisements, BGPPeers, BFDProfiles and Communities from
// internal/refcheck.
//
// Layout of one Service reconcile:
//
//	Service ──request──► allocator.Assign ──addresses──► claim each (create IPAddressClaim named
//	after the address; AlreadyExists → ours? shareable? stale? else mark taken and try again)
//	        ──► Service.status.loadBalancer.ingress + pool annotation ──► release old claims
package controllers
