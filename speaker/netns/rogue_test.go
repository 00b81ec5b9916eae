package netns

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"github.com/metalgate/metalgate/internal/netnslab"
	"io"
	"log"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/metalgate/metalgate/internal/nsexec"
	"github.com/metalgate/metalgate/speaker/membership"
)

// The rogue host: on the lab's bridge like the nodes, but no node of the cluster. The API
// server (here: the static config) does not know it.
const (
	RogueV4  = "198.51.100.50"
	RogueV6  = "2001:db8::50"
	RogueMAC = "02:00:00:00:00:e0"
)

// rogueWireKey is the AES key memberlist uses for a cluster key. The derivation is written out
// here, not imported, on purpose: it is the wire format, and a change to it breaks mixed
// versions during a rolling upgrade (membership/keys.go).
func rogueWireKey(secret []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("metalgate/speaker/memberlist/v1"))
	return h.Sum(nil)
}

// nsTransport is memberlist's transport with its sockets in a network namespace: the
// listeners are opened there, and every dial runs there too.
type nsTransport struct {
	*memberlist.NetTransport
	ns   string
	bind net.IP
}

func (t *nsTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := nsexec.InNS(t.ns, func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: t.bind}}
		var err error
		c, err = d.Dial("tcp", addr)
		return err
	})
	return c, err
}

