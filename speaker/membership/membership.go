package membership

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"

	"github.com/metalgate/metalgate/speaker/claims"
)

// Options configure a Membership.
type Options struct {
	// Name is this speaker's name in the cluster: the node name. Required.
	Name string
	// BindAddr is the address memberlist listens on (UDP and TCP): the node IP. Required.
	BindAddr string
	// BindPort defaults to 7946; 0 after defaulting is not possible, use -1 for a random port
	// (tests).
	BindPort int
	// Logger receives memberlist's own log at V(1). Defaults to logr.Discard().
	Logger logr.Logger
	// OnChange is called, on memberlist's goroutine, whenever a member joins, leaves, dies or
	// changes. It must not block.
	OnChange func()
	// Tune, if set, may change the memberlist configuration after the defaults of Config.
	Tune func(*memberlist.Config)
	// PingInterval is how often every member is pinged directly for Reachable. Defaults to 50ms.
	PingInterval time.Duration
	// FenceWindow is how recent a member's last ping answer must be for Reachable. Defaults to
	// 250ms: shorter than the quickest possible failure declaration by the others
	// (ProbeInterval + suspicion = 450ms), so a cut-off speaker fences first.
	FenceWindow time.Duration
	// Keys are the speaker cluster's shared keys (ReadKeyDir). Required: memberlist encrypts
	// and authenticates every packet and stream with them, and the quorum pings are signed
	// with them.
	Keys Keys
	// Metrics defaults to unregistered metrics.
	Metrics *Metrics
	// RefusalLogInterval: at most one log line per refusal reason per interval. Defaults to
	// 10s.
	RefusalLogInterval time.Duration
}

// Config returns the memberlist configuration used by New, tuned for sub-second failure
// detection on a LAN (docs/speaker.md derives the worst case):
//
//	ProbeInterval           150ms  each member probes one other member per interval
//	ProbeTimeout            100ms  wait for a direct ack before asking others to probe
//	IndirectChecks          2      members asked to probe indirectly
//	SuspicionMult           2      suspect → dead after 2 × max(1, log10(n)) × ProbeInterval = 300ms (n < 10)
//	SuspicionMaxTimeoutMult 2      (no effect while SuspicionMult-2 < 1 confirmation is needed)
//	AwarenessMaxMultiplier  2      a slow (overloaded) member stretches its probes at most 2×
//	GossipInterval          50ms   suspect/dead/alive messages spread within ~2 rounds
//	GossipToTheDeadTime     2s
//	PushPullInterval        10s    full state sync (anti-entropy)
//	TCPTimeout              1s
func Config(name string) *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = name
	c.ProbeInterval = 150 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.IndirectChecks = 2
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 2
	c.AwarenessMaxMultiplier = 2
	c.GossipInterval = 50 * time.Millisecond
	c.GossipToTheDeadTime = 2 * time.Second
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = time.Second
	return c
}

// Membership is this speaker's view of the live speakers.
//
// Only speakers are members (docs/speaker.md, "Trust"): memberlist encrypts and authenticates
// everything with the cluster key (Options.Keys); the transport drops packets and streams that
// do not come from the address of a node running a speaker (Admit); memberlist's alive and
// merge delegates refuse a member whose name is not such a node or whose address is not that
// node's; and the quorum pings behind Reachable are signed and carry a nonce that the answer
// must echo.
type Membership struct {
	name     string
	ml       *memberlist.Memberlist
	ring     *memberlist.Keyring
	adm      *admission
	refused  *refusalLog
	metrics  *Metrics
	onChange func()
	every    time.Duration
	window   time.Duration
	stop     chan struct{}
	done     chan struct{}

	keyMu sync.Mutex // serialises SetKeys
	cur   Keys
	keys  atomic.Pointer[derivedKeys]

	claims *claims.Store                    // this speaker's layer-2 claims and the live members'
	bcast  *memberlist.TransmitLimitedQueue // this speaker's claims, gossiped on change and on joins

	mu        sync.Mutex
	left      bool
	members   map[string]netip.AddrPort // the other live members, copied from memberlist's events
	peers     map[string]*peer          // quorum ping state of the current members, pruned as they go
	reachable map[string]bool           // last computed, for change detection
	claimsDue map[string]int            // members still to be sent this speaker's claims directly, how many times
	claiming  map[string]bool           // members that send claims (their node metadata says so)
}

// errIngest: see filterTransport.IngestPacket.
var errIngest = errors.New("membership: ingesting packets past the source-address gate is not supported")

