package table

import (
	"bufio"
	"crypto/md5"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// MaxBcryptCost is the highest bcrypt cost an htpasswd Secret may use. Each step doubles the
// work of one check: cost 12 is a few hundred ms of one core, cost 31 would be days. A Secret
// with a higher cost is refused (every request to its routes gets 401 and a Problem names the
// Secret), so that one tenant cannot make a single wrong password cost the proxy minutes.
const MaxBcryptCost = 12

// ParseHtpasswd reads htpasswd lines ("user:hash"; blank lines and # comments skipped) and
// returns the users with a hash metalgate can check: bcrypt ($2a$, $2b$, $2y$), Apache's
// MD5 ($apr1$, htpasswd's default) and {SHA}. Others (crypt(3), plain text) are errors:
// they are either unsafe or cannot be checked here, and a user must not be let in or shut
// out without being told.
func ParseHtpasswd(text string) (map[string]string, error) {
	users := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("line %d: want user:hash", n)
		}
		if err := checkableHash(hash); err != nil {
			return nil, fmt.Errorf("line %d, user %q: %w", n, user, err)
		}
		users[user] = hash
	}
	return users, sc.Err()
}

func checkableHash(h string) error {
	switch {
	case strings.HasPrefix(h, "$2a$"), strings.HasPrefix(h, "$2b$"), strings.HasPrefix(h, "$2y$"):
		cost, err := bcrypt.Cost([]byte(h))
		if err != nil {
			return fmt.Errorf("bcrypt hash: %w", err)
		}
		if cost > MaxBcryptCost {
			return fmt.Errorf("bcrypt cost %d is over %d, the most the proxy checks (rehash with htpasswd -B -C %d or less)", cost, MaxBcryptCost, MaxBcryptCost)
		}
		return nil
	case strings.HasPrefix(h, "$apr1$"):
		if parts := strings.Split(h, "$"); len(parts) != 4 || len(parts[3]) != 22 {
			return fmt.Errorf("$apr1$ hash: want $apr1$salt$22 characters")
		}
		return nil
	case strings.HasPrefix(h, "{SHA}"):
		if b, err := base64.StdEncoding.DecodeString(h[5:]); err != nil || len(b) != sha1.Size {
			return fmt.Errorf("{SHA} hash: want base64 of 20 bytes")
		}
		return nil
	}
	return fmt.Errorf("hash type not supported (use bcrypt: htpasswd -B)")
}

// DecoyHash returns the hash that a user the Secret does not know is checked against: the
// most expensive of users (the highest bcrypt cost; bcrypt before $apr1$ before {SHA}), the
// first user name in order among equals. An unknown user then costs what a known one with a
// wrong password costs, and the answer's time tells no one which users exist. "" for none.
func DecoyHash(users map[string]string) string {
	rank := func(h string) int {
		switch {
		case strings.HasPrefix(h, "$2"):
			c, _ := bcrypt.Cost([]byte(h))
			return 2 + c
		case strings.HasPrefix(h, "$apr1$"):
			return 1
		}
		return 0
	}
	best, bestUser, bestRank := "", "", -1
	for u, h := range users {
		if r := rank(h); r > bestRank || r == bestRank && u < bestUser {
			best, bestUser, bestRank = h, u, r
		}
	}
	return best
}

// CheckPassword reports whether password matches an htpasswd hash of ParseHtpasswd's kinds.
func CheckPassword(hash, password string) bool {
	switch {
	case strings.HasPrefix(hash, "$2"):
		return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
	case strings.HasPrefix(hash, "$apr1$"):
		parts := strings.Split(hash, "$")
		if len(parts) != 4 {
			return false
		}
		return subtle.ConstantTimeCompare([]byte(apr1(password, parts[2])), []byte(hash)) == 1
	case strings.HasPrefix(hash, "{SHA}"):
		sum := sha1.Sum([]byte(password))
		return subtle.ConstantTimeCompare([]byte(base64.StdEncoding.EncodeToString(sum[:])), []byte(hash[5:])) == 1
	}
	return false
}

// apr1 is Apache's MD5-based crypt ("$apr1$salt$hash"), as htpasswd -m writes it: Poul-Henning
// Kamp's md5crypt with the magic "$apr1$" and 1000 rounds.
func apr1(password, salt string) string {
	const magic = "$apr1$"
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw := []byte(password)
	alt := md5.New()
	alt.Write(pw)
	alt.Write([]byte(salt))
	alt.Write(pw)
	altSum := alt.Sum(nil)

	ctx := md5.New()
	ctx.Write(pw)
	ctx.Write([]byte(magic))
	ctx.Write([]byte(salt))
	for n := len(pw); n > 0; n -= 16 {
		ctx.Write(altSum[:min(n, 16)])
	}
	for i := len(pw); i > 0; i >>= 1 {
		if i&1 != 0 {
			ctx.Write([]byte{0})
		} else {
			ctx.Write(pw[:1])
		}
	}
	sum := ctx.Sum(nil)
	for i := 0; i < 1000; i++ {
		r := md5.New()
		if i&1 != 0 {
			r.Write(pw)
		} else {
			r.Write(sum)
		}
		if i%3 != 0 {
			r.Write([]byte(salt))
		}
		if i%7 != 0 {
			r.Write(pw)
		}
		if i&1 != 0 {
			r.Write(sum)
		} else {
			r.Write(pw)
		}
		sum = r.Sum(nil)
	}
	const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var out strings.Builder
	enc := func(a, b, c byte, n int) {
		v := uint(a)<<16 | uint(b)<<8 | uint(c)
		for ; n > 0; n-- {
			out.WriteByte(itoa64[v&0x3f])
			v >>= 6
		}
	}
	enc(sum[0], sum[6], sum[12], 4)
	enc(sum[1], sum[7], sum[13], 4)
	enc(sum[2], sum[8], sum[14], 4)
	enc(sum[3], sum[9], sum[15], 4)
	enc(sum[4], sum[10], sum[5], 4)
	enc(0, 0, sum[11], 2)
	return magic + salt + "$" + out.String()
}
