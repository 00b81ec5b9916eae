// Package ticketkeys keeps the TLS session ticket keys that every replica of a proxy shares,
// in one Secret, so that a client resumes its session at whichever replica its next
// connection reaches (another node after a failover, an ECMP route, a new pod after a rollout)
// instead of making a full handshake there.
//
// The Secret holds one data entry per key, named ticket-key-<unix seconds it was made> with
// 32 random bytes. Replicas read it every poll interval; whichever finds the newest key older
// than the rotation period adds a new one (an Update with the resourceVersion it read, so two
// replicas never both rotate) and drops keys older than the lifetime. A new key decrypts at
// once everywhere it is known but encrypts only once it is Promote old, by which time every
// replica has read it; until then the previous key encrypts. Entries it does not recognise
// are left alone and reported.
package ticketkeys

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Prefix names the Secret's key entries: Prefix followed by the key's creation time in Unix
// seconds.
const Prefix = "ticket-key-"

// Size is the length of a key: crypto/tls's session ticket key.
const Size = 32

// MaxKeys bounds the keys in use: crypto/tls tries each on a ticket it cannot decrypt, and any
// client may send one. A Policy keeps at most Lifetime/Rotation+1 keys; a Secret with more
// (written by hand) has its newest MaxKeys used.
const MaxKeys = 50

// MaxFuture is how far in the future a key's creation time may be (clock skew between
// nodes); a key made later than that is not used.
const MaxFuture = 5 * time.Minute

// Policy is when keys are made, used and dropped.
type Policy struct {
	// Rotation: a new key is made when the newest is this old.
	Rotation time.Duration
	// Lifetime: a key is dropped (its tickets no longer resume) when it is this old.
	Lifetime time.Duration
	// Promote: a new key encrypts tickets once it is this old (every replica has read it).
	Promote time.Duration
}

// Check says what is wrong with p, naming the setting.
func (p Policy) Check() error {
	switch {
	case p.Rotation < time.Minute:
		return fmt.Errorf("rotation %s: want at least 1m", p.Rotation)
	case p.Promote < 0 || p.Promote >= p.Rotation:
		return fmt.Errorf("promotion delay %s: want at least 0 and less than the rotation period %s", p.Promote, p.Rotation)
	case p.Lifetime < p.Rotation+p.Promote:
		return fmt.Errorf("lifetime %s: want at least the rotation period plus the promotion delay (%s), or a ticket could outlive every key that decrypts it", p.Lifetime, p.Rotation+p.Promote)
	case p.Lifetime > time.Duration(MaxKeys-1)*p.Rotation:
		return fmt.Errorf("lifetime %s: want at most %d rotation periods (%s), so that at most %d keys are in use", p.Lifetime, MaxKeys-1, time.Duration(MaxKeys-1)*p.Rotation, MaxKeys)
	}
	return nil
}

// Key is one ticket key and when it was made.
type Key struct {
	Created time.Time
	Bytes   [Size]byte
}

// Name is the Secret data entry of k.
func (k Key) Name() string { return Prefix + strconv.FormatInt(k.Created.Unix(), 10) }

// Parse returns the keys in a Secret's data, newest first, and a problem for every entry it
// cannot use: a ticket-key- entry with a malformed time or length, or made more than
// MaxFuture after now. Other entries are not its business and are ignored.
func Parse(data map[string][]byte, now time.Time) (keys []Key, problems []string) {
	for name, v := range data {
		ts, ok := strings.CutPrefix(name, Prefix)
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || sec <= 0 || strconv.FormatInt(sec, 10) != ts {
			problems = append(problems, fmt.Sprintf("data.%s: want %s<Unix seconds>", name, Prefix))
			continue
		}
		if len(v) != Size {
			problems = append(problems, fmt.Sprintf("data.%s: %d bytes, want %d", name, len(v), Size))
			continue
		}
		created := time.Unix(sec, 0)
		if created.After(now.Add(MaxFuture)) {
			problems = append(problems, fmt.Sprintf("data.%s: made at %s, more than %s after now (%s)", name, created.UTC().Format(time.RFC3339), MaxFuture, now.UTC().Format(time.RFC3339)))
			continue
		}
		k := Key{Created: created}
		copy(k.Bytes[:], v)
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return b.Created.Compare(a.Created) })
	slices.Sort(problems)
	return keys, problems
}

// Live returns the keys of keys (newest first) that are not older than the lifetime, at most
// MaxKeys of them.
func (p Policy) Live(keys []Key, now time.Time) []Key {
	var live []Key
	for _, k := range keys {
		if now.Sub(k.Created) <= p.Lifetime && len(live) < MaxKeys {
			live = append(live, k)
		}
	}
	return live
}

// Due reports whether a new key is to be made: no live key is younger than the rotation
// period.
func (p Policy) Due(keys []Key, now time.Time) bool {
	live := p.Live(keys, now)
	return len(live) == 0 || now.Sub(live[0].Created) >= p.Rotation
}

// Rotate returns the Secret data after a rotation at now: data's other entries as they are,
// its live keys, and a new key read from random; dropped names the keys it removed.
func (p Policy) Rotate(data map[string][]byte, now time.Time, random io.Reader) (out map[string][]byte, added Key, dropped []string, err error) {
	added = Key{Created: now.Truncate(time.Second)}
	if _, err := io.ReadFull(random, added.Bytes[:]); err != nil {
		return nil, Key{}, nil, fmt.Errorf("make a ticket key: %w", err)
	}
	keys, _ := Parse(data, now)
	live := p.Live(keys, now)
	out = make(map[string][]byte, len(data)+1)
	for name, v := range data {
		out[name] = v
	}
	for _, k := range keys {
		if !slices.Contains(live, k) {
			delete(out, k.Name())
			dropped = append(dropped, k.Name())
		}
	}
	if _, taken := out[added.Name()]; taken {
		return nil, Key{}, nil, fmt.Errorf("a key made at %s is there already", added.Created.UTC().Format(time.RFC3339))
	}
	out[added.Name()] = added.Bytes[:]
	return out, added, dropped, nil
}

// InUse orders live keys for crypto/tls (Config.SetSessionTicketKeys): the one that encrypts
// first — the newest at least Promote old, or the oldest if none is — then every other live
// key, newest first. None: nil.
func (p Policy) InUse(keys []Key, now time.Time) (ordered [][Size]byte, encrypting Key) {
	live := p.Live(keys, now)
	if len(live) == 0 {
		return nil, Key{}
	}
	enc := len(live) - 1
	for i, k := range live {
		if now.Sub(k.Created) >= p.Promote {
			enc = i
			break
		}
	}
	ordered = append(ordered, live[enc].Bytes)
	for i, k := range live {
		if i != enc {
			ordered = append(ordered, k.Bytes)
		}
	}
	return ordered, live[enc]
}