// New starts memberlist on opts.BindAddr:opts.BindPort. It knows only itself until Join, and
// admits nobody else until Admit.
func New(opts Options) (*Membership, error) {
	if opts.Name == "" || opts.BindAddr == "" {
		return nil, errors.New("membership: Name and BindAddr are required")
	}
	if len(opts.Name) > claims.MaxNameLen {
		return nil, fmt.Errorf("membership: Name of %d bytes, at most %d", len(opts.Name), claims.MaxNameLen)
	}
	selfAddr, err := netip.ParseAddr(opts.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("membership: BindAddr: %w", err)
	}
	if err := opts.Keys.validate(); err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	c := Config(opts.Name)
	c.BindAddr, c.AdvertiseAddr = opts.BindAddr, opts.BindAddr
	c.BindPort = bindPort(opts.BindPort)
	lg := opts.Logger
	if lg.GetSink() == nil {
		lg = logr.Discard()
	}
	m := newMembership(opts, lg, selfAddr)

	dk := deriveAll(opts.Keys)
	if m.ring, err = memberlist.NewKeyring(dk.memberlist[1:], dk.memberlist[0]); err != nil {
		return nil, fmt.Errorf("membership: keyring: %w", err)
	}
	m.keys.Store(&dk)
	m.cur = opts.Keys
	m.keyMetrics()
	c.Keyring = m.ring
	c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
	c.Alive, c.Merge = m.adm, m.adm
	c.Delegate = delegate{m}
	c.Events = events{m}
	c.Logger = log.New(logWriter{l: lg.V(1), refuse: m.refused.refuse}, "", 0)

	nt, err := netTransport(opts.BindAddr, c.BindPort, c.Logger)
	if err != nil {
		return nil, fmt.Errorf("start memberlist on %s:%d: %w", opts.BindAddr, c.BindPort, err)
	}
	if c.BindPort == 0 {
		c.BindPort = nt.GetAutoBindPort()
	}
	c.AdvertisePort = c.BindPort
	ft := newFilterTransport(nt, net.ParseIP(opts.BindAddr), m.adm.fromSpeaker, m.refused.refuse)
	c.Transport = ft
	if opts.Tune != nil {
		opts.Tune(c)
	}
	ml, err := memberlist.Create(c)
	if err != nil {
		_ = ft.Shutdown()
		return nil, fmt.Errorf("start memberlist on %s:%d: %w", opts.BindAddr, c.BindPort, err)
	}
	m.ml = ml
	go m.pingLoop()
	return m, nil
}

// bindPort is the port memberlist binds: Options.BindPort, 7946 when 0, and any free port
// (0 to the kernel) when negative.
func bindPort(p int) int {
	switch {
	case p == 0:
		return 7946
	case p < 0:
		return 0
	default:
		return p
	}
}

// newMembership is the Membership of opts, with the defaults of Options applied, before
// memberlist runs.
func newMembership(opts Options, lg logr.Logger, selfAddr netip.Addr) *Membership {
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.RefusalLogInterval == 0 {
		opts.RefusalLogInterval = 10 * time.Second
	}
	m := &Membership{
		name: opts.Name, onChange: opts.OnChange, every: opts.PingInterval, window: opts.FenceWindow,
		metrics: opts.Metrics, refused: newRefusalLog(lg, opts.Metrics, opts.RefusalLogInterval),
		stop: make(chan struct{}), done: make(chan struct{}),
		members: map[string]netip.AddrPort{}, peers: map[string]*peer{}, reachable: map[string]bool{},
	}
	if m.every == 0 {
		m.every = 50 * time.Millisecond
	}
	if m.window == 0 {
		m.window = 250 * time.Millisecond
	}
	m.adm = &admission{self: opts.Name, selfAddr: selfAddr.Unmap(), refuse: m.refused.refuse}
	m.adm.set(nil)
	m.claimsDue, m.claiming = map[string]int{}, map[string]bool{}
	m.claims, _ = claims.NewStore(opts.Name, time.Now(), m.isMember) // Name is checked by New (1..253 bytes: admission)
	m.bcast = &memberlist.TransmitLimitedQueue{NumNodes: m.numMembers, RetransmitMult: claimsRetransmitMult}
	return m
}