func (t *nsTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// rogueMember starts stock memberlist in namespace ns at RogueV4 under name, encrypting with
// wireKey (nil: not at all), with the speakers' timers.
func rogueMember(t *testing.T, ns, name string, wireKey []byte) *memberlist.Memberlist {
	t.Helper()
	c := membership.Config(name)
	c.BindAddr, c.AdvertiseAddr = RogueV4, RogueV4
	c.Logger = log.New(io.Discard, "", 0)
	if wireKey != nil {
		kr, err := memberlist.NewKeyring(nil, wireKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Keyring = kr
	}
	var nt *memberlist.NetTransport
	if err := nsexec.InNS(ns, func() error {
		var err error
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{RogueV4}, BindPort: 0, Logger: c.Logger})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.BindPort = nt.GetAutoBindPort()
	c.AdvertisePort = c.BindPort
	c.Transport = &nsTransport{NetTransport: nt, ns: ns, bind: net.ParseIP(RogueV4)}
	ml, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	return ml
}

// forger writes memberlist messages by hand (v0.5.3's wire format: a type byte and a msgpack
// map), plain and encrypted with the cluster key, from a UDP socket of the rogue host.
type forger struct {
	t       *testing.T
	conn    *net.UDPConn
	wireKey []byte
}

func newForger(t *testing.T, ns string, wireKey []byte) *forger {
	f := &forger{t: t, wireKey: wireKey}
	if err := nsexec.InNS(ns, func() error {
		var err error
		f.conn, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(RogueV4)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.conn.Close() })
	return f
}

type mp []byte

func (b mp) str(s string) mp { return append(append(b, 0xa0|byte(len(s))), s...) }
func (b mp) u32(v uint32) mp { return binary.BigEndian.AppendUint32(append(b, 0xce), v) }

// memberlist message types (net.go).
const (
	wireSuspect = 3
	wireAlive   = 4
	wireDead    = 5
)

func deadMsg(node, from string, inc uint32) []byte {
	return mp{wireDead, 0x83}.str("Incarnation").u32(inc).str("Node").str(node).str("From").str(from)
}

func suspectMsg(node, from string, inc uint32) []byte {
	return mp{wireSuspect, 0x83}.str("Incarnation").u32(inc).str("Node").str(node).str("From").str(from)
}

func aliveMsg(node string, ip netip.Addr, port uint16, inc uint32) []byte {
	a := ip.As4()
	return mp{wireAlive, 0x86}.str("Incarnation").u32(inc).str("Node").str(node).
		str("Addr").str(string(a[:])).str("Port").u32(uint32(port)).str("Meta").str("").
		str("Vsn").str(string([]byte{1, 5, 5, 0, 0, 0}))
}

// send sends msg to the given nodes (none: every node), plain and encrypted: an attacker tries
// both.
func (f *forger) send(l *netnslab.Lab, msg []byte, nodes ...int) {
	f.sendPackets(l, [][]byte{msg, f.seal(msg)}, nodes)
}

// seal encrypts msg as memberlist does (version 1: [1][12-byte nonce][AES-GCM], no label).
func (f *forger) seal(msg []byte) []byte {
	block, err := aes.NewCipher(f.wireKey)
	if err != nil {
		f.t.Fatal(err)
	}
	gcm, _ := cipher.NewGCM(block)
	sealed := make([]byte, 13, 13+len(msg)+gcm.Overhead())
	sealed[0] = 1
	_, _ = rand.Read(sealed[1:13])
	return gcm.Seal(sealed, sealed[1:13], msg, nil)
}

func (f *forger) sendPackets(l *netnslab.Lab, pkts [][]byte, nodes []int) {
	if len(nodes) == 0 {
		for i := 1; i <= l.Nodes; i++ {
			nodes = append(nodes, i)
		}
	}
	for _, i := range nodes {
		to := &net.UDPAddr{IP: net.ParseIP(netnslab.NodeV4(i)), Port: netnslab.MemberlistPort}
		for _, p := range pkts {
			_, _ = f.conn.WriteToUDP(p, to)
		}
	}
}

// watch polls every node's metrics until stop is closed and reports the first moment the
// cluster was not as it must stay: three members each, quorum everywhere.
func watch(l *netnslab.Lab, stop <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		defer close(out)
		for {
			for i := 1; i <= l.Nodes; i++ {
				m, err := l.Metrics(i)
				if err != nil {
					continue // a slow curl on a loaded machine is not an attack
				}
				if v := netnslab.Metric(m, "metalgate_speaker_members "); v != "" && v != "3" {
					out <- fmt.Sprintf("n%d sees %s members", i, v)
					return
				}
				if v := netnslab.Metric(m, "metalgate_speaker_quorum "); v != "" && v != "1" {
					out <- fmt.Sprintf("n%d lost quorum", i)
					return
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return out
}

func refusedBy(l *netnslab.Lab, i int) map[string]float64 {
	out := map[string]float64{}
	m, _ := l.Metrics(i)
	for _, line := range strings.Split(m, "\n") {
		if !strings.HasPrefix(line, "metalgate_speaker_members_refused_total{") {
			continue
		}
		reason := line[strings.Index(line, `"`)+1:]
		reason = reason[:strings.Index(reason, `"`)]
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[reason] = v
	}
	return out
}

// TestRogueMember: a host on the speakers' network that is no speaker tries everything
// memberlist lets it try, for four seconds, while the client watches the VIP: stock memberlist
// joining with no key, with a wrong key, with the right key under a name of its own, and with
// the right key under the name of the VIP's owner; and forged suspect, dead and alive messages
// about the owner, plain and encrypted with the right key. No node ever sees a fourth member
// or loses quorum, the client only ever sees the owner's MAC, and the speakers count what they
// refused.
func TestRogueMember(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	l, obs := newLab(t)
	rns := l.AddHost("r", RogueMAC, RogueV4, RogueV6)
	startCluster(t, l, obs)
	owner := expectedOwner(vip4, nodeNames(3))
	ownerName := fmt.Sprintf("n%d", owner)
	right := rogueWireKey(l.Key)
	wrong := make([]byte, 32)
	_, _ = rand.Read(wrong)

	// Let the cluster settle into its steady state first: the watch must see attacks only.
	if !netnslab.Eventually(10*time.Second, func() bool {
		for i := 1; i <= 3; i++ {
			m, err := l.Metrics(i)
			if err != nil || netnslab.Metric(m, "metalgate_speaker_members ") != "3" || netnslab.Metric(m, "metalgate_speaker_quorum ") != "1" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the cluster did not settle")
	}

	start := time.Now()
	stop := make(chan struct{})
	broken := watch(l, stop)
	var seeds []string
	for i := 1; i <= 3; i++ {
		seeds = append(seeds, net.JoinHostPort(netnslab.NodeV4(i), strconv.Itoa(netnslab.MemberlistPort)))
	}
	var wg sync.WaitGroup
	for _, r := range []struct {
		name string
		key  []byte
	}{{"rogue-nokey", nil}, {"rogue-wrongkey", wrong}, {"rogue", right}, {ownerName, right}} {
		ml := rogueMember(t, rns, r.name, r.key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 4*time.Second {
				_, _ = ml.Join(seeds) // and memberlist gossips and probes whatever it learned
				// The attack's pace: rejoin 5 times a second for 4s.
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	f := newForger(t, rns, right)
	inc := uint32(1 << 20)
	for time.Since(start) < 4*time.Second {
		inc++
		f.send(l, suspectMsg(ownerName, "rogue", inc))
		f.send(l, deadMsg(ownerName, "rogue", inc))
		f.send(l, deadMsg(ownerName, ownerName, inc)) // "left"
		f.send(l, aliveMsg(ownerName, netip.MustParseAddr(RogueV4), netnslab.MemberlistPort, inc+1))
		time.Sleep(20 * time.Millisecond) // the attack's pace: a steady stream of forgeries for 4s
	}
	wg.Wait()
	close(stop)
	if why, bad := <-broken; bad {
		t.Errorf("during the attack: %s", why)
	}
	want := netnslab.NodeMAC(owner)
	for _, s := range obs.Since(vip4, start) {
		if s.MAC != want {
			t.Errorf("the client saw %s at %s %v into the attack; the owner is %s", vip4, s.MAC, s.At.Sub(start).Round(time.Millisecond), want)
			break
		}
	}
	for i := 1; i <= 3; i++ {
		got := refusedBy(l, i)
		t.Logf("n%d refused: %v", i, got)
		if got["source-address"] == 0 {
			t.Errorf("n%d counted no refusal by source address", i)
		}
	}
}

// TestRogueCannotFakeQuorum: the VIP's owner is cut off from the other speakers (blackhole
// routes to them), but a rogue host still reaches it and tries to keep it in quorum: it
// tells the owner (only) that another speaker left and is back at the rogue's address, so that
// the owner would ping the rogue in that speaker's place, and runs stock memberlist under that
// name with the right key to answer. The owner must fence itself all the same, before the
// majority takes its address over.
func TestRogueCannotFakeQuorum(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	l, obs := newLab(t)
	rns := l.AddHost("r", RogueMAC, RogueV4, RogueV6)
	startCluster(t, l, obs)
	owner := expectedOwner(vip4, nodeNames(3))
	var others []int
	for i := 1; i <= 3; i++ {
		if i != owner {
			others = append(others, i)
		}
	}
	victim := fmt.Sprintf("n%d", others[0])
	right := rogueWireKey(l.Key)
	f := newForger(t, rns, right)
	// One impostor speaks plain memberlist, one encrypts with the right key.
	plain, keyed := rogueMember(t, rns, victim, nil), rogueMember(t, rns, victim, right)
	rogueIP := netip.MustParseAddr(RogueV4)

	stopAttack := make(chan struct{})
	attacked := make(chan struct{})
	go func() {
		defer close(attacked)
		inc := uint32(1 << 20)
		for {
			inc++
			// To the owner only: the majority must not hear of it. "The victim left", then "it
			// is back at the rogue's address".
			left := deadMsg(victim, victim, inc)
			f.sendPackets(l, [][]byte{left, aliveMsg(victim, rogueIP, uint16(plain.LocalNode().Port), inc+1)}, []int{owner})
			f.sendPackets(l, [][]byte{f.seal(left), f.seal(aliveMsg(victim, rogueIP, uint16(keyed.LocalNode().Port), inc+1))}, []int{owner})
			for _, ml := range []*memberlist.Memberlist{plain, keyed} {
				_, _ = ml.Join([]string{net.JoinHostPort(netnslab.NodeV4(owner), strconv.Itoa(netnslab.MemberlistPort))})
			}
			select {
			case <-stopAttack:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stopAttack); <-attacked }()

	start := time.Now()
	for _, o := range others {
		l.Run("ip", "-n", l.NodeNS(owner), "route", "add", "blackhole", netnslab.NodeV4(o)+"/32")
	}
	fenced := netnslab.Eventually(5*time.Second, func() bool {
		m, err := l.Metrics(owner)
		return err == nil && netnslab.Metric(m, "metalgate_speaker_quorum ") == "0" && !strings.Contains(m, "metalgate_speaker_announced{")
	})
	if !fenced {
		m, _ := l.Metrics(owner)
		t.Fatalf("cut-off n%d kept quorum with the rogue's help:\n%s\nrefused: %v", owner, grep(m, "metalgate_speaker_"), refusedBy(l, owner))
	}
	t.Logf("cut-off n%d fenced %v after the cut; refused: %v", owner, time.Since(start).Round(time.Millisecond), refusedBy(l, owner))
	s, ok := obs.WaitMAC(vip4, start, 5*time.Second, func(m string) bool { return m != netnslab.NodeMAC(owner) })
	if !ok {
		t.Fatalf("the majority did not take over; sightings %v", obs.Since(vip4, start))
	}
	fenceAt, ok1 := logTime(l.Log(owner), start, "quorum changed", `"quorum":false`)
	takeAt, ok2 := logTime(l.Log(netnslab.NodeOfMAC(s.MAC)), start, "announcing", netnslab.VIP4)
	if !ok1 || !ok2 {
		t.Fatalf("log lines missing: fence %v takeover %v", ok1, ok2)
	}
	if !fenceAt.Before(takeAt) {
		t.Errorf("n%d fenced at %v, after the takeover at %v: two nodes answered meanwhile", owner, fenceAt, takeAt)
	}
}
