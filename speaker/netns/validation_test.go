package netns

import (
	"crypto/rand"
	"github.com/metalgate/metalgate/internal/netnslab"
	"github.com/metalgate/metalgate/internal/nsexec"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// clientMAC is the client namespace's MAC (Lab.New).
var clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xc0}

// TestL2PacketValidation: from the client namespace, packets a responder must not answer —
// an ARP request sent unicast to another host's MAC (flooded by the bridge), neighbour
// solicitations with hop limit 64 (crossed a router) or ICMP code 1 (RFC 4861 §7.1.1) — get no
// answer, and are counted with their reason; a burst of garbage on both protocols does not
// stop the responders: the valid requests after it are answered.
func TestL2PacketValidation(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	l := netnslab.New(t, 1)
	l.StartSpeaker(1, l.StaticConfig(netnslab.VIP4, netnslab.VIP6))

	var (
		raw   *packet.Conn
		icmp6 *icmp.PacketConn
		ifi   *net.Interface
	)
	if err := nsexec.InNS(l.NS("c"), func() error {
		var err error
		if ifi, err = net.InterfaceByName("eth0"); err != nil {
			return err
		}
		if raw, err = packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeARP), nil); err != nil {
			return err
		}
		icmp6, err = icmp.ListenPacket("ip6:ipv6-icmp", netnslab.ClientV6)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close(); _ = icmp6.Close() })

	arpTo := func(dst net.HardwareAddr, payload []byte) {
		t.Helper()
		if payload == nil {
			p, _ := arp.NewPacket(arp.OperationRequest, clientMAC, netip.MustParseAddr(netnslab.ClientV4), ethernet.Broadcast, vip4)
			payload, _ = p.MarshalBinary()
		}
		f, _ := (&ethernet.Frame{Destination: dst, Source: clientMAC, EtherType: ethernet.EtherTypeARP, Payload: payload}).MarshalBinary()
		if _, err := raw.WriteTo(f, &packet.Addr{HardwareAddr: dst}); err != nil {
			t.Fatal(err)
		}
	}
	snm := netip.MustParseAddr("ff02::1:ff00:100")
	nsTo := func(hops int, code byte, body []byte) {
		t.Helper()
		if body == nil {
			body = make([]byte, 24, 32)
			body[0], body[1] = byte(ipv6.ICMPTypeNeighborSolicitation), code
			copy(body[8:], vip6.AsSlice())
			body = append(append(body, 1, 1), clientMAC...)
		}
		// The kernel fills in the ICMPv6 checksum; the zone is resolved in the namespace.
		if err := nsexec.InNS(l.NS("c"), func() error {
			_, err := icmp6.IPv6PacketConn().WriteTo(body, &ipv6.ControlMessage{HopLimit: hops, IfIndex: ifi.Index},
				&net.IPAddr{IP: snm.AsSlice(), Zone: "eth0"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Outcomes are read from the speaker's own counters: exact, and independent of which
	// socket of the client a unicast answer reaches.
	count := func(series string) int {
		m, err := l.Metrics(1)
		if err != nil {
			return -1
		}
		v, _ := strconv.Atoi(netnslab.Metric(m, series+" "))
		return v
	}
	answered := func(proto string) int {
		return count(`metalgate_speaker_l2_requests_answered_total{interface="eth0",protocol="` + proto + `"}`)
	}
	dropped := func(proto, reason string) int {
		return count(`metalgate_speaker_l2_requests_dropped_total{protocol="` + proto + `",reason="` + reason + `"}`)
	}
	// Up and answering both protocols.
	if !netnslab.Eventually(20*time.Second, func() bool {
		arpTo(ethernet.Broadcast, nil)
		nsTo(255, 0, nil)
		return answered("arp") > 0 && answered("ndp") > 0
	}) {
		t.Fatalf("the speaker does not answer\n%s", l.Log(1))
	}

	for _, tc := range []struct {
		name, proto, reason string
		send                func()
	}{
		{"ARP request unicast to another host's MAC", "arp", "ethernet-destination", func() { arpTo(net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}, nil) }},
		{"NS with hop limit 64", "ndp", "hop-limit", func() { nsTo(64, 0, nil) }},
		{"NS with ICMP code 1", "ndp", "icmp-code", func() { nsTo(255, 1, nil) }},
	} {
		before, drops := answered(tc.proto), dropped(tc.proto, tc.reason)
		tc.send()
		if !netnslab.Eventually(5*time.Second, func() bool { return dropped(tc.proto, tc.reason) == drops+1 }) {
			t.Errorf("%s: not dropped as %s", tc.name, tc.reason)
		}
		if got := answered(tc.proto); got != before {
			t.Errorf("%s: answered (%d answers, %d before)", tc.name, got, before)
		}
	}

	// Garbage: random ARP payloads and random ICMPv6 solicitations, then valid requests.
	for range 200 {
		b := make([]byte, 4+int(randByte())%60) // the kernel writes the ICMPv6 checksum at offset 2
		_, _ = rand.Read(b)
		arpTo(ethernet.Broadcast, b)
		b[0] = byte(ipv6.ICMPTypeNeighborSolicitation)
		nsTo(255, 0, b)
	}
	arp4, ndp6 := answered("arp"), answered("ndp")
	arpTo(ethernet.Broadcast, nil)
	nsTo(255, 0, nil)
	if !netnslab.Eventually(5*time.Second, func() bool {
		return answered("arp") > arp4 && answered("ndp") > ndp6
	}) {
		m, _ := l.Metrics(1)
		t.Fatalf("no answer after the garbage:\n%s\n%s", grep(m, "metalgate_speaker_l2"), l.Log(1))
	}
	m, _ := l.Metrics(1)
	t.Logf("drops:\n%s", grep(m, "metalgate_speaker_l2_requests_dropped_total{"))
	if strings.Contains(l.Log(1), "panic") {
		t.Errorf("the speaker panicked:\n%s", l.Log(1))
	}
}

func randByte() byte {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return b[0]
}
