package claims_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/speaker/claims"
)

// TestHoldWire: a message without a hold keeps format 1 byte for byte (speakers before holds
// read it); a hold is format 2 and round-trips; a hold of 0 ms in format 2, or one that is not
// whole milliseconds, is refused.
func TestHoldWire(t *testing.T) {
	plain := encode(t, claims.Message{Node: "n2", Version: 7, VIPs: []netip.Addr{a1}})
	if !bytes.Equal(plain, raw("n2", 7, 1, a1.AsSlice())) {
		t.Fatalf("a message without a hold changed on the wire: %x", plain)
	}
	m := claims.Message{Node: "n2", Version: 8, VIPs: []netip.Addr{a1, a6}, Hold: 10 * time.Second}
	b := encode(t, m)
	if b[1] != 2 {
		t.Fatalf("format %d, want 2", b[1])
	}
	got, err := claims.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	zero := slicesReplace(b, 3+2+8, []byte{0, 0, 0, 0}) // the hold field of "n2"
	if _, err := claims.Decode(zero); !errors.Is(err, claims.ErrMalformed) {
		t.Errorf("hold of 0 ms: %v, want ErrMalformed", err)
	}
	if _, err := (claims.Message{Node: "n2", Hold: time.Microsecond}).Encode(); !errors.Is(err, claims.ErrMalformed) {
		t.Errorf("hold of 1µs: %v, want ErrMalformed", err)
	}
	if _, err := claims.Decode(b[:len(b)-1]); !errors.Is(err, claims.ErrMalformed) {
		t.Errorf("truncated hold: %v, want ErrMalformed", err)
	}
}

func slicesReplace(b []byte, at int, with []byte) []byte {
	out := bytes.Clone(b)
	copy(out[at:], with)
	return out
}

// clock is a settable clock for a Store.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestStoreHolds: a member that leaves after sending a hold stays held until the hold ends
// (at most claims.MaxHold) or its new speaker's claims arrive; a hold that arrives just after
// the leave still counts; hostile or late holds are refused and change nothing.
func TestStoreHolds(t *testing.T) {
	hold := func(node string, version uint64, d time.Duration) []byte {
		return encode(t, claims.Message{Node: node, Version: version, VIPs: []netip.Addr{a1}, Hold: d})
	}
	for _, tc := range []struct {
		name string
		// steps run in order against a Store whose members are live (mutated by "leave").
		run       func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error
		wantErr   error
		wantHolds []string // nodes held at the end
	}{
		{name: "held after the leave", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("n2", 10, 10*time.Second))
			delete(live, "n2")
			s.Forget("n2")
			c.now = c.now.Add(10*time.Second - time.Millisecond)
			return err
		}, wantHolds: []string{"n2"}},
		{name: "the hold ends", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("n2", 10, 10*time.Second))
			delete(live, "n2")
			s.Forget("n2")
			c.now = c.now.Add(10 * time.Second)
			return err
		}},
		{name: "a huge hold ends after MaxHold", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("n2", 10, 1000*time.Hour))
			delete(live, "n2")
			s.Forget("n2")
			c.now = c.now.Add(claims.MaxHold)
			return err
		}},
		{name: "the new speaker's claims end the hold", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("n2", 10, 10*time.Second))
			delete(live, "n2")
			s.Forget("n2")
			live["n2"] = true
			if _, err := s.Receive(encode(t, claims.Message{Node: "n2", Version: 20})); err != nil {
				t.Fatal(err)
			}
			return err
		}},
		{name: "a plain leave holds nothing", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a1}}))
			delete(live, "n2")
			s.Forget("n2")
			return err
		}},
		{name: "a hold that arrives just after the leave counts", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, _ = s.Receive(encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a1}}))
			delete(live, "n2")
			s.Forget("n2")
			c.now = c.now.Add(time.Second)
			_, err := s.Receive(hold("n2", 11, 10*time.Second))
			return err
		}, wantHolds: []string{"n2"}},
		{name: "a hold that arrives long after the leave is refused", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, _ = s.Receive(encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a1}}))
			delete(live, "n2")
			s.Forget("n2")
			c.now = c.now.Add(3 * time.Second)
			_, err := s.Receive(hold("n2", 11, 10*time.Second))
			return err
		}, wantErr: claims.ErrNotMember},
		{name: "a replayed hold after the leave is refused", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, _ = s.Receive(encode(t, claims.Message{Node: "n2", Version: 10, VIPs: []netip.Addr{a1}}))
			delete(live, "n2")
			s.Forget("n2")
			_, err := s.Receive(hold("n2", 9, 10*time.Second))
			return err
		}, wantErr: claims.ErrStale},
		{name: "a hold of a node that never was a member is refused", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("n9", 10, 10*time.Second))
			return err
		}, wantErr: claims.ErrNotMember},
		{name: "a hold in this node's name is refused", run: func(t *testing.T, s *claims.Store, c *clock, live map[string]bool) error {
			_, err := s.Receive(hold("self", 10, 10*time.Second))
			return err
		}, wantErr: claims.ErrSelf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := map[string]bool{"n2": true, "n3": true}
			s, err := claims.NewStore("self", t0, func(n string) bool { return live[n] })
			if err != nil {
				t.Fatal(err)
			}
			c := &clock{now: t0}
			claims.SetNow(s, c.Now)
			if err := tc.run(t, s, c, live); !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			var got []string
			for _, h := range s.Holds() {
				got = append(got, h.Node)
				if h.Until().Sub(h.Since) > claims.MaxHold {
					t.Errorf("hold of %s for %v, more than MaxHold", h.Node, h.Until().Sub(h.Since))
				}
			}
			if diff := cmp.Diff(tc.wantHolds, got); diff != "" {
				t.Errorf("holds (-want +got):\n%s", diff)
			}
			if _, ok := s.Claims()["n2"]; ok && !live["n2"] {
				t.Errorf("claims of n2 kept after it left")
			}
		})
	}
}

