package claims

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Wire format of one node's claims (lengths in bytes, integers big-endian):
//
//	1  Magic (tells a claims message from the other memberlist user messages)
//	1  format version: formatVersion, or formatHold for a hold
//	1  n = len(node), 1..MaxNameLen
//	n  node: the sender's node name, whose claims these are
//	8  version: larger is newer (Store: start time in ns + changes)
//	4  formatHold only: the hold in milliseconds, 1..2^32-1 (Message.Hold)
//	2  count of addresses, 0..MaxVIPs
//	count × (1 length (4 or 16) + the address)
//
// The addresses are canonical: strictly increasing (netip.Addr.Compare: IPv4 first), no
// IPv4-mapped IPv6, no unspecified address. Anything else, and any byte left over, is refused.
// A message without a hold keeps format 1, byte for byte, so that speakers of a version before
// holds still read it; they refuse a hold as malformed (and fail the address over, as before).
const (
	// Magic is the first byte of a claims message (a quorum ping starts with 1).
	Magic = 0xC1
	// MaxNameLen bounds the node name (a Kubernetes node name is a DNS subdomain).
	MaxNameLen = 253
	// MaxVIPs bounds the addresses of one message.
	MaxVIPs = 1024
	// MaxMessage bounds a message: the largest one MaxVIPs IPv6 addresses make.
	MaxMessage = headerLen + holdLen + MaxNameLen + MaxVIPs*(1+16)
	// MaxHold bounds a hold, wherever it comes from: a longer one counts as MaxHold.
	MaxHold = 60 * time.Second

	formatVersion = 1
	formatHold    = 2
	headerLen     = 1 + 1 + 1 + 8 + 2
	holdLen       = 4
)

// Errors of Decode and Store.Receive. Each refusal leaves the Store as it was.
var (
	// ErrTooLarge: the message is longer than MaxMessage or lists more than MaxVIPs addresses.
	ErrTooLarge = errors.New("claims message too large")
	// ErrMalformed: the message does not parse exactly, or its addresses are not canonical.
	ErrMalformed = errors.New("malformed claims message")
	// ErrSelf: a message from the network in this node's name (only this node speaks for
	// itself).
	ErrSelf = errors.New("claims in this node's name from another sender")
	// ErrNotMember: the sender is not a live member.
	ErrNotMember = errors.New("claims of a node that is not a live member")
	// ErrStale: the version is not newer than the one kept for the sender (a duplicate or a
	// reordered older message; not hostile, just ignored).
	ErrStale = errors.New("claims not newer than the ones kept")
)

// Message is one node's claims.
type Message struct {
	// Node is the sender, whose claims these are.
	Node string
	// Version: a newer message from the same node has a larger one.
	Version uint64
	// VIPs are the layer-2 addresses the node announces, canonical (see the wire format).
	VIPs []netip.Addr
	// Hold, if positive, says that the node is leaving and that its claims stay valid for this
	// long after they arrive (its speaker is replaced on the same node: docs/speaker.md,
	// "Holding through a speaker rollout"), whole milliseconds. Receivers count at most
	// MaxHold.
	Hold time.Duration
}

// holdMillis is m.Hold on the wire, 0 without a hold.
func (m Message) holdMillis() (uint32, error) {
	switch ms := m.Hold.Milliseconds(); {
	case m.Hold == 0:
		return 0, nil
	case m.Hold < time.Millisecond || ms > math.MaxUint32 || m.Hold%time.Millisecond != 0:
		return 0, fmt.Errorf("claims: hold %v, want whole milliseconds up to %d: %w", m.Hold, uint32(math.MaxUint32), ErrMalformed)
	default:
		return uint32(ms), nil
	}
}

// IsClaims reports whether b is a claims message (its first byte is Magic), without parsing it.
func IsClaims(b []byte) bool { return len(b) > 0 && b[0] == Magic }

// Encode returns m in the wire format; it refuses what Decode would refuse.
func (m Message) Encode() ([]byte, error) {
	if len(m.Node) == 0 || len(m.Node) > MaxNameLen {
		return nil, fmt.Errorf("claims: node name of %d bytes, want 1..%d: %w", len(m.Node), MaxNameLen, ErrMalformed)
	}
	if len(m.VIPs) > MaxVIPs {
		return nil, fmt.Errorf("claims: %d addresses, at most %d: %w", len(m.VIPs), MaxVIPs, ErrTooLarge)
	}
	if err := canonical(m.VIPs); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	hold, err := m.holdMillis()
	if err != nil {
		return nil, err
	}
	format := byte(formatVersion)
	if hold > 0 {
		format = formatHold
	}
	b := make([]byte, 0, headerLen+holdLen+len(m.Node)+len(m.VIPs)*17)
	b = append(b, Magic, format, byte(len(m.Node)))
	b = append(b, m.Node...)
	b = binary.BigEndian.AppendUint64(b, m.Version)
	if hold > 0 {
		b = binary.BigEndian.AppendUint32(b, hold)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.VIPs)))
	for _, a := range m.VIPs {
		s := a.AsSlice()
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b, nil
}

