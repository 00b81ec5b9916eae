package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	v1alpha1 "github.com/metalgate/metalgate/api/v1alpha1"
)

// ErrClosed is returned by calls on a closed Speaker.
var ErrClosed = errors.New("bgp speaker closed")

const (
	defaultASN         = 64512
	defaultConnectTime = 5 * time.Second
	// gracefulRestartTime is the restart time announced in the graceful
	// restart capability: how long the router keeps our routes as stale
	// after the session dropped (FRR's own default is 120s too).
	gracefulRestartTime = 120
	// gracefulDeferralTime bounds how long a restarted speaker waits for
	// the routers' End-of-RIB before announcing (GoBGP's default: 360s).
	gracefulDeferralTime = 5
	importPolicy         = "metalgate-import"
)

// Speaker is a BGP speaker for one node: it keeps GoBGP's peers and local
// RIB equal to the desired state given to SetPeers and SetAdvertisements.
// Its methods are safe for concurrent use.
type Speaker struct {
	log       logr.Logger
	opts      Options
	srv       *server.BgpServer
	metrics   *metrics
	watchCtx  context.Context // cancelled by Close
	stopWatch context.CancelFunc

	mu        sync.Mutex // serialises SetPeers, SetAdvertisements and Close
	closed    bool
	adsSet    bool   // SetAdvertisements was called: sessions may start
	wantPeers []Peer // the last SetPeers
	gen       int
	peers     map[string]*peerEntry       // by Peer.Name
	paths     map[netip.Prefix]*pathEntry // installed in GoBGP's RIB

	stMu     sync.Mutex // guards sessions and failed; GoBGP's watcher writes them
	sessions map[netip.Addr]*session
	failed   map[string]PeerStatus // peers refused by the last SetPeers
	// bfd reads the BFD sessions' state at each scrape (with Options.Registerer).
	bfd *bfdSessions
}

// peerEntry is a peer configured in GoBGP with its export policy.
type peerEntry struct {
	cfg Peer
	// policy names the GoBGP export policy; policy+"-deny4" and
	// policy+"-deny6" its prefix sets. A new name per AddPeer keeps a
	// replaced peer's leftovers from clashing with the new ones.
	policy   string
	nh4, nh6 netip.Addr
	deny     map[netip.Prefix]struct{} // contents of the deny sets
}

// session is the observed state of one peer, keyed by address.
type session struct {
	name        string
	state       bgp.FSMState
	since       time.Time
	established int
	lastErr     string
	prefixes    int
}

// pathEntry is one prefix with its merged attributes.
type pathEntry struct {
	all   bool            // some Advertisement had no Peers
	peers map[string]bool // names from Advertisement.Peers
	key   string          // attributes, to compare with the installed path
	path  *apiutil.Path
}

func (p *pathEntry) allows(peer string) bool { return p.all || p.peers[peer] }

// New starts an embedded GoBGP server. It has no peers and advertises
// nothing until SetPeers and SetAdvertisements are called.
func New(logger logr.Logger, opts Options) (*Speaker, error) {
	if !opts.RouterID.Is4() {
		return nil, fmt.Errorf("router ID %v: must be an IPv4 address", opts.RouterID)
	}
	if opts.ASN == 0 {
		opts.ASN = defaultASN
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelInfo)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(logr.ToSlogHandler(logger.WithName("gobgp"))), lvl))
	go srv.Serve()
	s := &Speaker{
		log:      logger,
		opts:     opts,
		srv:      srv,
		metrics:  m,
		peers:    map[string]*peerEntry{},
		paths:    map[netip.Prefix]*pathEntry{},
		sessions: map[netip.Addr]*session{},
		failed:   map[string]PeerStatus{},
	}
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:          opts.ASN,
		RouterId:     opts.RouterID.String(),
		ListenPort:   opts.ListenPort,
		BindToDevice: opts.BindToDevice,
		// RIBs for what the node announces (apiPeer's AfiSafis) and nothing else: without a
		// list GoBGP makes a table for each of the 26 families it knows, in the global and
		// the route-server RIB, of 2,048 map shards each: 9.5 MiB of heap before the first
		// path (pprof of the speaker in hack/bench-scale.sh).
		Families: []uint32{
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
		},
	}}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("start GoBGP: %w", err)
	}
	// Accept nothing from the routers: the node only announces, and a route
	// learned from one router must never be passed on to another (the node
	// would become a transit path).
	// GoBGP runs its own paths through the global import policy too, so
	// accept the local ones and reject the rest.
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name: importPolicy,
		Statements: []*api.Statement{{
			Name:       importPolicy + "-local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("create GoBGP import policy: %w", err)
	}
	if err := srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          globalRIB,
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("set GoBGP import policy: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	s.watchCtx, s.stopWatch = wctx, cancel
	if err := srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onPeerUpdate}, server.WatchPeer()); err != nil {
		cancel()
		srv.Stop()
		return nil, fmt.Errorf("watch GoBGP peer events: %w", err)
	}
	if opts.Registerer != nil {
		s.bfd = newBFDSessions(s)
		if err := opts.Registerer.Register(s.bfd); err != nil {
			cancel()
			srv.Stop()
			return nil, fmt.Errorf("register BFD metrics: %w", err)
		}
	}
	return s, nil
}

