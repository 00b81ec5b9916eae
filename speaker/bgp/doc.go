// Package bgp announces a node's service addresses to BGP routers with an
// embedded GoBGP speaker, driven by desired state: the caller says which
// peers to talk to and which prefixes to advertise, and the package makes the
// BGP sessions and the routes match.
//
// It is the only package of metalgate that imports GoBGP. Announcer
// (announcer.go) is the speaker's ModeBGP speaker.Announcer over it;
// speaker/config converts the CRDs into Config, Peer and Advertisement.
//
// # Design
//
// One GoBGP server per node holds every peer and one local RIB; a prefix is
// one path in it. What a given peer receives is decided by export policy
// (see policy.go): GoBGP only applies per-neighbor export policies to
// route-server clients, so each peer instead gets its own policy in the
// global export assignment, every statement of which first matches the
// peer's neighbor set:
//
//   - a prefix whose Advertisements name other peers is in the peer's
//     "deny" prefix sets (one per address family: GoBGP prefix sets are
//     single-family) and rejected; when such a membership changes for a
//     prefix that stays advertised, a soft reset out re-evaluates it;
//   - IPv6 prefixes sent over an IPv4 session (and IPv4 prefixes over an
//     IPv6 session) get the node's address of the other family as next hop
//     (Peer.NextHopV6/NextHopV4, or found on the interface holding the
//     session's source address). GoBGP would otherwise put the IPv4
//     session address into MP_REACH_NLRI as ::ffff:a.b.c.d, which routers
//     cannot use. Without such an address those prefixes are not sent to
//     that peer.
//
// Nothing learned from the routers is accepted (global import policy:
// local paths only), so a node never passes one router's routes on to
// another.
//
// Several Advertisements for one prefix are merged: the union of their
// communities and large communities, the highest LOCAL_PREF, the union of
// their peers. Sending one prefix with different attributes to different
// peers is not supported.
//
// # Failure detection
//
// BFD: GoBGP v4.8.0 implements single-hop asynchronous BFD (RFC 5880/5881,
// UDP 3784, TTL 255) per neighbor through api.Peer.Bfd (intervals in
// microseconds; defaults 1s x 3). When the BFD session expires, or the
// router signals it down, GoBGP resets the BGP session. Limits, all in
// GoBGP: no echo mode, no passive mode, no multi-hop BFD (RFC 5883), so
// speaker/config refuses profiles asking for them; and the BFD packets are not
// bound to Peer.SourceAddress, the kernel picks their source, so with BFD
// the session's source address must be the one the kernel would choose
// (the interface's primary address) or the router never brings BFD up.
// Measured against FRR 8.4 with 100ms x 3: a frozen speaker or a cut link
// is withdrawn in about 300ms instead of the hold time (bench/bench-bgp.sh).
//
// # Graceful restart
//
// With Peer.GracefulRestart the speaker announces the graceful restart
// capability (RFC 4724, restart time 120s) for IPv4 and IPv6 unicast, and
// sends End-of-RIB. When a session ends without a NOTIFICATION (the process
// exits or dies: the kernel closes the socket), the router keeps the routes
// as stale until the restarted speaker re-announces them and sends
// End-of-RIB, or the restart time runs out.
//
// Every session the speaker opens announces a restart: the Restart State
// bit, and the Forwarding State bit per family (true: the node keeps
// forwarding to its VIPs while the speaker restarts). Without the F bit
// the router must drop the stale routes as soon as the new session is up,
// before our UPDATE arrives (RFC 4724 4.2), which the FRR tests caught as
// a brief withdrawal. GoBGP then waits for the router's End-of-RIB (at
// most 5s) before announcing. And sessions start only after the first
// SetAdvertisements, so End-of-RIB never goes out before the table is
// complete.
//
// GoBGP v4.8.0 cannot end a session without a NOTIFICATION:
// StopBgpRequest.AllowGracefulRestart only skips it for peers whose
// GracefulRestart.State.Enabled is set, which nothing in v4.8.0 sets
// (pkg/server/peer.go isGracefulRestartEnabled); and with the RFC 8538 N
// bit GoBGP turns the "peer de-configured" Cease into a Hard Reset, which
// flushes the routes too. So Close, when a peer uses graceful restart,
// leaves the sessions open and expects the process to exit. The price of
// graceful restart: a node that dies for good keeps its routes on the
// router for the restart time (how FRR combines BFD down with graceful
// restart was not tested).
package bgp