// canonical checks that vips are strictly increasing, unmapped and specified.
func canonical(vips []netip.Addr) error {
	for i, a := range vips {
		switch {
		case !a.IsValid() || a.IsUnspecified():
			return fmt.Errorf("address %d (%v) is not a unicast address: %w", i, a, ErrMalformed)
		case a.Is4In6():
			return fmt.Errorf("address %d (%v) is IPv4-mapped IPv6: %w", i, a, ErrMalformed)
		case a.Zone() != "":
			return fmt.Errorf("address %d (%v) has a zone: %w", i, a, ErrMalformed)
		case i > 0 && vips[i-1].Compare(a) >= 0:
			return fmt.Errorf("address %d (%v) does not follow %v (sorted, no duplicates): %w", i, a, vips[i-1], ErrMalformed)
		}
	}
	return nil
}

// Decode parses b, which must be exactly one canonical claims message.
func Decode(b []byte) (Message, error) {
	var m Message
	if len(b) > MaxMessage {
		return m, fmt.Errorf("claims: %d bytes, at most %d: %w", len(b), MaxMessage, ErrTooLarge)
	}
	if len(b) < headerLen+1 || b[0] != Magic || (b[1] != formatVersion && b[1] != formatHold) {
		return m, fmt.Errorf("claims: short message or unknown format: %w", ErrMalformed)
	}
	extra := 0
	if b[1] == formatHold {
		extra = holdLen
	}
	n := int(b[2])
	if n == 0 || len(b) < headerLen+extra+n {
		return m, fmt.Errorf("claims: node name of %d bytes: %w", n, ErrMalformed)
	}
	m.Node = string(b[3 : 3+n])
	rest := b[3+n:]
	m.Version = binary.BigEndian.Uint64(rest)
	rest = rest[8:]
	if extra > 0 {
		ms := binary.BigEndian.Uint32(rest)
		if ms == 0 {
			return Message{}, fmt.Errorf("claims: hold of 0 ms: %w", ErrMalformed)
		}
		m.Hold = time.Duration(ms) * time.Millisecond
		rest = rest[holdLen:]
	}
	count := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if count > MaxVIPs {
		return Message{}, fmt.Errorf("claims: %d addresses, at most %d: %w", count, MaxVIPs, ErrTooLarge)
	}
	m.VIPs = make([]netip.Addr, 0, count)
	for i := range count {
		if len(rest) < 1 {
			return Message{}, fmt.Errorf("claims: address %d missing: %w", i, ErrMalformed)
		}
		l := int(rest[0])
		if (l != 4 && l != 16) || len(rest) < 1+l {
			return Message{}, fmt.Errorf("claims: address %d of %d bytes: %w", i, l, ErrMalformed)
		}
		a, _ := netip.AddrFromSlice(rest[1 : 1+l])
		m.VIPs = append(m.VIPs, a)
		rest = rest[1+l:]
	}
	if len(rest) != 0 {
		return Message{}, fmt.Errorf("claims: %d bytes after the addresses: %w", len(rest), ErrMalformed)
	}
	if err := canonical(m.VIPs); err != nil {
		return Message{}, fmt.Errorf("claims: %w", err)
	}
	return m, nil
}

// Store holds this node's own claims and those of the other live members, and the holds of
// members that left with one (Held). It is safe for concurrent use.
type Store struct {
	self   string
	member func(node string) bool
	now    func() time.Time

	mu      sync.Mutex
	own     Message
	encoded []byte
	peers   map[string]Message
	holdAt  map[string]time.Time // when the kept message of a member with a hold arrived
	held    map[string]Held      // members that left with a hold still valid
	gone    map[string]goneNode  // members forgotten within lateHold
}

// goneNode is a member that left or died: when, and the version of its last claims.
type goneNode struct {
	at      time.Time
	version uint64
}

// lateHold is how long after a member left its hold is still accepted. The leaving speaker
// sends its hold before it leaves (membership.Membership.LeaveWithHold), but the two travel
// different ways (a TCP stream, then gossip), and a receiver may see the leave first.
const lateHold = 2 * time.Second

// NewStore returns the Store of node self, started at start: its first version is start in
// nanoseconds, and each change adds one, so that a restarted node's claims are newer than the
// ones it sent before (as long as its clock did not go back). member reports whether a node
// is a live member now; claims are accepted only from those, and Forget drops them when they
// leave or die.
func NewStore(self string, start time.Time, member func(node string) bool) (*Store, error) {
	if len(self) == 0 || len(self) > MaxNameLen {
		return nil, fmt.Errorf("claims: node name of %d bytes, want 1..%d", len(self), MaxNameLen)
	}
	s := &Store{self: self, member: member, now: time.Now, peers: map[string]Message{},
		holdAt: map[string]time.Time{}, held: map[string]Held{}, gone: map[string]goneNode{}}
	s.own = Message{Node: self, Version: uint64(max(start.UnixNano(), 0))}
	var err error
	if s.encoded, err = s.own.Encode(); err != nil {
		return nil, err
	}
	return s, nil
}