// onPeerUpdate runs on GoBGP's watcher goroutine.
func (s *Speaker) onPeerUpdate(ev *apiutil.WatchEventMessage_PeerEvent, t time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := ev.Peer.State
	s.stMu.Lock()
	defer s.stMu.Unlock()
	ss, ok := s.sessions[st.NeighborAddress.Unmap()]
	if !ok || ss.state == st.SessionState {
		return
	}
	wasUp := ss.state == bgp.BGP_FSM_ESTABLISHED
	ss.state, ss.since = st.SessionState, t
	switch {
	case st.SessionState == bgp.BGP_FSM_ESTABLISHED:
		ss.established++
		ss.lastErr = ""
		s.metrics.established.WithLabelValues(ss.name).Inc()
		s.metrics.sessionUp.WithLabelValues(ss.name).Set(1)
		go s.resendOnceEstablished(st.NeighborAddress.Unmap())
	case wasUp:
		s.metrics.flaps.WithLabelValues(ss.name).Inc()
		s.metrics.sessionUp.WithLabelValues(ss.name).Set(0)
	}
	if st.DisconnectMessage != "" && st.SessionState != bgp.BGP_FSM_ESTABLISHED {
		ss.lastErr = st.DisconnectMessage
	}
	if f := s.opts.OnStateChange; f != nil {
		f(ss.name)
	}
}

// resendOnceEstablished works around a race in GoBGP v4.8.0: a session
// turns Established in two steps — the server sends the RIB to the peer,
// then the FSM stores its new state — and a path added between the two is
// neither in that first dump nor sent afterwards (GoBGP skips peers whose
// FSM is not Established yet). Seen as a router that never received a VIP
// added right after the session came up. Once ListPeer (which reads the
// FSM's state) reports Established, a soft reset out sends the whole RIB
// again; nothing can be lost after that point.
func (s *Speaker) resendOnceEstablished(addr netip.Addr) {
	ctx, cancel := context.WithTimeout(s.watchCtx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		up := false
		err := s.srv.ListPeer(ctx, &api.ListPeerRequest{Address: addr.String()}, func(p *api.Peer) {
			up = p.State != nil && p.State.SessionState == api.PeerState_SESSION_STATE_ESTABLISHED
		})
		if err != nil {
			return // removed or closed meanwhile
		}
		if up {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Soft: true, Direction: api.ResetPeerRequest_DIRECTION_OUT})
	if err != nil {
		s.log.V(1).Info("Resending the RIB after session up failed", "address", addr, "error", err.Error())
	}
}

// SetPeers makes the configured peers equal to peers. A peer whose
// configuration is unchanged keeps its session; a changed peer is removed
// and added again (its session resets); a removed peer's session is closed
// with a NOTIFICATION, so the router drops its routes at once. Invalid peers
// are refused (and removed, when they were configured before) and reported
// in the joined error and in Status; the others are still applied.
//
// Sessions only start once SetAdvertisements was called: a speaker that
// restarts under graceful restart sends End-of-RIB right after the session
// comes up, and the router then drops the stale routes that are not in our
// RIB yet. Until then, peers are validated and reported Idle.
func (s *Speaker) SetPeers(ctx context.Context, peers []Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.wantPeers = slices.Clone(peers)
	if s.adsSet {
		return s.applyPeers(ctx, peers)
	}
	want, failed, errs := s.planPeers(peers)
	for name, p := range want {
		failed[name] = PeerStatus{Name: name, Address: p.Address, SessionState: v1alpha1.SessionStateIdle, Since: time.Now()}
	}
	s.stMu.Lock()
	s.failed = failed
	s.stMu.Unlock()
	return errors.Join(errs...)
}

