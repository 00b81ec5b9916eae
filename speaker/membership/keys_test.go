package membership

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReadKeyDir reads directories laid out as the kubelet mounts a Secret (files are links
// into a hidden ..data directory).
func TestReadKeyDir(t *testing.T) {
	k1, k2, k3 := strings.Repeat("1", 32), strings.Repeat("2", 32), strings.Repeat("3", 16)
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    Keys
		wantErr string
	}{
		{name: "primary only", files: map[string]string{"key": k1}, want: Keys{Primary: []byte(k1)}},
		{name: "rotation: others sorted by name", files: map[string]string{"key": k1, "key-old": k3, "key-next": k2},
			want: Keys{Primary: []byte(k1), Others: [][]byte{[]byte(k2), []byte(k3)}}},
		{name: "other files ignored", files: map[string]string{"key": k1, "password": k2, "..2026_01_01": k3},
			want: Keys{Primary: []byte(k1)}},
		{name: "the primary again under another name", files: map[string]string{"key": k1, "key-copy": k1},
			want: Keys{Primary: []byte(k1)}},
		{name: "no primary", files: map[string]string{"key-next": k2}, wantErr: `no memberlist key (want a file "key"`},
		{name: "short key", files: map[string]string{"key": k1, "key-next": "short"}, wantErr: "memberlist key 1 has 5 bytes, want at least 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "..data")
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, v := range tc.files {
				if err := os.WriteFile(filepath.Join(data, name), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadKeyDir(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	if _, err := ReadKeyDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := New(Options{Name: "a", BindAddr: "127.0.0.1", BindPort: -1}); !errors.Is(err, ErrNoKey) {
		t.Errorf("New without keys: %v, want ErrNoKey", err)
	}
}

// TestKeyRotation follows the documented rotation on three speakers while they ping each other
// (under -race: the keyring changes while packets are decrypted): add the new key everywhere,
// make it primary everywhere, remove the old one. Each member stays reachable from every other
// at each step. Then a rogue with the old key, from a speaker's address, is refused; and making
// a key primary on one speaker before the others accept it cuts that speaker off, which is why
// the order matters.
func TestKeyRotation(t *testing.T) {
	old, next := testKeys.Primary, []byte("the next cluster key, 32 bytes..")
	addrs := map[string]string{"a": "127.0.90.1", "b": "127.0.90.2", "c": "127.0.90.3", "d": "127.0.90.4"}
	var ms []*Membership
	for _, n := range []string{"a", "b", "c"} {
		m, err := New(Options{Name: n, BindAddr: addrs[n], BindPort: -1, Keys: Keys{Primary: old}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		ms = append(ms, m)
	}
	admitAll(ms, addrs)
	for _, m := range ms[1:] {
		if _, err := m.Join([]string{fmt.Sprintf("%s:%d", addrs["a"], ms[0].Port())}); err != nil {
			t.Fatal(err)
		}
	}
	// allReach waits until every speaker has had an answer from every other to a ping sent
	// after since: pings signed and encrypted with the keys of the step get through.
	allReach := func(what string, since time.Time) {
		t.Helper()
		defer func() {
			if !t.Failed() {
				return
			}
			for _, m := range ms {
				t.Logf("%s keys %d refused key %v sig %v unexp %v mal %v", m.name, len(m.ring.GetKeys()), refused(m, RefusedKey), refused(m, RefusedPingSignature), refused(m, RefusedPingUnexpected), refused(m, RefusedPingMalformed))
			}
		}()
		poll(t, 10*time.Second, what+": every speaker answers every other's pings", func() bool {
			for _, m := range ms {
				m.mu.Lock()
				n := 0
				for _, p := range m.peers {
					if p.lastAck.After(since) {
						n++
					}
				}
				m.mu.Unlock()
				if n != 2 {
					return false
				}
			}
			return true
		})
	}
	allReach("start", time.Now())
	for _, step := range []struct {
		desc string
		keys Keys
	}{
		{"1. accept the next key", Keys{Primary: old, Others: [][]byte{next}}},
		{"2. send with the next key", Keys{Primary: next, Others: [][]byte{old}}},
		{"3. drop the old key", Keys{Primary: next}},
	} {
		since := time.Now()
		for _, m := range ms {
			if err := m.SetKeys(step.keys); err != nil {
				t.Fatal(err)
			}
			if got := len(m.ring.GetKeys()); got != 1+len(step.keys.Others) {
				t.Errorf("%s: %s has %d keys", step.desc, m.name, got)
			}
		}
		allReach(step.desc, since)
	}
	if got := Fingerprint(next); got == Fingerprint(old) || len(got) != 8 {
		t.Errorf("fingerprints %q %q", got, Fingerprint(old))
	}

	rogue := rogueMember(t, "d", addrs["d"], keyring(t, old))
	_, _ = rogue.Join([]string{fmt.Sprintf("%s:%d", addrs["a"], ms[0].Port())})
	poll(t, 5*time.Second, "the old key is refused", func() bool { return refused(ms[0], RefusedKey) > 0 })
	if ms[0].Live()["d"] {
		t.Error("d joined with the removed key")
	}

	// Out of order: a sends with a key nobody else accepts.
	if err := ms[0].SetKeys(Keys{Primary: []byte("a key only a knows, 32 bytes....")}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	poll(t, 5*time.Second, "b and c refuse a's packets", func() bool { return refused(ms[1], RefusedKey) > 0 && refused(ms[2], RefusedKey) > 0 })
	holds(t, 500*time.Millisecond, "no answer from a after the change", func() bool {
		for _, m := range ms[1:] {
			m.mu.Lock()
			p := m.peers["a"]
			ok := p == nil || !p.lastAck.After(cut.Add(m.every)) // a ping in flight at the change may still be answered
			m.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	})
}
