package table

import (
	"strings"
	"testing"
)

// TestCheckPassword: vectors from `openssl passwd -apr1`, `htpasswd -B` and `htpasswd -s`.
func TestCheckPassword(t *testing.T) {
	for _, tc := range []struct {
		hash, password string
		want           bool
	}{
		{"$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/", "myPassword", true},
		{"$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/", "mypassword", false},
		{"$apr1$ZjTqBB3f$2.BfTiOa5fOow8Viq2nNX0", "open sesame", true},
		{"$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0", "", true},
		{"$apr1$12345678$7doNvcOiE9lPjxfe2.NA1/", "a very long password that is longer than sixteen bytes", true},
		{"$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm", "secret1", true},
		{"$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm", "secret2", false},
		{"{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A=", "secret2", true},
		{"{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A=", "secret1", false},
		{"plaintext", "plaintext", false},
	} {
		if got := CheckPassword(tc.hash, tc.password); got != tc.want {
			t.Errorf("CheckPassword(%q, %q) = %v, want %v", tc.hash, tc.password, got, tc.want)
		}
	}
}

func TestParseHtpasswd(t *testing.T) {
	if _, err := ParseHtpasswd("max:$2y$12$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"); err != nil {
		t.Errorf("cost 12, the cap, refused: %v", err)
	}
	users, err := ParseHtpasswd("# users\nalice:$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm\n\nbob:{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A=\ncarol:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n")
	if err != nil || len(users) != 3 {
		t.Fatalf("users %v, %v", users, err)
	}
	for _, tc := range []struct{ text, wantErr string }{
		{"dave:plaintext", `line 1, user "dave": hash type not supported`},
		{"erin:abJ0L9pQ5xk6.", "hash type not supported"}, // crypt(3)
		{"nocolon", "line 1: want user:hash"},
		{"frank:$apr1$short$x", "$apr1$ hash"},
		{"gina:{SHA}notbase64!", "{SHA} hash"},
		// Over the cost cap: one wrong password would cost seconds (13) to days (31).
		{"hal:$2y$13$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm", `user "hal": bcrypt cost 13 is over 12`},
		{"ivy:$2b$31$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm", "bcrypt cost 31 is over 12"},
	} {
		if _, err := ParseHtpasswd(tc.text); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseHtpasswd(%q): %v, want %q", tc.text, err, tc.wantErr)
		}
	}
}

// TestDecoyHash: a user the Secret does not know is checked against its most expensive hash,
// the same one whatever the map's order.
func TestDecoyHash(t *testing.T) {
	const (
		b5  = "$2y$05$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"
		b12 = "$2y$12$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"
		apr = "$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/"
		sha = "{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A="
	)
	for _, tc := range []struct {
		name  string
		users map[string]string
		want  string
	}{
		{"none", map[string]string{}, ""},
		{"one", map[string]string{"a": sha}, sha},
		{"highest bcrypt cost", map[string]string{"a": b5, "b": b12, "c": apr, "d": sha}, b12},
		{"bcrypt over apr1", map[string]string{"a": apr, "b": b5}, b5},
		{"apr1 over SHA", map[string]string{"a": sha, "b": apr}, apr},
		{"first name among equals", map[string]string{"z": b5, "a": b5[:len(b5)-1] + "a"}, b5[:len(b5)-1] + "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // map order varies between runs
				if got := DecoyHash(tc.users); got != tc.want {
					t.Fatalf("DecoyHash = %q, want %q", got, tc.want)
				}
			}
		})
	}
}