// planPeers validates peers: the valid ones by name, the refused ones'
// statuses and errors.
func (s *Speaker) planPeers(peers []Peer) (map[string]Peer, map[string]PeerStatus, []error) {
	var errs []error
	failed := map[string]PeerStatus{}
	fail := func(p Peer, err error) {
		err = fmt.Errorf("peer %q: %w", p.Name, err)
		errs = append(errs, err)
		failed[p.Name] = refused(p, err)
	}
	want := map[string]Peer{}
	byAddr := map[netip.Addr]string{}
	for _, p := range peers {
		p = normalizePeer(p)
		if err := s.validatePeer(p); err != nil {
			fail(p, err)
			continue
		}
		if _, dup := want[p.Name]; dup {
			fail(p, errors.New("duplicate peer name"))
			continue
		}
		if other, dup := byAddr[p.Address]; dup {
			fail(p, fmt.Errorf("address %v already used by peer %q", p.Address, other))
			continue
		}
		want[p.Name] = p
		byAddr[p.Address] = p.Name
	}
	return want, failed, errs
}

// applyPeers configures peers in GoBGP. Called with mu.
func (s *Speaker) applyPeers(ctx context.Context, peers []Peer) error {
	want, failed, errs := s.planPeers(peers)
	fail := func(p Peer, err error) {
		err = fmt.Errorf("peer %q: %w", p.Name, err)
		errs = append(errs, err)
		failed[p.Name] = refused(p, err)
	}
	for _, name := range sortedKeys(s.peers) {
		e := s.peers[name]
		if p, ok := want[name]; ok && peerEqual(p, e.cfg) {
			continue
		}
		if err := s.removePeer(ctx, name, e); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: remove: %w", name, err))
		}
	}
	for _, name := range sortedKeys(want) {
		if _, ok := s.peers[name]; ok {
			continue
		}
		if err := s.addPeer(ctx, want[name]); err != nil {
			fail(want[name], err)
		}
	}
	s.stMu.Lock()
	s.failed = failed
	s.stMu.Unlock()
	s.updateCounts()
	return errors.Join(errs...)
}

// refused is the status of a peer that could not be configured.
func refused(p Peer, err error) PeerStatus {
	return PeerStatus{Name: p.Name, Address: p.Address, SessionState: v1alpha1.SessionStateUnknown, LastError: err.Error(), Since: time.Now()}
}

func normalizePeer(p Peer) Peer {
	p.Address = p.Address.Unmap()
	p.SourceAddress = p.SourceAddress.Unmap()
	if p.Port == 0 {
		p.Port = 179
	}
	if p.ConnectTime == 0 {
		p.ConnectTime = defaultConnectTime
	}
	return p
}

func (s *Speaker) validatePeer(p Peer) error {
	switch {
	case p.Name == "":
		return errors.New("name must be set")
	case !p.Address.IsValid():
		return errors.New("address must be set")
	case p.PeerASN == 0:
		return errors.New("peer ASN must be set")
	case p.RouterID.IsValid() && p.RouterID != s.opts.RouterID:
		return fmt.Errorf("router ID %v differs from the speaker's %v: one router ID per node is supported", p.RouterID, s.opts.RouterID)
	case p.HoldTime != 0 && p.HoldTime < 3*time.Second:
		return errors.New("hold time must be 0 or at least 3s")
	case p.HoldTime != 0 && p.KeepaliveTime >= p.HoldTime:
		return errors.New("keepalive time must be less than the hold time")
	case p.BFD != nil && p.EBGPMultiHop:
		return errors.New("BFD on a multi-hop session is not supported")
	case p.BFD != nil && (p.BFD.DetectMultiplier > 255 || p.BFD.ReceiveInterval < 0 || p.BFD.TransmitInterval < 0):
		return errors.New("invalid BFD profile")
	}
	return nil
}

func peerEqual(a, b Peer) bool {
	if (a.BFD == nil) != (b.BFD == nil) || a.BFD != nil && *a.BFD != *b.BFD {
		return false
	}
	a.BFD, b.BFD = nil, nil
	return a == b
}

