package membership

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	"golang.org/x/time/rate"
)

// Refusal is why something from the network was refused (the reason label of
// metalgate_speaker_members_refused_total).
type Refusal string

// Refusal reasons.
const (
	// RefusedSourceAddress: a packet or stream from an address that is no speaker's node
	// address (dropped before memberlist decrypts it).
	RefusedSourceAddress Refusal = "source-address"
	// RefusedKey: a packet or stream that no installed key decrypts, or that is not encrypted.
	RefusedKey Refusal = "key"
	// RefusedUnknownNode: a member whose name is not a node running a speaker.
	RefusedUnknownNode Refusal = "unknown-node"
	// RefusedAddressMismatch: a speaker's node name with an address that is not that node's.
	RefusedAddressMismatch Refusal = "address-mismatch"
	// RefusedMerge: a state exchange (join, push/pull) that lists a live member that would be
	// refused; the whole exchange is refused.
	RefusedMerge Refusal = "merge"
	// RefusedPingMalformed: a quorum ping that does not parse.
	RefusedPingMalformed Refusal = "ping-malformed"
	// RefusedPingSignature: a quorum ping signed with no installed key.
	RefusedPingSignature Refusal = "ping-signature"
	// RefusedPingUnexpected: a quorum ping for another node or from a non-member, or a pong
	// whose nonce this speaker did not send to that peer in the fence window, or already used.
	RefusedPingUnexpected Refusal = "ping-unexpected"
	// RefusedClaimsMalformed: layer-2 claims that do not parse, are not canonical, or exceed
	// the bounds of speaker/claims.
	RefusedClaimsMalformed Refusal = "claims-malformed"
	// RefusedClaimsUnexpected: layer-2 claims in this speaker's name, or of a node that is not
	// a live member.
	RefusedClaimsUnexpected Refusal = "claims-unexpected"
)

var refusals = []Refusal{RefusedSourceAddress, RefusedKey, RefusedUnknownNode, RefusedAddressMismatch,
	RefusedMerge, RefusedPingMalformed, RefusedPingSignature, RefusedPingUnexpected, RefusedClaimsMalformed, RefusedClaimsUnexpected}

// admission is who may be a member: the speakers the API server knows, by node name with
// their node's addresses (speaker/config: InternalIPs and the speaker Pod's host IP), and
// this speaker itself. Until the first Admit only this speaker is admitted.
type admission struct {
	self     string
	selfAddr netip.Addr
	refuse   func(r Refusal, node string, addr netip.Addr)

	mu     sync.RWMutex
	byName map[string][]netip.Addr
	addrs  map[netip.Addr]bool
}

func (a *admission) set(nodes map[string][]netip.Addr) {
	byName := make(map[string][]netip.Addr, len(nodes))
	addrs := map[netip.Addr]bool{a.selfAddr: true}
	for n, as := range nodes {
		for _, ip := range as {
			ip = ip.Unmap()
			byName[n] = append(byName[n], ip)
			addrs[ip] = true
		}
	}
	a.mu.Lock()
	a.byName, a.addrs = byName, addrs
	a.mu.Unlock()
}

// fromSpeaker reports whether addr is the address of some admitted node (or this one).
func (a *admission) fromSpeaker(addr netip.Addr) bool {
	addr = addr.Unmap()
	a.mu.RLock()
	defer a.mu.RUnlock()
	return addr == a.selfAddr || a.addrs[addr]
}

// check returns why a member named name at addr is refused, or "".
func (a *admission) check(name string, addr netip.Addr) Refusal {
	addr = addr.Unmap()
	if name == a.self {
		if addr == a.selfAddr {
			return ""
		}
		return RefusedAddressMismatch
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	as, ok := a.byName[name]
	switch {
	case !ok:
		return RefusedUnknownNode
	case !slices.Contains(as, addr):
		return RefusedAddressMismatch
	default:
		return ""
	}
}

func nodeAddr(n *memberlist.Node) netip.Addr {
	a, _ := netip.AddrFromSlice(n.Addr)
	return a.Unmap()
}

// NotifyAlive implements memberlist.AliveDelegate: every alive message, gossiped or merged,
// passes here before memberlist adds or updates the member; an error drops it.
func (a *admission) NotifyAlive(n *memberlist.Node) error {
	addr := nodeAddr(n)
	if r := a.check(n.Name, addr); r != "" {
		a.refuse(r, n.Name, addr)
		return fmt.Errorf("refused: %s", r)
	}
	return nil
}

// NotifyMerge implements memberlist.MergeDelegate: a join or push/pull whose peer lists a live
// member we would refuse is refused as a whole. Members that are dead or left are not checked:
// they are not admitted by the exchange, and a speaker whose node was deleted stays in the
// others' lists as dead for a while.
func (a *admission) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if n.State != memberlist.StateAlive && n.State != memberlist.StateSuspect {
			continue
		}
		addr := nodeAddr(n)
		if r := a.check(n.Name, addr); r != "" {
			a.refuse(RefusedMerge, n.Name, addr)
			return fmt.Errorf("refused: %s lists %s at %s (%s)", RefusedMerge, n.Name, addr, r)
		}
	}
	return nil
}

var (
	_ memberlist.AliveDelegate = &admission{}
	_ memberlist.MergeDelegate = &admission{}
)

// refusalLog counts refusals and logs at most one line per reason per interval, with how many
// were refused since the last line: a flood of forged packets must not flood the log.
type refusalLog struct {
	log      logr.Logger
	m        *Metrics
	mu       sync.Mutex
	every    map[Refusal]*rate.Sometimes
	since    map[Refusal]int
	interval time.Duration
}

func newRefusalLog(log logr.Logger, m *Metrics, interval time.Duration) *refusalLog {
	return &refusalLog{log: log, m: m, every: map[Refusal]*rate.Sometimes{}, since: map[Refusal]int{}, interval: interval}
}

func (l *refusalLog) refuse(r Refusal, node string, addr netip.Addr) {
	l.m.Refused.WithLabelValues(string(r)).Inc()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since[r]++
	s := l.every[r]
	if s == nil {
		s = &rate.Sometimes{Interval: l.interval}
		l.every[r] = s
	}
	s.Do(func() {
		kv := []any{"reason", string(r), "refusedSinceLastLog", l.since[r]}
		if node != "" {
			kv = append(kv, "member", node)
		}
		if addr.IsValid() {
			kv = append(kv, "address", addr.String())
		}
		l.log.Info("refused a peer that is not a known speaker", kv...)
		l.since[r] = 0
	})
}