// TestHoldFile: the leaving speaker's hold file is resumed once by the next speaker on the
// node, and refused when stale, from the future, of another node, without a hold, corrupt or
// oversized; every read removes the file.
func TestHoldFile(t *testing.T) {
	hold := claims.Message{Node: "n1", Version: 5, VIPs: []netip.Addr{a1, a2}, Hold: 10 * time.Second}
	stamped := func(at time.Time, b []byte) []byte {
		return append(binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())), b...)
	}
	for _, tc := range []struct {
		name    string
		write   func(t *testing.T, dir string) // nil: no file
		self    string
		at      time.Duration // read at t0 + at
		limit   time.Duration
		want    []netip.Addr
		wantFor time.Duration
		wantErr error
	}{
		{name: "resumed", write: func(t *testing.T, dir string) {
			if err := claims.WriteHoldFile(dir, hold, t0); err != nil {
				t.Fatal(err)
			}
		}, self: "n1", at: 3 * time.Second, limit: time.Minute, want: hold.VIPs, wantFor: 10 * time.Second},
		{name: "limited by the reader", write: func(t *testing.T, dir string) {
			_ = claims.WriteHoldFile(dir, hold, t0)
		}, self: "n1", at: 3 * time.Second, limit: 5 * time.Second, want: hold.VIPs, wantFor: 5 * time.Second},
		{name: "no file", self: "n1", wantErr: fs.ErrNotExist},
		{name: "stale", write: func(t *testing.T, dir string) {
			_ = claims.WriteHoldFile(dir, hold, t0)
		}, self: "n1", at: 10 * time.Second, limit: time.Minute, wantErr: claims.ErrHoldEnded},
		{name: "from the future", write: func(t *testing.T, dir string) {
			_ = claims.WriteHoldFile(dir, hold, t0.Add(time.Hour))
		}, self: "n1", limit: time.Minute, wantErr: claims.ErrHoldEnded},
		{name: "another node's", write: func(t *testing.T, dir string) {
			_ = claims.WriteHoldFile(dir, hold, t0)
		}, self: "n2", limit: time.Minute, wantErr: claims.ErrOtherNode},
		{name: "without a hold", write: func(t *testing.T, dir string) {
			plain := hold
			plain.Hold = 0
			writeFile(t, dir, stamped(t0, encode(t, plain)))
		}, self: "n1", limit: time.Minute, wantErr: claims.ErrMalformed},
		{name: "corrupt", write: func(t *testing.T, dir string) {
			b := stamped(t0, encode(t, hold))
			writeFile(t, dir, append(b, 0))
		}, self: "n1", limit: time.Minute, wantErr: claims.ErrMalformed},
		{name: "truncated stamp", write: func(t *testing.T, dir string) {
			writeFile(t, dir, []byte{1, 2, 3})
		}, self: "n1", limit: time.Minute, wantErr: claims.ErrMalformed},
		{name: "oversized", write: func(t *testing.T, dir string) {
			writeFile(t, dir, make([]byte, 8+claims.MaxMessage+1))
		}, self: "n1", limit: time.Minute, wantErr: claims.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.write != nil {
				tc.write(t, dir)
			}
			h, err := claims.ReadHoldFile(dir, tc.self, t0.Add(tc.at), tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, h.VIPs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("VIPs (-want +got):\n%s", diff)
				}
				if h.For != tc.wantFor || h.Node != tc.self || !h.Since.Equal(t0) {
					t.Errorf("hold %+v, want node %s for %v since %v", h, tc.self, tc.wantFor, t0)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, claims.HoldFileName)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the file is still there after the read: %v", err)
			}
			if _, err := claims.ReadHoldFile(dir, tc.self, t0.Add(tc.at), tc.limit); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a second read: %v, want fs.ErrNotExist (used once)", err)
			}
		})
	}
}

func writeFile(t *testing.T, dir string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, claims.HoldFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
