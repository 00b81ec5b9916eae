package membership

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
)

// The quorum pings (see Membership.Reachable) travel as memberlist user messages, so they are
// encrypted with the cluster key like everything else memberlist sends; on top of that each
// carries an HMAC-SHA256 that binds the kind, the nonce and both names. Replay is defeated by
// the nonce: a pong counts only when it echoes a nonce this speaker sent to that peer within
// FenceWindow, and only once. No timestamps: the nodes' clocks need not agree.
//
// Layout (lengths in bytes):
//
//	1  version (pingVersion)
//	1  kind (kindPing, kindPong)
//	16 nonce
//	1  n = len(from), 1..maxNameLen
//	n  from: the sender's node name
//	1  m = len(to), 1..maxNameLen
//	m  to: the recipient's node name
//	32 HMAC-SHA256(ping key, everything above)
const (
	pingVersion = 1
	nonceLen    = 16
	macLen      = sha256.Size
	maxNameLen  = 253 // a Kubernetes node name is a DNS subdomain
)

type pingKind byte

const (
	kindPing pingKind = 1
	kindPong pingKind = 2
)

// pingMsg is one quorum ping or pong.
type pingMsg struct {
	Kind  pingKind
	Nonce [nonceLen]byte
	From  string
	To    string
}

// Errors of parsePing; each is a refusal reason (Refusal*).
var (
	errPingMalformed = errors.New("malformed quorum ping")
	errPingSignature = errors.New("quorum ping signature matches no key")
)

// encode returns m signed with key.
func (m pingMsg) encode(key []byte) ([]byte, error) {
	if len(m.From) == 0 || len(m.From) > maxNameLen || len(m.To) == 0 || len(m.To) > maxNameLen {
		return nil, fmt.Errorf("quorum ping: names of %d and %d bytes, want 1..%d", len(m.From), len(m.To), maxNameLen)
	}
	b := make([]byte, 0, 2+nonceLen+2+len(m.From)+len(m.To)+macLen)
	b = append(b, pingVersion, byte(m.Kind))
	b = append(b, m.Nonce[:]...)
	b = append(b, byte(len(m.From)))
	b = append(b, m.From...)
	b = append(b, byte(len(m.To)))
	b = append(b, m.To...)
	return append(b, sign(key, b)...), nil
}

func sign(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return h.Sum(nil)
}

// parsePing decodes b and checks its signature against every key (rotation: a peer may still
// sign with the previous primary). Anything that does not parse exactly is errPingMalformed.
func parsePing(b []byte, keys [][]byte) (pingMsg, error) {
	var m pingMsg
	const fixed = 2 + nonceLen + 1
	if len(b) < fixed+1+1+1+macLen || b[0] != pingVersion || (pingKind(b[1]) != kindPing && pingKind(b[1]) != kindPong) {
		return m, errPingMalformed
	}
	m.Kind = pingKind(b[1])
	copy(m.Nonce[:], b[2:2+nonceLen])
	rest := b[fixed-1:]
	from, rest, ok := cutName(rest)
	if !ok {
		return m, errPingMalformed
	}
	to, rest, ok := cutName(rest)
	if !ok || len(rest) != macLen {
		return m, errPingMalformed
	}
	m.From, m.To = from, to
	body := b[:len(b)-macLen]
	for _, k := range keys {
		if hmac.Equal(sign(k, body), rest) {
			return m, nil
		}
	}
	return m, errPingSignature
}

// cutName reads a length-prefixed name (1..maxNameLen bytes) off the front of b.
func cutName(b []byte) (string, []byte, bool) {
	if len(b) < 1 {
		return "", nil, false
	}
	n := int(b[0])
	if n == 0 || n > maxNameLen || len(b) < 1+n {
		return "", nil, false
	}
	return string(b[1 : 1+n]), b[1+n:], true
}