func (s *Speaker) addPeer(ctx context.Context, p Peer) error {
	s.gen++
	e := &peerEntry{cfg: p, policy: fmt.Sprintf("metalgate-%d", s.gen), deny: map[netip.Prefix]struct{}{}}
	e.nh4, e.nh6 = resolveNextHops(p)
	for pfx, pe := range s.paths {
		if !pe.allows(p.Name) {
			e.deny[pfx] = struct{}{}
		}
	}
	if err := s.createPolicy(ctx, e); err != nil {
		s.deletePolicy(ctx, e)
		return err
	}
	if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(e)}); err != nil {
		s.deletePolicy(ctx, e)
		return fmt.Errorf("add to GoBGP: %w", err)
	}
	s.peers[p.Name] = e
	s.stMu.Lock()
	s.sessions[p.Address] = &session{name: p.Name, state: bgp.BGP_FSM_IDLE, since: time.Now()}
	s.stMu.Unlock()
	s.metrics.sessionUp.WithLabelValues(p.Name).Set(0)
	s.log.V(1).Info("Added BGP peer", "peer", p.Name, "address", p.Address, "nextHopV4", e.nh4, "nextHopV6", e.nh6)
	return nil
}

func (s *Speaker) removePeer(ctx context.Context, name string, e *peerEntry) error {
	err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: e.cfg.Address.String()})
	s.deletePolicy(ctx, e)
	delete(s.peers, name)
	s.stMu.Lock()
	delete(s.sessions, e.cfg.Address)
	s.stMu.Unlock()
	s.metrics.forget(name)
	return err
}

// apiPeer is the GoBGP configuration of a peer.
func apiPeer(e *peerEntry) *api.Peer {
	p := e.cfg
	secs := func(d time.Duration) uint64 { return uint64(d / time.Second) }
	afi := func(a api.Family_Afi) *api.AfiSafi {
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: a, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}
		if p.GracefulRestart {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		return as
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.PeerASN,
			LocalAsn:        p.MyASN,
			AuthPassword:    p.Password,
			Description:     p.Name,
		},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          secs(p.HoldTime),
			KeepaliveInterval: secs(p.KeepaliveTime),
			ConnectRetry:      max(secs(p.ConnectTime), 1),
			// GoBGP waits 30s by default before reconnecting after a
			// session reset (BFD down, hold timer); a node should be back
			// as soon as the router is.
			IdleHoldTimeAfterReset: max(secs(p.ConnectTime), 1),
		}},
		AfiSafis: []*api.AfiSafi{afi(api.Family_AFI_IP), afi(api.Family_AFI_IP6)},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.EBGPMultiHop {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: 255}
	}
	if p.GracefulRestart {
		// A peer is only ever added by a speaker that starts (or whose
		// peer configuration changed), so announce a restart (RFC 4724
		// 4.1): the Restart State bit, and the Forwarding State bit per
		// family, which GoBGP only sets together. Without the F bit the
		// router must drop our stale routes as soon as the new session is
		// up, before our UPDATE arrives: a short outage, seen in the FRR
		// tests. The F bit is true: the node keeps forwarding to its VIPs
		// while the speaker restarts. GoBGP then waits for the router's
		// End-of-RIB (or the deferral time) before sending ours.
		ap.GracefulRestart = &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     gracefulRestartTime,
			LocalRestarting: true,
			DeferralTime:    gracefulDeferralTime,
		}
	}
	if b := p.BFD; b != nil {
		ap.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			DesiredMinimumTxInterval: uint32(b.TransmitInterval / time.Microsecond),
			RequiredMinimumReceive:   uint32(b.ReceiveInterval / time.Microsecond),
			DetectionMultiplier:      b.DetectMultiplier,
		}
	}
	return ap
}

