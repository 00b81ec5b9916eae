package membership

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

// What a rogue on the network sends: memberlist messages written by hand (memberlist v0.5.3's
// wire format: one message type byte, then the message as a msgpack map), optionally
// encrypted as memberlist does (version 1: [1][12-byte nonce][AES-GCM sealed], no label).

// memberlist message types (net.go, messageType).
const (
	wireSuspect = 3
	wireAlive   = 4
	wireDead    = 5
	wireUser    = 8
)

// mp is a minimal msgpack encoder for the maps memberlist decodes.
type mp []byte

func (b mp) mapHeader(n int) mp { return append(b, 0x80|byte(n)) }
func (b mp) str(s string) mp {
	switch {
	case len(s) < 32:
		b = append(b, 0xa0|byte(len(s)))
	default:
		b = append(b, 0xd9, byte(len(s)))
	}
	return append(b, s...)
}
func (b mp) uint(v uint32) mp {
	if v < 128 {
		return append(b, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xce), v)
}

// wireDeadMsg is memberlist's dead{Incarnation, Node, From} (From == Node means "left").
func wireDeadMsg(node, from string, inc uint32) []byte {
	b := mp{wireDead}.mapHeader(3).str("Incarnation").uint(inc).str("Node").str(node).str("From").str(from)
	return b
}

// wireSuspectMsg is memberlist's suspect{Incarnation, Node, From}.
func wireSuspectMsg(node, from string, inc uint32) []byte {
	return mp{wireSuspect}.mapHeader(3).str("Incarnation").uint(inc).str("Node").str(node).str("From").str(from)
}

// wireAliveMsg is memberlist's alive{Incarnation, Node, Addr, Port, Meta, Vsn}.
func wireAliveMsg(node string, addr netip.AddrPort, inc uint32) []byte {
	ip := addr.Addr().As4()
	return mp{wireAlive}.mapHeader(6).str("Incarnation").uint(inc).str("Node").str(node).
		str("Addr").str(string(ip[:])).str("Port").uint(uint32(addr.Port())).str("Meta").str("").
		str("Vsn").str(string([]byte{1, 5, 5, 0, 0, 0}))
}

// wireUserMsg is a memberlist user message (the quorum pings travel as those).
func wireUserMsg(payload []byte) []byte { return append([]byte{wireUser}, payload...) }

// seal encrypts a packet as memberlist does with the key derived from secret.
func seal(t testing.TB, secret, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(derive(secret, labelMemberlist))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 1+12, 1+12+len(plain)+gcm.Overhead())
	out[0] = 1
	_, _ = rand.Read(out[1:13])
	return gcm.Seal(out, out[1:13], plain, nil)
}

// rogueSocket is a UDP socket on a loopback address: the rogue's source address.
func rogueSocket(t testing.TB, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func sendTo(t testing.TB, c *net.UDPConn, m *Membership, pkt []byte) {
	t.Helper()
	to := &net.UDPAddr{IP: net.IP(m.ml.LocalNode().Addr), Port: m.Port()}
	if _, err := c.WriteToUDP(pkt, to); err != nil {
		t.Fatal(err)
	}
}
