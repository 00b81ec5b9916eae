package membership

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePing(t *testing.T) {
	keys := deriveAll(Keys{Primary: testKeys.Primary, Others: [][]byte{[]byte("the previous cluster key........")}})
	good := pingMsg{Kind: kindPing, Nonce: [nonceLen]byte{1, 2, 3}, From: "n1", To: "n2"}
	enc := func(m pingMsg, key []byte) []byte {
		b, err := m.encode(key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	signed := enc(good, keys.ping[0])
	for _, tc := range []struct {
		name    string
		in      []byte
		want    pingMsg
		wantErr error
	}{
		{name: "ping", in: signed, want: good},
		{name: "pong signed with the other key (rotation)", in: enc(pingMsg{Kind: kindPong, From: "a", To: "b"}, keys.ping[1]), want: pingMsg{Kind: kindPong, From: "a", To: "b"}},
		{name: "signed with an unknown key", in: enc(good, []byte("x")), wantErr: errPingSignature},
		{name: "signed with the memberlist key", in: enc(good, keys.memberlist[0]), wantErr: errPingSignature},
		{name: "one bit flipped in the nonce", in: flip(signed, 5), wantErr: errPingSignature},
		{name: "one bit flipped in the name", in: flip(signed, 2+nonceLen+1), wantErr: errPingSignature},
		{name: "empty", in: nil, wantErr: errPingMalformed},
		{name: "truncated", in: signed[:len(signed)-1], wantErr: errPingMalformed},
		{name: "trailing byte", in: append(bytes.Clone(signed), 0), wantErr: errPingMalformed},
		{name: "version 2", in: set(signed, 0, 2), wantErr: errPingMalformed},
		{name: "unknown kind", in: set(signed, 1, 3), wantErr: errPingMalformed},
		{name: "from length 0", in: set(signed, 2+nonceLen, 0), wantErr: errPingMalformed},
		{name: "from length past the end", in: set(signed, 2+nonceLen, 250), wantErr: errPingMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePing(tc.in, keys.ping)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	if _, err := (pingMsg{Kind: kindPing, From: strings.Repeat("n", 254), To: "b"}).encode(keys.ping[0]); err == nil {
		t.Error("a 254-byte name was encoded")
	}
}

func flip(b []byte, i int) []byte { return set(b, i, b[i]^1) }

func set(b []byte, i int, v byte) []byte {
	out := bytes.Clone(b)
	out[i] = v
	return out
}

// FuzzParsePing: parsePing never panics, and what it accepts encodes back to the same bytes.
func FuzzParsePing(f *testing.F) {
	keys := deriveAll(testKeys).ping
	for _, m := range []pingMsg{{Kind: kindPing, From: "n1", To: "n2"}, {Kind: kindPong, Nonce: [nonceLen]byte{9}, From: "a.example", To: "b"}} {
		b, _ := m.encode(keys[0])
		f.Add(b)
	}
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parsePing(b, keys)
		if err != nil {
			return
		}
		again, err := m.encode(keys[0])
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parsed %+v from %x, encodes to %x (%v)", m, b, again, err)
		}
	})
}