// SetAdvertisements makes the advertised prefixes equal to ads. Only what
// changed is added to or deleted from GoBGP's RIB; Advertisements for the
// same prefix are merged (see the package documentation). Invalid
// Advertisements are reported in the joined error; the others are applied.
func (s *Speaker) SetAdvertisements(ctx context.Context, ads []Advertisement) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	want, errs := mergeAdvertisements(ads)
	// Deny before the paths are added, so nothing leaks meanwhile; lift denials only after
	// the paths they held back are gone.
	newDeny, reset, derrs := s.addDenies(ctx, want)
	errs = append(errs, derrs...)
	errs = append(errs, s.advertise(want)...)
	errs = append(errs, s.withdraw(want)...)
	errs = append(errs, s.liftDenies(ctx, want, newDeny)...)
	if !s.adsSet {
		s.adsSet = true
		if err := s.applyPeers(ctx, s.wantPeers); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.softReset(ctx, reset)...)
	s.updateCounts()
	return errors.Join(errs...)
}

// advertised reports whether pfx is installed in GoBGP's RIB.
func (s *Speaker) advertised(pfx netip.Prefix) bool { return s.paths[pfx] != nil }

// addDenies adds to every peer's deny sets the prefixes of want it must not receive
// (peerDenies). It returns each peer's next deny set and the peers that need a soft reset.
func (s *Speaker) addDenies(ctx context.Context, want map[netip.Prefix]*pathEntry) (newDeny map[string]map[netip.Prefix]struct{}, reset map[string]bool, errs []error) {
	reset = map[string]bool{}
	newDeny = map[string]map[netip.Prefix]struct{}{}
	for name, e := range s.peers {
		next, add, r := peerDenies(name, want, e.deny, s.advertised)
		if r {
			reset[name] = true
		}
		newDeny[name] = next
		if err := s.changeDenySets(ctx, e, add, true); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: %w", name, err))
		}
	}
	return newDeny, reset, errs
}

// peerDenies compares what peer name must not receive under want with what it is denied now
// (cur). next is its new deny set and add what next denies that cur does not. reset says
// that the peer needs a soft reset: its deny set changes for a prefix that is advertised, and
// GoBGP applies export policy when a path changes, not when a policy's prefix set does.
func peerDenies(name string, want map[netip.Prefix]*pathEntry, cur map[netip.Prefix]struct{}, advertised func(netip.Prefix) bool) (next map[netip.Prefix]struct{}, add []netip.Prefix, reset bool) {
	next = map[netip.Prefix]struct{}{}
	for pfx, pe := range want {
		_, was := cur[pfx]
		if pe.allows(name) {
			if was && advertised(pfx) {
				reset = true
			}
			continue
		}
		next[pfx] = struct{}{}
		if !was {
			add = append(add, pfx)
			if advertised(pfx) {
				reset = true
			}
		}
	}
	return next, add, reset
}

// advertise adds the paths of want that GoBGP does not have yet (or has with other
// attributes), one path per call.
func (s *Speaker) advertise(want map[netip.Prefix]*pathEntry) (errs []error) {
	for _, pfx := range sortedPrefixes(want) {
		pe := want[pfx]
		if cur, ok := s.paths[pfx]; ok && cur.key == pe.key {
			s.paths[pfx] = pe
			continue
		}
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{pe.path}}); err != nil {
			errs = append(errs, fmt.Errorf("advertise %v: %w", pfx, err))
			continue
		}
		s.paths[pfx] = pe
	}
	return errs
}

// withdraw deletes the paths that want no longer has.
func (s *Speaker) withdraw(want map[netip.Prefix]*pathEntry) (errs []error) {
	for _, pfx := range sortedPrefixes(s.paths) {
		if _, ok := want[pfx]; ok {
			continue
		}
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{s.paths[pfx].path}}); err != nil {
			errs = append(errs, fmt.Errorf("withdraw %v: %w", pfx, err))
			continue
		}
		delete(s.paths, pfx)
	}
	return errs
}

// liftDenies removes from every peer's deny sets what newDeny no longer holds (liftedDenies).
func (s *Speaker) liftDenies(ctx context.Context, want map[netip.Prefix]*pathEntry, newDeny map[string]map[netip.Prefix]struct{}) (errs []error) {
	for name, e := range s.peers {
		del := liftedDenies(e.deny, newDeny[name], want, s.advertised)
		if err := s.changeDenySets(ctx, e, del, false); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: %w", name, err))
		}
	}
	return errs
}

// liftedDenies are the prefixes of cur that next no longer denies, except those still
// advertised though no longer wanted: their withdrawal failed, so they stay filtered.
func liftedDenies(cur, next map[netip.Prefix]struct{}, want map[netip.Prefix]*pathEntry, advertised func(netip.Prefix) bool) []netip.Prefix {
	var del []netip.Prefix
	for pfx := range cur {
		if _, keep := next[pfx]; keep {
			continue
		}
		if want[pfx] == nil && advertised(pfx) {
			continue
		}
		del = append(del, pfx)
	}
	return del
}

