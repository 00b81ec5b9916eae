package membership

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Key file names in a key directory (the speaker's mount of the Secret metalgate-memberlist,
// docs/speaker.md "Trust"): KeyFile is the primary key, with which this speaker encrypts and
// signs; every file named KeyFile + "-" + anything is an additional key accepted from others
// (key rotation).
const (
	KeyFile       = "key"
	KeyFilePrefix = KeyFile + "-"
)

// MinKeySize is the shortest key accepted (the same floor as internal/secretkey).
const MinKeySize = 16

// ErrNoKey is returned when the key directory has no primary key.
var ErrNoKey = errors.New("no memberlist key")

// Keys are the shared secrets of the speaker cluster, as written in the Secret: any bytes of
// at least MinKeySize (the controller writes 32 random bytes; a person may paste
// `openssl rand -base64 32`). The keys used on the wire are derived from them (see derive), so
// their length does not matter to AES.
type Keys struct {
	// Primary encrypts and signs what this speaker sends. Required.
	Primary []byte
	// Others are accepted from peers besides Primary, sorted by file name.
	Others [][]byte
}

// validate checks every key's length.
func (k Keys) validate() error {
	if len(k.Primary) == 0 {
		return ErrNoKey
	}
	for i, key := range append([][]byte{k.Primary}, k.Others...) {
		if len(key) < MinKeySize {
			return fmt.Errorf("memberlist key %d has %d bytes, want at least %d", i, len(key), MinKeySize)
		}
	}
	return nil
}

// Equal reports whether k and o hold the same keys in the same roles.
func (k Keys) Equal(o Keys) bool {
	return bytes.Equal(k.Primary, o.Primary) && slices.EqualFunc(k.Others, o.Others, bytes.Equal)
}

// ReadKeyDir reads the keys of a directory: the file KeyFile (primary, required) and every
// file KeyFilePrefix* (others). Names starting with ".." (the kubelet's bookkeeping in a Secret
// volume) are skipped. Contents are used as they are, including any trailing newline: every
// speaker reads the same bytes.
func ReadKeyDir(dir string) (Keys, error) {
	var k Keys
	ents, err := os.ReadDir(dir)
	if err != nil {
		return k, fmt.Errorf("read memberlist key directory: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "..") || (name != KeyFile && !strings.HasPrefix(name, KeyFilePrefix)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return k, fmt.Errorf("read memberlist key: %w", err)
		}
		if name == KeyFile {
			k.Primary = b
		} else {
			k.Others = append(k.Others, b) // ReadDir sorts by name
		}
	}
	if len(k.Primary) == 0 {
		return k, fmt.Errorf("%s: %w (want a file %q, from the Secret's data key %q)", dir, ErrNoKey, KeyFile, KeyFile)
	}
	// The same key under two names is one key.
	k.Others = slices.DeleteFunc(k.Others, func(o []byte) bool { return bytes.Equal(o, k.Primary) })
	if err := k.validate(); err != nil {
		return k, fmt.Errorf("%s: %w", dir, err)
	}
	return k, nil
}

// Derived keys: one purpose each, so that the memberlist (AES-GCM) key and the quorum ping
// (HMAC-SHA256) key never coincide, whatever the Secret holds.
const (
	labelMemberlist = "metalgate/speaker/memberlist/v1"
	labelPing       = "metalgate/speaker/quorum-ping/v1"
)

func derive(secret []byte, label string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	return h.Sum(nil)
}

// derivedKeys are the wire keys of a Keys, primary first.
type derivedKeys struct {
	memberlist [][]byte // AES-256 keys for memberlist's keyring
	ping       [][]byte // HMAC-SHA256 keys of the quorum pings
}

func deriveAll(k Keys) derivedKeys {
	var d derivedKeys
	for _, s := range append([][]byte{k.Primary}, k.Others...) {
		d.memberlist = append(d.memberlist, derive(s, labelMemberlist))
		d.ping = append(d.ping, derive(s, labelPing))
	}
	return d
}

// Fingerprint names a key in logs and metrics without revealing it: the first 8 hex digits of
// SHA-256 of its memberlist wire key.
func Fingerprint(secret []byte) string {
	sum := sha256.Sum256(derive(secret, labelMemberlist))
	return hex.EncodeToString(sum[:4])
}
