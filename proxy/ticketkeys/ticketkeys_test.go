package ticketkeys

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func keyAt(at time.Time, b byte) Key { return Key{Created: at, Bytes: [Size]byte{b}} }

func entry(k Key) (string, []byte) { return k.Name(), bytes.Clone(k.Bytes[:]) }

func dataOf(keys ...Key) map[string][]byte {
	d := map[string][]byte{}
	for _, k := range keys {
		n, v := entry(k)
		d[n] = v
	}
	return d
}

var defaults = Policy{Rotation: time.Hour, Lifetime: 12 * time.Hour, Promote: time.Minute}

// TestParse: hostile and malformed entries first. Each is reported by name and not used;
// entries without the prefix are not its business; keys come newest first.
func TestParse(t *testing.T) {
	old, mid, soon := keyAt(t0.Add(-2*time.Hour), 1), keyAt(t0.Add(-time.Hour), 2), keyAt(t0.Add(4*time.Minute), 3)
	for _, tc := range []struct {
		name         string
		data         map[string][]byte
		wantKeys     []Key
		wantProblems []string // substrings, one per problem, in order
	}{
		{name: "not a number", data: map[string][]byte{"ticket-key-abc": make([]byte, Size)}, wantProblems: []string{"data.ticket-key-abc: want ticket-key-<Unix seconds>"}},
		{name: "zero", data: map[string][]byte{"ticket-key-0": make([]byte, Size)}, wantProblems: []string{"data.ticket-key-0: want"}},
		{name: "negative", data: map[string][]byte{"ticket-key--5": make([]byte, Size)}, wantProblems: []string{"data.ticket-key--5: want"}},
		{name: "a plus sign", data: map[string][]byte{"ticket-key-+1800000000": make([]byte, Size)}, wantProblems: []string{"data.ticket-key-+1800000000: want"}},
		{name: "a leading zero (two names for one time)", data: map[string][]byte{"ticket-key-01800000000": make([]byte, Size)}, wantProblems: []string{"data.ticket-key-01800000000: want"}},
		{name: "empty time", data: map[string][]byte{"ticket-key-": make([]byte, Size)}, wantProblems: []string{"data.ticket-key-: want"}},
		{name: "short key", data: map[string][]byte{"ticket-key-1800000000": make([]byte, Size-1)}, wantProblems: []string{"data.ticket-key-1800000000: 31 bytes, want 32"}},
		{name: "long key", data: map[string][]byte{"ticket-key-1800000000": make([]byte, Size+1)}, wantProblems: []string{"data.ticket-key-1800000000: 33 bytes, want 32"}},
		{name: "empty key", data: map[string][]byte{"ticket-key-1800000000": nil}, wantProblems: []string{"0 bytes, want 32"}},
		{name: "made far in the future", data: dataOf(keyAt(t0.Add(MaxFuture+time.Second), 9)), wantProblems: []string{"more than 5m0s after now"}},
		{name: "a huge time", data: map[string][]byte{"ticket-key-" + strconv.FormatInt(1<<62, 10): make([]byte, Size)}, wantProblems: []string{"after now"}},
		{name: "other entries ignored", data: map[string][]byte{"key": {1}, "ticket-keys": {2}, "x-ticket-key-1": {3}}},
		{name: "newest first, clock skew allowed", data: dataOf(old, soon, mid), wantKeys: []Key{soon, mid, old}},
		{name: "good and bad together", data: func() map[string][]byte {
			d := dataOf(mid)
			d["ticket-key-1"] = []byte{1}
			return d
		}(), wantKeys: []Key{mid}, wantProblems: []string{"data.ticket-key-1: 1 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, problems := Parse(tc.data, t0)
			if len(keys) != len(tc.wantKeys) {
				t.Fatalf("keys %v, want %v", keys, tc.wantKeys)
			}
			for i := range keys {
				if keys[i] != tc.wantKeys[i] {
					t.Errorf("key %d: %v, want %v", i, keys[i], tc.wantKeys[i])
				}
			}
			if len(problems) != len(tc.wantProblems) {
				t.Fatalf("problems %q, want %q", problems, tc.wantProblems)
			}
			for i, p := range problems {
				if !strings.Contains(p, tc.wantProblems[i]) {
					t.Errorf("problem %q, want it to contain %q", p, tc.wantProblems[i])
				}
			}
		})
	}
}