// softReset asks GoBGP to send the peers named in reset their routes again under the current
// export policy.
func (s *Speaker) softReset(ctx context.Context, reset map[string]bool) (errs []error) {
	for _, name := range sortedKeys(reset) {
		err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{
			Address:   s.peers[name].cfg.Address.String(),
			Soft:      true,
			Direction: api.ResetPeerRequest_DIRECTION_OUT,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %q: soft reset: %w", name, err))
		}
	}
	return errs
}

// mergeAdvertisements groups ads by prefix and builds one GoBGP path each.
func mergeAdvertisements(ads []Advertisement) (map[netip.Prefix]*pathEntry, []error) {
	var errs []error
	type merged struct {
		localPref uint32
		comms     []uint32
		large     []LargeCommunity
		all       bool
		peers     map[string]bool
	}
	m := map[netip.Prefix]*merged{}
	for _, a := range ads {
		if !a.Prefix.IsValid() {
			errs = append(errs, fmt.Errorf("advertisement %v: invalid prefix", a.Prefix))
			continue
		}
		pfx := netip.PrefixFrom(a.Prefix.Addr().Unmap(), a.Prefix.Bits()).Masked()
		if a.Prefix.Addr().Is4In6() {
			pfx = netip.PrefixFrom(a.Prefix.Addr().Unmap(), a.Prefix.Bits()-96).Masked()
		}
		if !pfx.IsValid() {
			errs = append(errs, fmt.Errorf("advertisement %v: invalid prefix", a.Prefix))
			continue
		}
		x := m[pfx]
		if x == nil {
			x = &merged{peers: map[string]bool{}}
			m[pfx] = x
		}
		x.localPref = max(x.localPref, a.LocalPref)
		x.comms = append(x.comms, a.Communities...)
		x.large = append(x.large, a.LargeCommunities...)
		if len(a.Peers) == 0 {
			x.all = true
		}
		for _, p := range a.Peers {
			x.peers[p] = true
		}
	}
	out := make(map[netip.Prefix]*pathEntry, len(m))
	for pfx, x := range m {
		slices.Sort(x.comms)
		x.comms = slices.Compact(x.comms)
		slices.SortFunc(x.large, func(a, b LargeCommunity) int {
			if a.GlobalAdmin != b.GlobalAdmin {
				return cmpU32(a.GlobalAdmin, b.GlobalAdmin)
			}
			if a.LocalData1 != b.LocalData1 {
				return cmpU32(a.LocalData1, b.LocalData1)
			}
			return cmpU32(a.LocalData2, b.LocalData2)
		})
		x.large = slices.Compact(x.large)
		path, err := newPath(pfx, x.localPref, x.comms, x.large)
		if err != nil {
			errs = append(errs, fmt.Errorf("advertisement %v: %w", pfx, err))
			continue
		}
		out[pfx] = &pathEntry{
			all:   x.all,
			peers: x.peers,
			key:   fmt.Sprint(x.localPref, x.comms, x.large),
			path:  path,
		}
	}
	return out, errs
}

func cmpU32(a, b uint32) int {
	if a < b {
		return -1
	}
	return 1
}

// newPath builds a locally originated path. The next hop is unspecified
// (0.0.0.0 or ::): GoBGP then uses the session's local address, or the
// export policy sets the node's address of the other family.
func newPath(pfx netip.Prefix, localPref uint32, comms []uint32, large []LargeCommunity) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(pfx)
	if err != nil {
		return nil, err
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	family := bgp.RF_IPv4_UC
	if pfx.Addr().Is4() {
		nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, nh)
	} else {
		family = bgp.RF_IPv6_UC
		mp, err := bgp.NewPathAttributeMpReachNLRI(family, []bgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, mp)
	}
	if localPref != 0 {
		attrs = append(attrs, bgp.NewPathAttributeLocalPref(localPref))
	}
	if len(comms) > 0 {
		attrs = append(attrs, bgp.NewPathAttributeCommunities(comms))
	}
	if len(large) > 0 {
		l := make([]*bgp.LargeCommunity, len(large))
		for i, c := range large {
			l[i] = bgp.NewLargeCommunity(c.GlobalAdmin, c.LocalData1, c.LocalData2)
		}
		attrs = append(attrs, bgp.NewPathAttributeLargeCommunities(l))
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs}, nil
}

