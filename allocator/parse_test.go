package allocator

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func rng(first, last string) Range {
	return Range{First: netip.MustParseAddr(first), Last: netip.MustParseAddr(last)}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    Range
		wantMsg string // non-empty: an error wrapping ErrInvalidAddress containing this
	}{
		{desc: "IPv4 /32", in: "1.2.3.4/32", want: rng("1.2.3.4", "1.2.3.4")},
		{desc: "IPv4 /24", in: "192.0.2.0/24", want: rng("192.0.2.0", "192.0.2.255")},
		{desc: "IPv4 /0", in: "0.0.0.0/0", want: rng("0.0.0.0", "255.255.255.255")},
		{desc: "host bits set are masked to the network", in: "10.0.0.1/8", want: rng("10.0.0.0", "10.255.255.255")},
		{desc: "IPv6 /64", in: "2001:db8::/64", want: rng("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff")},
		{desc: "IPv6 /128", in: "2001:db8::7/128", want: rng("2001:db8::7", "2001:db8::7")},
		{desc: "IPv6 /48 host bits masked", in: "2001:db8:1:2::5/48", want: rng("2001:db8:1::", "2001:db8:1:ffff:ffff:ffff:ffff:ffff")},
		{desc: "IPv6 /8 (mask crosses 64 bits)", in: "2000::/8", want: rng("2000::", "20ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")},
		{desc: "IPv4-mapped /128 becomes IPv4 /32", in: "::ffff:1.2.3.4/128", want: rng("1.2.3.4", "1.2.3.4")},
		{desc: "IPv4-mapped /120 becomes IPv4 /24", in: "::ffff:1.2.3.0/120", want: rng("1.2.3.0", "1.2.3.255")},
		{desc: "IPv4 range", in: "192.0.2.10-192.0.2.20", want: rng("192.0.2.10", "192.0.2.20")},
		{desc: "range with spaces", in: "  192.0.2.10 - 192.0.2.20 ", want: rng("192.0.2.10", "192.0.2.20")},
		{desc: "one-address range", in: "192.0.2.10-192.0.2.10", want: rng("192.0.2.10", "192.0.2.10")},
		{desc: "IPv6 range", in: "2001:db8::1-2001:db8::ff", want: rng("2001:db8::1", "2001:db8::ff")},
		{desc: "IPv4-mapped range becomes IPv4", in: "::ffff:10.0.0.1-::ffff:10.0.0.9", want: rng("10.0.0.1", "10.0.0.9")},
		{desc: "CIDR with whitespace", in: "\t10.0.0.0 / 30\n", want: rng("10.0.0.0", "10.0.0.3")},

		{desc: "bare IPv4 address", in: "1.2.3.4", wantMsg: "write it as a CIDR (1.2.3.4/32) or a range"},
		{desc: "bare IPv6 address", in: "2001:db8::1", wantMsg: "(2001:db8::1/128)"},
		{desc: "start after end", in: "1.2.3.5-1.2.3.4", wantMsg: "start 1.2.3.5 is after end 1.2.3.4"},
		{desc: "mixed families", in: "1.2.3.4-2001:db8::1", wantMsg: "different address families"},
		{desc: "empty", in: "   ", wantMsg: "empty"},
		{desc: "garbage", in: "pool", wantMsg: "not a CIDR"},
		{desc: "bad prefix length", in: "10.0.0.0/33", wantMsg: "bad CIDR"},
		{desc: "two slashes", in: "10.0.0.0/8/8", wantMsg: "exactly one '/'"},
		{desc: "two dashes", in: "10.0.0.1-10.0.0.2-10.0.0.3", wantMsg: "exactly one '-'"},
		{desc: "zone in range", in: "fe80::1%eth0-fe80::2", wantMsg: "zones are not allowed"},
		{desc: "zone in CIDR", in: "fe80::1%eth0/64", wantMsg: "bad CIDR"},
		{desc: "half range", in: "10.0.0.1-", wantMsg: "bad range"},
		{desc: "IPv6 prefix containing the mapped block", in: "::/64", wantMsg: "IPv4-mapped block"},
		{desc: "IPv6 range reaching into the mapped block", in: "::fffe:ffff:ffff-::ffff:0:5", wantMsg: "different address families"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseRange(tc.in)
			if tc.wantMsg != "" {
				if !errors.Is(err, ErrInvalidAddress) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("ParseRange(%q) = %v, %v; want error wrapping ErrInvalidAddress containing %q", tc.in, got, err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRange(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("ParseRange(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4/32", "1.2.3.4", "1.2.3.5-1.2.3.4", "1.2.3.4-2001:db8::1", "10.0.0.1/8",
		"::ffff:1.2.3.4/128", "2001:db8::/64", " 192.0.2.10 - 192.0.2.20 ", "::/0", "fe80::1%x/64",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidAddress) {
				t.Fatalf("ParseRange(%q) error %v does not wrap ErrInvalidAddress", s, err)
			}
			return
		}
		if !r.First.IsValid() || !r.Last.IsValid() || r.First.Zone() != "" || r.Last.Zone() != "" {
			t.Fatalf("ParseRange(%q) = %v: invalid or zoned bound", s, r)
		}
		if r.First.Is4In6() || r.Last.Is4In6() || r.First.Is4() != r.Last.Is4() {
			t.Fatalf("ParseRange(%q) = %v: not canonical or mixed families", s, r)
		}
		if r.Last.Less(r.First) {
			t.Fatalf("ParseRange(%q) = %v: first after last", s, r)
		}
		// The canonical "first-last" form parses back to the same range.
		again, err := ParseRange(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseRange(%q) = %v, but ParseRange(%q) = %v, %v", s, r, r.String(), again, err)
		}
	})
}