// SetOwn replaces this node's claims with vips (any order; duplicates are merged). It reports
// whether they changed; then the version is one larger and Own is the message to send.
func (s *Store) SetOwn(vips []netip.Addr) (bool, error) {
	v := slices.Clone(vips)
	slices.SortFunc(v, netip.Addr.Compare)
	v = slices.Compact(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(v, s.own.VIPs) {
		return false, nil
	}
	next := Message{Node: s.self, Version: s.own.Version + 1, VIPs: v}
	b, err := next.Encode()
	if err != nil {
		return false, fmt.Errorf("own claims: %w", err)
	}
	s.own, s.encoded = next, b
	return true, nil
}

// Own returns this node's claims in the wire format. The caller must not modify it.
func (s *Store) Own() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.encoded
}

// OwnHold returns this node's claims with a hold of d (a newer version than Own's, which it
// replaces: sent as the speaker leaves) in the wire format, and the message.
func (s *Store) OwnHold(d time.Duration) ([]byte, Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := Message{Node: s.self, Version: s.own.Version + 1, VIPs: s.own.VIPs, Hold: d}
	b, err := next.Encode()
	if err != nil {
		return nil, Message{}, fmt.Errorf("own hold: %w", err)
	}
	s.own = next
	s.own.Hold = 0
	return b, next, nil
}

// Receive decodes a message from the network and keeps it when it is well-formed, from a live
// member other than this node, and newer than what is kept for that member. A hold is also
// accepted from a member that left within the last lateHold (its leave overtook it). It
// reports whether the claims or holds changed. Every error leaves the Store as it was.
func (s *Store) Receive(b []byte) (bool, error) {
	m, err := Decode(b)
	if err != nil {
		return false, err
	}
	if m.Node == s.self {
		return false, fmt.Errorf("claims: %w", ErrSelf)
	}
	member := s.member(m.Node)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	if !member {
		g, ok := s.gone[m.Node]
		if m.Hold == 0 || !ok {
			return false, fmt.Errorf("claims of %q: %w", m.Node, ErrNotMember)
		}
		if m.Version <= g.version {
			return false, fmt.Errorf("hold of %q: version %d, had %d: %w", m.Node, m.Version, g.version, ErrStale)
		}
		delete(s.gone, m.Node)
		s.held[m.Node] = Held{Node: m.Node, VIPs: m.VIPs, Since: now, For: min(m.Hold, MaxHold)}
		return true, nil
	}
	old, ok := s.peers[m.Node]
	if ok && m.Version <= old.Version {
		return false, fmt.Errorf("claims of %q: version %d, have %d: %w", m.Node, m.Version, old.Version, ErrStale)
	}
	s.peers[m.Node] = m
	delete(s.holdAt, m.Node)
	if m.Hold > 0 {
		s.holdAt[m.Node] = now
	}
	// The claims of the node's new speaker count from now on, in place of its hold.
	_, wasHeld := s.held[m.Node]
	delete(s.held, m.Node)
	return !ok || !slices.Equal(old.VIPs, m.VIPs) || wasHeld, nil
}

// Forget drops the claims of node (it left or died) and reports whether there were any. When
// its last message carried a hold that is still valid, its claims are kept as held until the
// hold ends (Holds).
func (s *Store) Forget(node string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.peers[node]
	delete(s.peers, node)
	if ok {
		s.gone[node] = goneNode{at: now, version: m.Version}
		if at, hold := s.holdAt[node]; hold && m.Hold > 0 {
			s.held[node] = Held{Node: node, VIPs: m.VIPs, Since: at, For: min(m.Hold, MaxHold)}
		}
	}
	delete(s.holdAt, node)
	s.pruneLocked(now)
	return ok
}

// pruneLocked drops the holds that ended and the departures older than lateHold.
func (s *Store) pruneLocked(now time.Time) {
	for n, h := range s.held {
		if !h.Valid(now) {
			delete(s.held, n)
		}
	}
	for n, g := range s.gone {
		if now.Sub(g.at) > lateHold || now.Before(g.at) {
			delete(s.gone, n)
		}
	}
}

// Claims returns the addresses each other member claims, by node (a copy).
func (s *Store) Claims() map[string][]netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]netip.Addr, len(s.peers))
	for n, m := range s.peers {
		out[n] = slices.Clone(m.VIPs)
	}
	return out
}

// Holds returns the holds of the members that left with one and whose hold is still valid,
// sorted by node (a copy).
func (s *Store) Holds() []Held {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	out := make([]Held, 0, len(s.held))
	for _, h := range s.held {
		h.VIPs = slices.Clone(h.VIPs)
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Held) int { return strings.Compare(a.Node, b.Node) })
	return out
}