// netTransport opens memberlist's UDP and TCP listeners. With port 0 the kernel picks the TCP
// port and UDP may find it taken: retry, as memberlist.Create does for its own transport.
func netTransport(addr string, port int, logger *log.Logger) (*memberlist.NetTransport, error) {
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{addr}, BindPort: port, Logger: logger}); err == nil {
			return nt, nil
		}
	}
	return nil, err
}

// Admit replaces the set of speakers that may be members: node name → the node's addresses
// (speaker.World.SpeakerAddrs). Packets and streams from other addresses are dropped, and a
// member is admitted only under its node's name with one of its node's addresses. This
// speaker is always admitted. Members admitted before and no longer listed stay until
// memberlist declares them dead, which it soon does: their packets are dropped from now on.
func (m *Membership) Admit(nodes map[string][]netip.Addr) { m.adm.set(nodes) }

// SetKeys replaces the keys (rotation: docs/speaker.md, "Rotating the key"). Keys already
// installed stay; new ones are accepted at once; k.Primary becomes the key this speaker sends
// with; keys not in k are no longer accepted.
func (m *Membership) SetKeys(k Keys) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("membership: %w", err)
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	if k.Equal(m.cur) {
		return nil
	}
	dk := deriveAll(k)
	for _, key := range dk.memberlist {
		if err := m.ring.AddKey(key); err != nil {
			return fmt.Errorf("membership: add key: %w", err)
		}
	}
	// memberlist's Keyring.RemoveKey shifts the remaining keys down in place, in the array that
	// a goroutine decrypting a packet may be reading (a data race); removing the last key moves
	// nothing. UseKey puts a key first and rebuilds the array, so using every other key once
	// leaves the one to remove last.
	for _, old := range m.ring.GetKeys() {
		if slices.ContainsFunc(dk.memberlist, func(k []byte) bool { return bytes.Equal(k, old) }) {
			continue
		}
		for _, other := range m.ring.GetKeys() {
			if !bytes.Equal(other, old) {
				if err := m.ring.UseKey(other); err != nil {
					return fmt.Errorf("membership: reorder keys: %w", err)
				}
			}
		}
		if err := m.ring.RemoveKey(old); err != nil {
			return fmt.Errorf("membership: remove key: %w", err)
		}
	}
	if err := m.ring.UseKey(dk.memberlist[0]); err != nil {
		return fmt.Errorf("membership: use key: %w", err)
	}
	m.keys.Store(&dk)
	m.cur = k
	m.keyMetrics()
	return nil
}

func (m *Membership) keyMetrics() {
	m.metrics.Keys.Set(float64(1 + len(m.cur.Others)))
	m.metrics.PrimaryKey.Reset()
	m.metrics.PrimaryKey.WithLabelValues(Fingerprint(m.cur.Primary)).Set(1)
}

// pendingPings is how many unanswered pings per peer are remembered: enough for every ping of
// one fence window.
func (m *Membership) pendingPings() int { return int(m.window/m.every) + 2 }

// peer is the quorum ping state of one member. Its size is fixed, and it is deleted when the
// member is no longer a live member, so the state is bounded by the admitted speakers.
type peer struct {
	lastAck time.Time
	sent    []sentPing // ring of the last pings
	next    int
}

type sentPing struct {
	nonce [nonceLen]byte
	at    time.Time
}

// answered records a pong for nonce received at now: it counts when the nonce was sent to this
// peer within window, once.
func (p *peer) answered(nonce [nonceLen]byte, now time.Time, window time.Duration) bool {
	for i := range p.sent {
		s := &p.sent[i]
		if s.at.IsZero() || s.nonce != nonce {
			continue
		}
		at := s.at
		*s = sentPing{}
		if now.Sub(at) > window {
			return false
		}
		if at.After(p.lastAck) {
			p.lastAck = at // the peer answered a ping sent then: reachable as of then
		}
		return true
	}
	return false
}

// pingLoop pings every known member each interval and calls onChange when Reachable changes.
// memberlist itself probes one member per ProbeInterval and slows down when it is the one in
// trouble (Lifeguard), which is right for failure detection but too slow for fencing: a
// cut-off node would notice its isolation after the others have declared it dead.
func (m *Membership) pingLoop() {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.pingAll(time.Now())
		r := m.Reachable()
		m.mu.Lock()
		changed := !maps.Equal(r, m.reachable)
		m.reachable = r
		m.mu.Unlock()
		if changed && m.onChange != nil {
			m.onChange()
		}
	}
}