// TestPolicyCheck: each bad setting is named; the defaults pass.
func TestPolicyCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"defaults", defaults, ""},
		{"rotation under a minute", Policy{Rotation: 59 * time.Second, Lifetime: time.Hour}, "rotation 59s: want at least 1m"},
		{"negative promotion", Policy{Rotation: time.Hour, Lifetime: 2 * time.Hour, Promote: -1}, "promotion delay -1ns"},
		{"promotion as long as the rotation", Policy{Rotation: time.Hour, Lifetime: 3 * time.Hour, Promote: time.Hour}, "promotion delay 1h0m0s: want at least 0 and less than the rotation period"},
		{"lifetime shorter than rotation and promotion", Policy{Rotation: time.Hour, Lifetime: time.Hour, Promote: time.Minute}, "lifetime 1h0m0s: want at least the rotation period plus the promotion delay (1h1m0s)"},
		{"too many keys", Policy{Rotation: time.Minute, Lifetime: 50 * time.Minute}, "lifetime 50m0s: want at most 49 rotation periods"},
		{"just enough keys", Policy{Rotation: time.Minute, Lifetime: 49 * time.Minute}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDueAndInUse: when a key is made, which key encrypts (a new key only once every replica
// has had time to read it), which decrypt (the live ones, at most MaxKeys).
func TestDueAndInUse(t *testing.T) {
	prev, cur := keyAt(t0.Add(-90*time.Minute), 1), keyAt(t0.Add(-30*time.Second), 2)
	expired := keyAt(t0.Add(-12*time.Hour-time.Second), 3)
	atLifetime := keyAt(t0.Add(-12*time.Hour), 4)
	many := make([]Key, 60)
	for i := range many {
		many[i] = keyAt(t0.Add(-time.Duration(i)*time.Minute), byte(i))
	}
	for _, tc := range []struct {
		name    string
		keys    []Key
		wantDue bool
		wantUse []Key // encrypting first
	}{
		{name: "none", keys: nil, wantDue: true},
		{name: "only expired", keys: []Key{expired}, wantDue: true},
		{name: "one at the lifetime still decrypts", keys: []Key{atLifetime}, wantDue: true, wantUse: []Key{atLifetime}},
		{name: "newest younger than the rotation", keys: []Key{keyAt(t0.Add(-59*time.Minute), 5)}, wantUse: []Key{keyAt(t0.Add(-59*time.Minute), 5)}},
		{name: "newest exactly the rotation old", keys: []Key{keyAt(t0.Add(-time.Hour), 6)}, wantDue: true, wantUse: []Key{keyAt(t0.Add(-time.Hour), 6)}},
		{name: "a new key decrypts, the previous encrypts until promoted", keys: []Key{cur, prev, expired}, wantUse: []Key{prev, cur}},
		{name: "the first key ever encrypts at once", keys: []Key{cur}, wantUse: []Key{cur}},
		{name: "promoted", keys: []Key{keyAt(t0.Add(-time.Minute), 7), prev}, wantUse: []Key{keyAt(t0.Add(-time.Minute), 7), prev}},
		{name: "a key from a fast clock decrypts only", keys: []Key{keyAt(t0.Add(time.Minute), 8), prev}, wantUse: []Key{prev, keyAt(t0.Add(time.Minute), 8)}},
		{name: "at most MaxKeys, the newest", keys: many, wantUse: append([]Key{many[1]}, append([]Key{many[0]}, many[2:MaxKeys]...)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaults.Due(tc.keys, t0); got != tc.wantDue {
				t.Errorf("Due: %t, want %t", got, tc.wantDue)
			}
			got, enc := defaults.InUse(tc.keys, t0)
			if len(got) != len(tc.wantUse) {
				t.Fatalf("InUse: %d keys, want %d", len(got), len(tc.wantUse))
			}
			for i := range got {
				if got[i] != tc.wantUse[i].Bytes {
					t.Errorf("InUse key %d: %x…, want %x…", i, got[i][:1], tc.wantUse[i].Bytes[:1])
				}
			}
			if len(got) > 0 && enc != tc.wantUse[0] {
				t.Errorf("encrypting key %v, want %v", enc, tc.wantUse[0])
			}
		})
	}
}

// TestRotate: a new key from the random source; expired keys dropped; every other entry (a
// person's, a malformed one) left as it is; no key is overwritten.
func TestRotate(t *testing.T) {
	live, expired := keyAt(t0.Add(-time.Hour), 1), keyAt(t0.Add(-13*time.Hour), 2)
	in := dataOf(live, expired)
	in["ticket-key-x"] = []byte("bad")
	in["notes"] = []byte("rotated by metalgate")
	random := bytes.NewReader(bytes.Repeat([]byte{7}, Size))
	out, added, dropped, err := defaults.Rotate(in, t0.Add(500*time.Millisecond), random)
	if err != nil {
		t.Fatal(err)
	}
	if added.Created != t0 || added.Bytes != [Size]byte(bytes.Repeat([]byte{7}, Size)) {
		t.Errorf("added %v, want a key made at %v (whole seconds) from the random source", added, t0)
	}
	want := map[string]string{live.Name(): string(live.Bytes[:]), added.Name(): string(added.Bytes[:]), "ticket-key-x": "bad", "notes": "rotated by metalgate"}
	if len(out) != len(want) {
		t.Errorf("entries %d, want %d", len(out), len(want))
	}
	for n, v := range want {
		if string(out[n]) != v {
			t.Errorf("data.%s = %q, want %q", n, out[n], v)
		}
	}
	if len(dropped) != 1 || dropped[0] != expired.Name() {
		t.Errorf("dropped %v, want [%s]", dropped, expired.Name())
	}
	if _, ok := in[added.Name()]; ok || len(in) != 4 {
		t.Error("Rotate changed its input")
	}

	if _, _, _, err := defaults.Rotate(dataOf(keyAt(t0, 9)), t0, bytes.NewReader(make([]byte, Size))); err == nil || !strings.Contains(err.Error(), "is there already") {
		t.Errorf("a key of the same second: %v, want an error", err)
	}
	if _, _, _, err := defaults.Rotate(nil, t0, iotest.ErrReader(errors.New("no entropy"))); err == nil || !strings.Contains(err.Error(), "no entropy") {
		t.Errorf("a failing random source: %v, want its error", err)
	}
}
