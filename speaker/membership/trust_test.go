package membership

import (
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/internal/testenv"
)

// pair starts speakers "a" and "b" on base+1 and base+2, admits {a, b, c} with c at base+3 (a
// speaker's node whose speaker does not run), and waits until they see each other.
func pair(t *testing.T, base string) (a, b *Membership) {
	t.Helper()
	addrs := map[string]string{"a": base + "1", "b": base + "2", "c": base + "3"}
	var ms []*Membership
	for _, n := range []string{"a", "b"} {
		m, err := New(Options{Name: n, BindAddr: addrs[n], BindPort: -1, Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		ms = append(ms, m)
	}
	admitAll(ms, addrs)
	if _, err := ms[1].Join([]string{fmt.Sprintf("%s:%d", addrs["a"], ms[0].Port())}); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Second, "a and b see each other and answer each other's pings", func() bool {
		return len(ms[0].Live()) == 2 && len(ms[1].Live()) == 2 && ms[0].Reachable()["b"] && ms[1].Reachable()["a"]
	})
	return ms[0], ms[1]
}

// rogueMember is stock memberlist, as anyone can run it: name at addr, with keyring (nil: no
// encryption). Its streams come from addr too (on loopback the kernel would pick 127.0.0.1).
func rogueMember(t *testing.T, name, addr string, keyring *memberlist.Keyring) *memberlist.Memberlist {
	t.Helper()
	c := Config(name)
	c.BindAddr, c.AdvertiseAddr = addr, addr
	c.Keyring = keyring
	c.Logger = log.New(io.Discard, "", 0)
	nt, err := netTransport(addr, 0, c.Logger)
	if err != nil {
		t.Fatal(err)
	}
	c.BindPort = nt.GetAutoBindPort()
	c.AdvertisePort = c.BindPort
	c.Transport = &boundTransport{NetTransport: nt, bind: net.ParseIP(addr)}
	ml, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	return ml
}

// boundTransport dials from its bind address.
type boundTransport struct {
	*memberlist.NetTransport
	bind net.IP
}

func (b *boundTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: b.bind}}
	return d.Dial("tcp", addr)
}

func (b *boundTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return b.DialTimeout(a.Addr, timeout)
}

func keyring(t *testing.T, secret []byte) *memberlist.Keyring {
	t.Helper()
	if secret == nil {
		return nil
	}
	k, err := memberlist.NewKeyring(nil, derive(secret, labelMemberlist))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func refused(m *Membership, r Refusal) float64 {
	return testutil.ToFloat64(m.metrics.Refused.WithLabelValues(string(r)))
}

// poll waits until cond holds.
func poll(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, limit, what, testenv.True(cond))
}

// holds checks cond throughout d: an attack must not succeed at any moment.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Holds(t, d, what, testenv.True(cond))
}

func names(live map[string]bool) []string { return slices.Sorted(maps.Keys(live)) }

// admits reports whether m has a live member named name, or one at addr, other than b at b's
// own address.
func admits(m *Membership, name string, addr netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, at := range m.members {
		if at.Addr() == addr || (n == name && n != "b") {
			return true
		}
	}
	return false
}