// pingAll sends a signed ping with a fresh nonce to every member, and forgets the state of
// those that are no longer members.
func (m *Membership) pingAll(now time.Time) {
	key := m.keys.Load().ping[0]
	type send struct {
		to  memberlist.Address
		msg []byte
	}
	m.mu.Lock()
	sends := make([]send, 0, len(m.members))
	for name, addr := range m.members {
		p := m.peers[name]
		if p == nil {
			p = &peer{sent: make([]sentPing, m.pendingPings())}
			m.peers[name] = p
		}
		msg := pingMsg{Kind: kindPing, From: m.name, To: name}
		_, _ = rand.Read(msg.Nonce[:]) // never fails (crypto/rand)
		b, err := msg.encode(key)
		if err != nil {
			continue // a name too long to be a node's: not admitted anyway
		}
		p.sent[p.next] = sentPing{nonce: msg.Nonce, at: now}
		p.next = (p.next + 1) % len(p.sent)
		sends = append(sends, send{memberlist.Address{Addr: addr.String(), Name: name}, b})
	}
	for name := range m.peers {
		if _, ok := m.members[name]; !ok {
			delete(m.peers, name)
		}
	}
	if len(m.claimsDue) > 0 {
		own := m.claims.Own()
		for name, n := range m.claimsDue {
			addr, ok := m.members[name]
			if !ok || n <= 1 {
				delete(m.claimsDue, name)
			} else {
				m.claimsDue[name] = n - 1
			}
			if ok {
				sends = append(sends, send{memberlist.Address{Addr: addr.String(), Name: name}, own})
			}
		}
	}
	m.mu.Unlock()
	for _, s := range sends {
		_ = m.ml.SendToAddress(s.to, s.msg) // UDP; a lost ping is a missed answer
	}
}

// handlePing handles a quorum ping or pong (a memberlist user message: it was decrypted with a
// cluster key and came from a speaker's node address).
func (m *Membership) handlePing(b []byte) {
	keys := m.keys.Load()
	msg, err := parsePing(b, keys.ping)
	switch {
	case errors.Is(err, errPingMalformed):
		m.refused.refuse(RefusedPingMalformed, "", netip.Addr{})
		return
	case err != nil:
		m.refused.refuse(RefusedPingSignature, msg.From, netip.Addr{})
		return
	case msg.To != m.name:
		m.refused.refuse(RefusedPingUnexpected, msg.From, netip.Addr{})
		return
	}
	switch msg.Kind {
	case kindPing:
		m.mu.Lock()
		from, ok := m.members[msg.From]
		m.mu.Unlock()
		if !ok {
			m.refused.refuse(RefusedPingUnexpected, msg.From, netip.Addr{})
			return
		}
		pong, err := pingMsg{Kind: kindPong, Nonce: msg.Nonce, From: m.name, To: msg.From}.encode(keys.ping[0])
		if err == nil {
			// To the member's admitted address, never to where the ping claims to come from.
			_ = m.ml.SendToAddress(memberlist.Address{Addr: from.String(), Name: msg.From}, pong)
		}
	case kindPong:
		now := time.Now()
		m.mu.Lock()
		p := m.peers[msg.From]
		ok := p != nil && p.answered(msg.Nonce, now, m.window)
		m.mu.Unlock()
		if !ok {
			m.refused.refuse(RefusedPingUnexpected, msg.From, netip.Addr{})
		}
	}
}

// joined records a member's address. memberlist calls its event delegate with the member's
// state locked: the only moment its fields can be read without racing its own updates
// (Members returns pointers into that state).
func (m *Membership) joined(n *memberlist.Node) {
	if n.Name == m.name {
		return
	}
	ip, _ := netip.AddrFromSlice(n.Addr)
	m.mu.Lock()
	m.members[n.Name] = netip.AddrPortFrom(ip.Unmap(), n.Port)
	m.claiming[n.Name] = bytes.Equal(n.Meta, claimsMeta)
	m.mu.Unlock()
}

// forget drops the address, the quorum ping state and the claims of a member that left or
// died.
func (m *Membership) forget(name string) {
	m.mu.Lock()
	delete(m.members, name)
	delete(m.peers, name)
	delete(m.claimsDue, name)
	delete(m.claiming, name)
	m.mu.Unlock()
	m.claims.Forget(name)
}

// isMember reports whether name is another live member (claims are kept only for those).
func (m *Membership) isMember(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.members[name]
	return ok
}

func (m *Membership) numMembers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.members) + 1
}

