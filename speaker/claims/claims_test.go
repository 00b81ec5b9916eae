package claims_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/speaker/claims"
)

var (
	t0 = time.Unix(1_700_000_000, 0)
	a1 = netip.MustParseAddr("198.51.100.1")
	a2 = netip.MustParseAddr("198.51.100.2")
	a6 = netip.MustParseAddr("2001:db8::1")
)

func encode(t *testing.T, m claims.Message) []byte {
	t.Helper()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// raw builds a message by hand, bypassing Encode's checks: addrs are (length, bytes) pairs.
func raw(node string, version uint64, count int, addrs ...[]byte) []byte {
	b := []byte{claims.Magic, 1, byte(len(node))}
	b = append(b, node...)
	b = binary.BigEndian.AppendUint64(b, version)
	b = binary.BigEndian.AppendUint16(b, uint16(count))
	for _, a := range addrs {
		b = append(b, byte(len(a)))
		b = append(b, a...)
	}
	return b
}

func newStore(t *testing.T, members ...string) *claims.Store {
	t.Helper()
	live := map[string]bool{}
	for _, m := range members {
		live[m] = true
	}
	s, err := claims.NewStore("self", t0, func(n string) bool { return live[n] })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReceiveRefuses: hostile and stale input is refused with its reason and leaves the Store
// as it was (n2 keeps its claims at version 10).
func TestReceiveRefuses(t *testing.T) {
	v4 := a1.AsSlice()
	many := make([][]byte, 0, claims.MaxVIPs+1)
	for a, i := netip.MustParseAddr("10.0.0.1"), 0; i <= claims.MaxVIPs; a, i = a.Next(), i+1 {
		many = append(many, a.AsSlice())
	}
	mapped := netip.AddrFrom16(a1.As16()).AsSlice()
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"larger than the bound", append(raw("n2", 11, 0), make([]byte, claims.MaxMessage)...), claims.ErrTooLarge},
		{"more addresses than the bound", raw("n2", 11, claims.MaxVIPs+1, many...), claims.ErrTooLarge},
		{"empty", nil, claims.ErrMalformed},
		{"not a claims message", []byte{1, 1, 0}, claims.ErrMalformed},
		{"unknown format version", append([]byte{claims.Magic, 2}, raw("n2", 11, 0)[2:]...), claims.ErrMalformed},
		{"empty node name", raw("", 11, 0), claims.ErrMalformed},
		{"truncated header", raw("n2", 11, 0)[:8], claims.ErrMalformed},
		{"fewer addresses than counted", raw("n2", 11, 2, v4), claims.ErrMalformed},
		{"more bytes than counted", raw("n2", 11, 1, v4, a2.AsSlice()), claims.ErrMalformed},
		{"address of 5 bytes", raw("n2", 11, 1, []byte{198, 51, 100, 1, 0}), claims.ErrMalformed},
		{"address cut short", raw("n2", 11, 1, v4)[:len(raw("n2", 11, 1, v4))-1], claims.ErrMalformed},
		{"IPv4-mapped IPv6", raw("n2", 11, 1, mapped), claims.ErrMalformed},
		{"unspecified address", raw("n2", 11, 1, netip.IPv4Unspecified().AsSlice()), claims.ErrMalformed},
		{"not sorted", raw("n2", 11, 2, a2.AsSlice(), v4), claims.ErrMalformed},
		{"duplicate", raw("n2", 11, 2, v4, v4), claims.ErrMalformed},
		{"older version", encode(t, claims.Message{Node: "n2", Version: 9, VIPs: []netip.Addr{a2}}), claims.ErrStale},
		{"same version, other content", encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a2}}), claims.ErrStale},
		{"in this node's name", encode(t, claims.Message{Node: "self", Version: 1 << 62, VIPs: []netip.Addr{a2}}), claims.ErrSelf},
		{"of a node that is not a live member", encode(t, claims.Message{Node: "n9", Version: 11, VIPs: []netip.Addr{a2}}), claims.ErrNotMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, "n2", "n3")
			if _, err := s.Receive(encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a1}})); err != nil {
				t.Fatal(err)
			}
			before := s.Claims()
			changed, err := s.Receive(tc.msg)
			if !errors.Is(err, tc.want) {
				t.Errorf("Receive: %v, want %v", err, tc.want)
			}
			if changed {
				t.Error("Receive reported a change")
			}
			if diff := cmp.Diff(before, s.Claims(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("claims changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestStore: newer claims replace older ones, a member that leaves loses its claims, and a
// restarted node (a later start) is newer than everything it sent before.
func TestStore(t *testing.T) {
	live := map[string]bool{"n2": true}
	s, err := claims.NewStore("self", t0, func(n string) bool { return live[n] })
	if err != nil {
		t.Fatal(err)
	}
	eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	recv := func(m claims.Message, wantChanged bool) {
		t.Helper()
		changed, err := s.Receive(encode(t, m))
		if err != nil || changed != wantChanged {
			t.Fatalf("Receive(%v) = %v, %v; want %v, nil", m, changed, err, wantChanged)
		}
	}
	recv(claims.Message{Node: "n2", Version: 5, VIPs: []netip.Addr{a1, a6}}, true)
	recv(claims.Message{Node: "n2", Version: 6, VIPs: []netip.Addr{a1, a6}}, false) // newer, same set
	recv(claims.Message{Node: "n2", Version: 7, VIPs: []netip.Addr{a2}}, true)
	if diff := cmp.Diff(map[string][]netip.Addr{"n2": {a2}}, s.Claims(), eq); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if !s.Forget("n2") || len(s.Claims()) != 0 {
		t.Fatalf("after Forget: %v", s.Claims())
	}
	live["n2"] = false
	if _, err := s.Receive(encode(t, claims.Message{Node: "n2", Version: 8, VIPs: []netip.Addr{a2}})); !errors.Is(err, claims.ErrNotMember) {
		t.Errorf("claims of a departed member: %v, want ErrNotMember", err)
	}

	// Own claims: a change bumps the version, no change does not; a restart is newer.
	first := s.Own()
	if changed, err := s.SetOwn(nil); changed || err != nil {
		t.Errorf("SetOwn(nothing) at start = %v, %v", changed, err)
	}
	if changed, err := s.SetOwn([]netip.Addr{a6, a1, a1}); !changed || err != nil {
		t.Fatalf("SetOwn = %v, %v", changed, err)
	}
	if changed, _ := s.SetOwn([]netip.Addr{a1, a6}); changed {
		t.Error("SetOwn of the same set reported a change")
	}
	own, err := claims.Decode(s.Own())
	if err != nil {
		t.Fatal(err)
	}
	old, _ := claims.Decode(first)
	if diff := cmp.Diff(claims.Message{Node: "self", Version: old.Version + 1, VIPs: []netip.Addr{a1, a6}}, own, eq); diff != "" {
		t.Errorf("own claims (-want +got):\n%s", diff)
	}
	restarted, _ := claims.NewStore("self", t0.Add(time.Second), func(string) bool { return true })
	again, _ := claims.Decode(restarted.Own())
	if again.Version <= own.Version {
		t.Errorf("restarted version %d is not newer than %d", again.Version, own.Version)
	}
	if _, err := s.SetOwn([]netip.Addr{netip.AddrFrom16(a1.As16())}); !errors.Is(err, claims.ErrMalformed) {
		t.Errorf("SetOwn(IPv4-mapped): %v, want ErrMalformed", err)
	}
	if !bytes.Equal(s.Own(), encode(t, own)) {
		t.Error("a refused SetOwn changed the own claims")
	}
}

// TestRoundTrip: Decode(Encode(m)) == m at the bound.
func TestRoundTrip(t *testing.T) {
	var vips []netip.Addr
	for a, i := netip.MustParseAddr("2001:db8::"), 0; i < claims.MaxVIPs; a, i = a.Next(), i+1 {
		vips = append(vips, a)
	}
	vips[0] = a1 // IPv4 sorts first
	m := claims.Message{Node: string(bytes.Repeat([]byte("n"), claims.MaxNameLen)), Version: 1<<64 - 1, VIPs: vips}
	b := encode(t, m)
	if len(b) > claims.MaxMessage {
		t.Fatalf("largest message %d bytes > MaxMessage %d", len(b), claims.MaxMessage)
	}
	got, err := claims.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := (claims.Message{Node: "n", VIPs: append(vips, netip.MustParseAddr("2001:db9::"))}).Encode(); !errors.Is(err, claims.ErrTooLarge) {
		t.Errorf("Encode of MaxVIPs+1: %v, want ErrTooLarge", err)
	}
}