// TestRogueCannotJoin: stock memberlist nodes that are not speakers try to join a two-speaker
// cluster. None becomes a member on either speaker, each refusal is counted with its reason,
// and the last case shows that the same rogue is admitted when it is what it claims (so the
// refusals are the admission's doing, not a broken rogue).
func TestRogueCannotJoin(t *testing.T) {
	wrong := make([]byte, 32)
	_, _ = rand.Read(wrong)
	for i, tc := range []struct {
		name   string
		member string // the rogue's name
		addr   string // last octet: 3 is c's node address, 4 nobody's
		secret []byte // nil: no encryption
		want   Refusal
	}{
		{name: "no key", member: "c", addr: "3", want: RefusedKey},
		{name: "wrong key", member: "c", addr: "3", secret: wrong, want: RefusedKey},
		{name: "right key, not a speaker's node", member: "evil", addr: "3", secret: testKeys.Primary, want: RefusedMerge},
		{name: "right key, a speaker's name at another node's address", member: "b", addr: "3", secret: testKeys.Primary, want: RefusedMerge},
		{name: "right key, not from a speaker's address", member: "c", addr: "4", secret: testKeys.Primary, want: RefusedSourceAddress},
		{name: "control: c itself", member: "c", addr: "3", secret: testKeys.Primary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := fmt.Sprintf("127.0.%d.", 60+i)
			a, b := pair(t, base)
			rogue := rogueMember(t, tc.member, base+tc.addr, keyring(t, tc.secret))
			_, _ = rogue.Join([]string{fmt.Sprintf("%s1:%d", base, a.Port()), fmt.Sprintf("%s2:%d", base, b.Port())})
			if tc.want == "" {
				poll(t, 5*time.Second, "a admits c", func() bool { return a.Live()["c"] && b.Live()["c"] })
				return
			}
			poll(t, 5*time.Second, fmt.Sprintf("a refuses with reason %s", tc.want), func() bool { return refused(a, tc.want) > 0 })
			// The rogue keeps gossiping and probing if it learned the members: still nothing.
			rogueAddr := netip.MustParseAddr(base + tc.addr)
			holds(t, time.Second, "neither a nor b admits the rogue", func() bool {
				return !admits(a, tc.member, rogueAddr) && !admits(b, tc.member, rogueAddr)
			})
		})
	}
}

// TestRogueCannotDeclareDead: forged "dead" and "suspect" messages about b reach a. From an
// address that is no speaker's, or without the key, a ignores them; the control case shows the
// same message is obeyed from a speaker's address with the key (what a leaked key plus a
// speaker node's address allows: docs/speaker.md, "Trust").
func TestRogueCannotDeclareDead(t *testing.T) {
	for i, tc := range []struct {
		name   string
		addr   string
		sealed bool
		want   Refusal
		kills  bool
	}{
		{name: "right key, not from a speaker's address", addr: "4", sealed: true, want: RefusedSourceAddress},
		{name: "no key, from a speaker's address", addr: "3", want: RefusedKey},
		{name: "control: right key from a speaker's address", addr: "3", sealed: true, kills: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := fmt.Sprintf("127.0.%d.", 70+i)
			a, _ := pair(t, base)
			c := rogueSocket(t, base+tc.addr)
			send := func(plain []byte) {
				if tc.sealed {
					plain = seal(t, testKeys.Primary, plain)
				}
				sendTo(t, c, a, plain)
			}
			inc, sent := uint32(1<<20), 0
			attack := func() {
				inc++
				send(wireSuspectMsg("b", "c", inc))
				send(wireDeadMsg("b", "c", inc))
				sent += 2
			}
			if tc.kills {
				poll(t, 5*time.Second, "the forged dead message is obeyed", func() bool { attack(); return !a.Live()["b"] })
				return
			}
			for range 100 {
				attack()
				time.Sleep(5 * time.Millisecond) // a steady stream, not one burst that overflows the socket
			}
			// Every forged packet is refused before memberlist acts on it (this does not
			// depend on timing, unlike b's liveness on a loaded machine).
			poll(t, 5*time.Second, fmt.Sprintf("a refuses all %d packets with reason %s", sent, tc.want), func() bool {
				return refused(a, tc.want) == float64(sent)
			})
			a.mu.Lock()
			_, live := a.members["b"]
			a.mu.Unlock()
			if !live {
				t.Error("b is not a member of a after the attack")
			}
		})
	}
}