// Reachable returns the members that answered a signed ping sent within FenceWindow, and this
// one. Quorum counts these: a speaker that cannot reach a majority fences itself within
// FenceWindow + PingInterval, before the others can declare it dead and take its addresses.
func (m *Membership) Reachable() map[string]bool {
	now := time.Now()
	out := map[string]bool{m.name: true}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, p := range m.peers {
		if !p.lastAck.IsZero() && now.Sub(p.lastAck) <= m.window {
			out[name] = true
		}
	}
	return out
}

// peerStates is the number of members with quorum ping state (tests: bounded, pruned).
func (m *Membership) peerStates() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.peers)
}

// Name is this speaker's name.
func (m *Membership) Name() string { return m.name }

// Port is the port memberlist listens on.
func (m *Membership) Port() int { return int(m.ml.LocalNode().Port) }

// Join contacts the given peers ("host:port") and returns how many answered. Peers already known
// are skipped cheaply by memberlist's push/pull.
func (m *Membership) Join(peers []string) (int, error) {
	if len(peers) == 0 {
		return 0, nil
	}
	return m.ml.Join(peers)
}

// Live returns the names of the members that are alive or only suspected, including this one.
func (m *Membership) Live() map[string]bool {
	out := map[string]bool{m.name: true}
	for _, n := range m.ml.Members() {
		out[n.Name] = true
	}
	return out
}

// Leave tells the others that this speaker goes away, so they take over at once instead of
// after failure detection, then stops memberlist. It waits at most timeout for the broadcast.
func (m *Membership) Leave(timeout time.Duration) error {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return nil
	}
	m.left = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	err := m.ml.Leave(timeout)
	if serr := m.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops memberlist without telling anyone, as a crash would (tests).
func (m *Membership) Shutdown() error {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return nil
	}
	m.left = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	return m.ml.Shutdown()
}

// events adapts memberlist.EventDelegate: every change is reported; members' addresses are
// copied for the quorum pings, and a member that leaves or dies loses its ping state.
type events struct{ m *Membership }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.m.joined(n)
	e.m.sendClaims(n.Name) // the newcomer learns our claims within a gossip or ping round
	e.changed()
}
func (e events) NotifyLeave(n *memberlist.Node) {
	e.m.forget(n.Name)
	e.changed()
}
func (e events) NotifyUpdate(n *memberlist.Node) {
	e.m.joined(n)
	e.changed()
}
func (e events) changed() {
	if e.m.onChange != nil {
		e.m.onChange()
	}
}

// delegate adapts memberlist.Delegate: user messages are the quorum pings and the layer-2
// claims; the broadcasts are this speaker's claims, and so is the state it pushes on joins
// and push/pull (anti-entropy); the metadata says that it sends claims.
type delegate struct{ m *Membership }

// NodeMeta says that this speaker sends claims: the others know it the moment it becomes a
// member, before its claims arrive.
func (d delegate) NodeMeta(int) []byte { return claimsMeta }
func (d delegate) NotifyMsg(b []byte) {
	if claims.IsClaims(b) {
		d.m.receiveClaims(b)
		return
	}
	d.m.handlePing(b)
}
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.bcast.GetBroadcasts(overhead, limit)
}
func (d delegate) LocalState(bool) []byte { return d.m.claims.Own() }
func (d delegate) MergeRemoteState(b []byte, _ bool) {
	if len(b) > 0 {
		d.m.receiveClaims(b)
	}
}

// logWriter turns memberlist's log lines into logr entries, and counts the packets and
// streams it could not decrypt (memberlist reports those only in its log): RefusedKey.
type logWriter struct {
	l      logr.Logger
	refuse func(Refusal, string, netip.Addr)
}

// undecryptable matches memberlist v0.5.3's log lines for a packet or stream that no key
// decrypts or that is not encrypted, with the peer's address (TestRefusals pins them).
var undecryptable = regexp.MustCompile(`(?:Decrypt packet failed|failed to receive: (?:.*decrypt|.*not encrypted)).* from=(\S+)`)

func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if w.refuse != nil {
		if sub := undecryptable.FindStringSubmatch(line); sub != nil {
			var addr netip.Addr
			if ap, err := netip.ParseAddrPort(sub[1]); err == nil {
				addr = ap.Addr().Unmap()
			}
			w.refuse(RefusedKey, "", addr)
		}
	}
	w.l.Info(line, "component", "memberlist")
	return len(p), nil
}

var _ io.Writer = logWriter{}
