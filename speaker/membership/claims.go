package membership

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/metalgate/metalgate/speaker/claims"
)

// The layer-2 claims (speaker/claims) travel three ways, all encrypted with the cluster key:
// gossiped through a TransmitLimitedQueue when they change (piggybacked on memberlist's
// packets; a newer message replaces an older one still queued); sent directly to every member
// over the next claimsResends ping rounds when they change, and to a member when it joins
// (gossip reaches a few random members only, and a message larger than a gossip packet is
// never gossiped); and as this speaker's state in joins and push/pulls (anti-entropy over
// TCP). A speaker sends only its own claims, and keeps the others' only while they are live
// members.
const (
	claimsRetransmitMult = 4
	claimsResends        = 3
)

// claimsMeta is the memberlist node metadata of a speaker that sends claims (a speaker of an
// older version sends none, and is not bound by the others' claims: speaker.Decide).
var claimsMeta = []byte{claims.Magic, 1}

// claimsBroadcast is this speaker's claims in the broadcast queue; a newer one invalidates it.
type claimsBroadcast []byte

func (b claimsBroadcast) Invalidates(other memberlist.Broadcast) bool {
	_, ok := other.(claimsBroadcast)
	return ok
}
func (b claimsBroadcast) Message() []byte { return b }
func (b claimsBroadcast) Finished()       {}

// SetClaims publishes the layer-2 addresses this speaker announces (speaker.Claims). Nothing is
// sent when they did not change.
func (m *Membership) SetClaims(vips []netip.Addr) error {
	changed, err := m.claims.SetOwn(vips)
	if err != nil || !changed {
		return err
	}
	m.mu.Lock()
	names := make([]string, 0, len(m.members))
	for n := range m.members {
		names = append(names, n)
	}
	m.mu.Unlock()
	m.sendClaims(names...)
	return nil
}

// Claims returns the layer-2 addresses each other live member claims, by node
// (speaker.Input.Claims): an entry for each member that sends claims (its metadata says so, or
// its claims arrived), empty until they arrive.
func (m *Membership) Claims() map[string][]netip.Addr {
	out := m.claims.Claims()
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, ok := range m.claiming {
		if _, has := out[n]; ok && !has {
			out[n] = []netip.Addr{}
		}
	}
	return out
}

// sendClaims queues this speaker's claims for gossip and for direct sends to the named members.
// It takes no memberlist lock: NotifyJoin calls it with memberlist's node lock held.
func (m *Membership) sendClaims(names ...string) {
	m.bcast.QueueBroadcast(claimsBroadcast(m.claims.Own()))
	m.mu.Lock()
	for _, n := range names {
		if n != m.name {
			m.claimsDue[n] = claimsResends
		}
	}
	m.mu.Unlock()
}

// receiveClaims keeps a member's claims (claims.Store.Receive) and reports a change; hostile
// input is counted and logged as a refusal, a stale message (a duplicate or a reordered older
// one) is ignored.
func (m *Membership) receiveClaims(b []byte) {
	changed, err := m.claims.Receive(b)
	switch {
	case errors.Is(err, claims.ErrStale):
	case errors.Is(err, claims.ErrSelf), errors.Is(err, claims.ErrNotMember):
		m.refused.refuse(RefusedClaimsUnexpected, claimsNode(b), netip.Addr{})
	case err != nil:
		m.refused.refuse(RefusedClaimsMalformed, "", netip.Addr{})
	case changed && m.onChange != nil:
		m.onChange()
	}
}

// claimsNode is the sender named by a claims message that parsed, for the refusal log.
func claimsNode(b []byte) string {
	msg, err := claims.Decode(b)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%.64s", msg.Node)
}

// Holds returns the holds of the members that left with one, still valid
// (speaker.Input.Holds).
func (m *Membership) Holds() []claims.Held { return m.claims.Holds() }

// LeaveWithHold is Leave after telling every member that this speaker's claims stay valid for
// hold (claims.Message.Hold: its speaker is replaced on this node). The hold goes to each
// member over its own TCP stream, all at once and before the leave, so that it arrives ahead
// of the leave's gossip (a receiver still accepts it shortly after the leave:
// claims.Store.Receive); the sends take at most timeout, and so does the leave. It returns
// the hold it sent (for the hold file) and any error of the leave; a member that could not be
// reached fails the address over when it sees the leave, as without a hold.
func (m *Membership) LeaveWithHold(hold, timeout time.Duration) (claims.Message, error) {
	b, msg, err := m.claims.OwnHold(hold)
	if err != nil {
		return claims.Message{}, errors.Join(err, m.Leave(timeout))
	}
	m.mu.Lock()
	to := make([]*memberlist.Node, 0, len(m.members))
	for name, ap := range m.members {
		to = append(to, &memberlist.Node{Name: name, Addr: ap.Addr().AsSlice(), Port: ap.Port()})
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range to {
		wg.Go(func() { _ = m.ml.SendReliable(n, b) })
	}
	sent := make(chan struct{})
	go func() {
		wg.Wait()
		close(sent)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-sent:
	case <-t.C:
	}
	return msg, m.Leave(timeout)
}