// TestForgedPongsMakeNoQuorum: b crashes; a rogue with the key, from a speaker node's address,
// answers a's pings for b with pongs signed with the right key but nonces it cannot know. a
// must see b unreachable within the fence window all the same.
func TestForgedPongsMakeNoQuorum(t *testing.T) {
	a, b := pair(t, "127.0.80.")
	c := rogueSocket(t, "127.0.80.3")
	ping := deriveAll(testKeys).ping[0]
	forge := func() {
		var m pingMsg
		m.Kind, m.From, m.To = kindPong, "b", "a"
		_, _ = rand.Read(m.Nonce[:])
		body, err := m.encode(ping)
		if err != nil {
			t.Fatal(err)
		}
		sendTo(t, c, a, seal(t, testKeys.Primary, wireUserMsg(body)))
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll(t, 5*time.Second, "a sees b unreachable", func() bool { forge(); return !a.Reachable()["b"] })
	t.Logf("b unreachable at a %v after its crash, despite forged pongs", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d > time.Second {
		t.Errorf("b unreachable only after %v; the fence window is 250ms", d)
	}
	if refused(a, RefusedPingUnexpected) == 0 {
		t.Error("forged pongs not counted as ping-unexpected")
	}
	holds(t, 500*time.Millisecond, "b stays unreachable", func() bool { forge(); return !a.Reachable()["b"] })
}

// TestPeerStateIsBounded: a thousand forged members (with the key, from a speaker node's
// address) are refused one by one and leave no state behind; the ping state of a member that
// leaves is dropped.
func TestPeerStateIsBounded(t *testing.T) {
	a, b := pair(t, "127.0.81.")
	c := rogueSocket(t, "127.0.81.3")
	for i := range 1000 {
		sendTo(t, c, a, seal(t, testKeys.Primary, wireAliveMsg(fmt.Sprintf("fake-%d", i), netip.MustParseAddrPort("127.0.81.3:7946"), 1)))
	}
	poll(t, 5*time.Second, "a refuses 1000 unknown members", func() bool { return refused(a, RefusedUnknownNode) >= 1000 })
	// b's name at c's address, with a newer incarnation than b's.
	sendTo(t, c, a, seal(t, testKeys.Primary, wireAliveMsg("b", netip.MustParseAddrPort("127.0.81.3:7946"), 1<<20)))
	poll(t, 5*time.Second, "a refuses b's name at another address", func() bool { return refused(a, RefusedAddressMismatch) > 0 })
	a.mu.Lock()
	bAt := a.members["b"]
	a.mu.Unlock()
	if bAt.Addr() != netip.MustParseAddr("127.0.81.2") {
		t.Errorf("b at a: %v, want 127.0.81.2", bAt)
	}
	if got := names(a.Live()); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("a's members: %v", got)
	}
	if n := a.peerStates(); n != 1 {
		t.Errorf("a keeps ping state for %d peers, want 1 (b)", n)
	}
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Second, "a drops b's ping state when b leaves", func() bool { return a.peerStates() == 0 && !a.Live()["b"] })
}

// TestPeerAnswered: a pong counts once, only for a nonce sent to that peer within the window.
func TestPeerAnswered(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	window := 250 * time.Millisecond
	n := func(b byte) [nonceLen]byte { return [nonceLen]byte{b} }
	p := &peer{sent: make([]sentPing, 3)}
	for i, at := range []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond} {
		p.sent[i] = sentPing{nonce: n(byte(i + 1)), at: t0.Add(at)}
	}
	for _, step := range []struct {
		desc        string
		nonce       byte
		at          time.Duration
		want        bool
		wantLastAck time.Duration
	}{
		{"answer to the second ping", 2, 60 * time.Millisecond, true, 50 * time.Millisecond},
		{"the same answer replayed", 2, 70 * time.Millisecond, false, 50 * time.Millisecond},
		{"a nonce never sent", 9, 70 * time.Millisecond, false, 50 * time.Millisecond},
		{"a late answer to the first ping does not move lastAck back", 1, 80 * time.Millisecond, true, 50 * time.Millisecond},
		{"an answer after the window", 3, 100*time.Millisecond + window + time.Millisecond, false, 50 * time.Millisecond},
	} {
		got := p.answered(n(step.nonce), t0.Add(step.at), window)
		if got != step.want || !p.lastAck.Equal(t0.Add(step.wantLastAck)) {
			t.Errorf("%s: answered %v lastAck +%v, want %v +%v", step.desc, got, p.lastAck.Sub(t0), step.want, step.wantLastAck)
		}
	}
}
