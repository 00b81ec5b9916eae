// Package gateway gives every Gateway of a metalgate GatewayClass its own VIP: it accepts the
// GatewayClasses whose controllerName is metalgate's, and for each Gateway of one of them keeps
// a LoadBalancer Service in metalgate's namespace that the Service controller (package
// controllers) allocates an address for, as for any Service; the Gateway's status reports that
// address, its listeners, and why there is none while there is none.
//
// One Gateway reconcile:
//
//	Gateway ──class ours? no──► delete our Service for it (if any); never touch the Gateway
//	        ──Plan (pure: listeners, addresses → ports, annotations, conditions)──►
//	        create/update Service gw-<ns>-<name>-<hash> in metalgate-system (labels + annotation
//	        name the Gateway: owner references cannot cross namespaces)
//	        ──Service.status VIPs, or the allocator's last Warning event──► Gateway.status
//
// Deleted Gateways are found from the Service side: every Service this package made names its
// Gateway; a reconcile of a Gateway that no longer exists (or is no longer ours) deletes it.
package gateway
