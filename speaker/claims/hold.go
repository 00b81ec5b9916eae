package claims

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// Held is the claims of a node whose speaker left with a hold: they stay the node's from Since
// for For (at most MaxHold), unless the node's new speaker sends claims first.
type Held struct {
	Node string
	VIPs []netip.Addr
	// Since is when the hold started: when it arrived (Store), or when the leaving speaker
	// wrote it (ReadHoldFile).
	Since time.Time
	For   time.Duration
}

// Until is when the hold ends: Since + For, at most MaxHold after Since.
func (h Held) Until() time.Time { return h.Since.Add(min(max(h.For, 0), MaxHold)) }

// Valid reports whether the hold is in force at now: it started (not in the future) and has
// not ended.
func (h Held) Valid(now time.Time) bool {
	return h.Node != "" && !now.Before(h.Since) && now.Before(h.Until())
}

// HoldFileName is the file, in the hold directory on the node, where a leaving speaker writes
// its hold for the speaker that replaces it (ReadHoldFile).
const HoldFileName = "l2-hold"

// Errors of ReadHoldFile, besides ErrMalformed and ErrTooLarge (and fs.ErrNotExist: no file).
var (
	// ErrOtherNode: the file names another node.
	ErrOtherNode = errors.New("hold file of another node")
	// ErrHoldEnded: the hold in the file ended, or was written in the future (the clock went
	// back).
	ErrHoldEnded = errors.New("hold file no longer valid")
)

// Hold file layout: 8 bytes big-endian, the time it was written in Unix nanoseconds; then one
// claims message with a hold (the wire format above), nothing after it.
const holdFileStamp = 8

// WriteHoldFile writes m, which must carry a hold, to dir/HoldFileName, stamped with now,
// atomically (a temporary file renamed over it): the speaker that replaces this one on the
// node resumes it (ReadHoldFile).
func WriteHoldFile(dir string, m Message, now time.Time) error {
	if m.Hold <= 0 {
		return fmt.Errorf("hold file: a message without a hold: %w", ErrMalformed)
	}
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("hold file: %w", err)
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, holdFileStamp+len(b)), uint64(max(now.UnixNano(), 0)))
	out = append(out, b...)
	f, err := os.CreateTemp(dir, HoldFileName+".*")
	if err != nil {
		return fmt.Errorf("hold file: %w", err)
	}
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, HoldFileName))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("hold file: %w", err)
	}
	return nil
}

// ReadHoldFile reads and removes dir/HoldFileName (it is used once, valid or not) and returns
// the hold it holds for node self, at most limit long. It refuses a file larger than a hold
// can be, one that does not parse exactly (Decode), that names another node, that carries no
// hold, or whose hold ended at now (or that was written after now).
func ReadHoldFile(dir, self string, now time.Time, limit time.Duration) (Held, error) {
	path := filepath.Join(dir, HoldFileName)
	f, err := os.Open(path)
	if err != nil {
		return Held{}, fmt.Errorf("hold file: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, holdFileStamp+MaxMessage+1))
	_ = f.Close()
	if rerr := os.Remove(path); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return Held{}, fmt.Errorf("hold file: %w", err)
	}
	if len(b) > holdFileStamp+MaxMessage {
		return Held{}, fmt.Errorf("hold file: over %d bytes: %w", holdFileStamp+MaxMessage, ErrTooLarge)
	}
	if len(b) < holdFileStamp {
		return Held{}, fmt.Errorf("hold file: %d bytes: %w", len(b), ErrMalformed)
	}
	stamp := binary.BigEndian.Uint64(b)
	m, err := Decode(b[holdFileStamp:])
	switch {
	case err != nil:
		return Held{}, fmt.Errorf("hold file: %w", err)
	case m.Hold <= 0:
		return Held{}, fmt.Errorf("hold file: no hold: %w", ErrMalformed)
	case m.Node != self:
		return Held{}, fmt.Errorf("hold file of %.64q, this node is %q: %w", m.Node, self, ErrOtherNode)
	case stamp > math.MaxInt64:
		return Held{}, fmt.Errorf("hold file: time stamp %d: %w", stamp, ErrMalformed)
	}
	h := Held{Node: m.Node, VIPs: m.VIPs, Since: time.Unix(0, int64(stamp)), For: min(m.Hold, max(limit, 0))}
	if !h.Valid(now) {
		return Held{}, fmt.Errorf("hold file: written at %v, for %v, now %v: %w", h.Since.UTC(), h.For, now.UTC(), ErrHoldEnded)
	}
	return h, nil
}