// updateCounts recomputes the prefixes each peer is sent. Called with mu.
func (s *Speaker) updateCounts() {
	counts := map[string]int{}
	for name, e := range s.peers {
		n := 0
		for pfx, pe := range s.paths {
			if pe.allows(name) && e.sends(pfx) {
				n++
			}
		}
		counts[name] = n
		s.metrics.prefixes.WithLabelValues(name).Set(float64(n))
	}
	s.stMu.Lock()
	defer s.stMu.Unlock()
	for _, ss := range s.sessions {
		ss.prefixes = counts[ss.name]
	}
}

// sends reports whether the family of pfx can be sent to the peer: the
// session's own family always, the other one with a next hop of that family.
func (e *peerEntry) sends(pfx netip.Prefix) bool {
	if pfx.Addr().Is4() == e.cfg.Address.Is4() {
		return true
	}
	if pfx.Addr().Is4() {
		return e.nh4.IsValid()
	}
	return e.nh6.IsValid()
}

// Status reports every peer given to the last SetPeers, sorted by name.
func (s *Speaker) Status() []PeerStatus {
	s.stMu.Lock()
	defer s.stMu.Unlock()
	out := make([]PeerStatus, 0, len(s.sessions)+len(s.failed))
	for addr, ss := range s.sessions {
		out = append(out, PeerStatus{
			Name:               ss.name,
			Address:            addr,
			SessionState:       sessionState(ss.state),
			PrefixesAdvertised: ss.prefixes,
			LastError:          ss.lastErr,
			Since:              ss.since,
			EstablishedCount:   ss.established,
		})
	}
	for _, f := range s.failed {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sessionState(s bgp.FSMState) string {
	switch s {
	case bgp.BGP_FSM_IDLE:
		return v1alpha1.SessionStateIdle
	case bgp.BGP_FSM_CONNECT:
		return v1alpha1.SessionStateConnect
	case bgp.BGP_FSM_ACTIVE:
		return v1alpha1.SessionStateActive
	case bgp.BGP_FSM_OPENSENT:
		return v1alpha1.SessionStateOpenSent
	case bgp.BGP_FSM_OPENCONFIRM:
		return v1alpha1.SessionStateOpenConfirm
	case bgp.BGP_FSM_ESTABLISHED:
		return v1alpha1.SessionStateEstablished
	}
	return v1alpha1.SessionStateUnknown
}

// Close stops the speaker. Without graceful restart peers, GoBGP closes
// every session with a NOTIFICATION (Cease) and the routers withdraw the
// node's routes at once.
//
// With graceful restart peers, the sessions must end without a NOTIFICATION
// for the routers to keep the routes. GoBGP v4.8.0 cannot do that:
// StopBgpRequest.AllowGracefulRestart only skips the NOTIFICATION when the
// peer's GracefulRestart.State.Enabled is set, and nothing in v4.8.0 ever
// sets it (pkg/server/peer.go isGracefulRestartEnabled); the RFC 8538
// alternative is no help either, since GoBGP turns the "peer de-configured"
// Cease into a Hard Reset, which flushes the routes. So Close then leaves
// GoBGP running and returns: the caller is expected to exit, and the kernel
// closing the sockets (FIN, no NOTIFICATION) starts graceful restart on the
// routers.
func (s *Speaker) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.bfd != nil {
		s.opts.Registerer.Unregister(s.bfd)
	}
	for _, e := range s.peers {
		if e.cfg.GracefulRestart {
			s.log.Info("Leaving BGP sessions open for graceful restart: exit the process to close them")
			return nil
		}
	}
	s.stopWatch()
	done := make(chan error, 1)
	go func() {
		err := s.srv.StopBgp(ctx, &api.StopBgpRequest{})
		// Stop also shuts down GoBGP's BFD server, which StopBgp leaves
		// running; its own StopBgp call fails harmlessly (logged by GoBGP).
		s.srv.Stop()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedPrefixes[V any](m map[netip.Prefix]V) []netip.Prefix {
	keys := make([]netip.Prefix, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return keys
}
