package allocator

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// u128 is an unsigned 128-bit integer: an IPv6 address, an IPv4 address (in lo), or an
// offset inside a range.
type u128 struct{ hi, lo uint64 }

var u128Max = u128{math.MaxUint64, math.MaxUint64}

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

func (x u128) cmp(y u128) int {
	switch {
	case x.less(y):
		return -1
	case y.less(x):
		return 1
	}
	return 0
}

// add returns x+y and whether it overflowed.
func (x u128) add(y u128) (u128, bool) {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c2 := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}, c2 != 0
}

// sub returns x-y, wrapping.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

func (x u128) inc() u128 { r, _ := x.add(u128{0, 1}); return r }
func (x u128) dec() u128 { return x.sub(u128{0, 1}) }

// satInt64 converts x to int64, saturating at math.MaxInt64.
func (x u128) satInt64() int64 {
	if x.hi != 0 || x.lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(x.lo)
}

// Family index used for per-family arrays: 0 for IPv4, 1 for IPv6.
const (
	fi4 = 0
	fi6 = 1
)

func famIndex(a netip.Addr) int {
	if a.Is4() {
		return fi4
	}
	return fi6
}

func familyOfIndex(fi int) Family {
	if fi == fi4 {
		return IPv4
	}
	return IPv6
}

func (f Family) index() int {
	if f == IPv4 {
		return fi4
	}
	return fi6
}

// addrBits returns the family index of a (which must be canonical: valid, unmapped, no
// zone) and its value.
func addrBits(a netip.Addr) (int, u128) {
	if a.Is4() {
		b := a.As4()
		return fi4, u128{0, uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return fi6, u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// bitsAddr is the inverse of addrBits.
func bitsAddr(fi int, x u128) netip.Addr {
	if fi == fi4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(x.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return netip.AddrFrom16(b)
}

// canonical returns a in the form the allocator stores: IPv4-mapped IPv6 addresses become
// IPv4; zones and the zero Addr are rejected.
func canonical(a netip.Addr) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, errorf(ErrInvalidAddress, "empty (zero) address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, errorf(ErrInvalidAddress, "address %s has an IPv6 zone; LoadBalancer addresses cannot have zones", a)
	}
	return a.Unmap(), nil
}

// The IPv4-mapped IPv6 block ::ffff:0:0/96. IPv6 ranges may not intersect it, because its
// addresses are treated as (unmapped to) IPv4.
var (
	mappedFirst = u128{0, 0x0000ffff00000000}
	mappedLast  = u128{0, 0x0000ffffffffffff}
)

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// String formats r as "first-last".
func (r Range) String() string { return r.First.String() + "-" + r.Last.String() }

// rangeErr is a ParseRange failure; reason does not repeat the input.
func rangeErr(input, reason string) error {
	return errorf(ErrInvalidAddress, "address entry %q: %s", input, reason)
}

// ParseRange parses one pool address entry into an inclusive range. An entry is either a
// CIDR ("192.0.2.0/24", "2001:db8::/64") or a range "start-end" ("192.0.2.10-192.0.2.20";
// spaces around '-', around '/' and at both ends are ignored). A CIDR with host bits set
// ("10.0.0.1/8") is accepted and masked to its network (10.0.0.0/8), like MetalLB. A bare
// address is rejected: write it as a /32 (/128) or as "a-a". IPv4-mapped IPv6 input
// ("::ffff:1.2.3.4/128", "::ffff:1.2.3.4-::ffff:1.2.3.9") is converted to IPv4; an IPv6 range
// that only partly covers ::ffff:0:0/96 is rejected. Zones are rejected. The returned
// error wraps ErrInvalidAddress.
func ParseRange(s string) (Range, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return Range{}, rangeErr(s, "empty; want a CIDR (192.0.2.0/24) or a range (192.0.2.10-192.0.2.20)")
	case strings.Contains(t, "/"):
		return parseCIDR(s, t)
	case strings.Contains(t, "-"):
		return parseDashRange(s, t)
	}
	if a, err := netip.ParseAddr(t); err == nil {
		bitsLen := 32
		if !a.Unmap().Is4() {
			bitsLen = 128
		}
		return Range{}, rangeErr(s, "a single address is not accepted; write it as a CIDR ("+
			a.Unmap().WithZone("").String()+"/"+strconv.Itoa(bitsLen)+") or a range (start-end)")
	}
	return Range{}, rangeErr(s, "not a CIDR (192.0.2.0/24) or a range (192.0.2.10-192.0.2.20)")
}

func parseCIDR(s, t string) (Range, error) {
	parts := strings.Split(t, "/")
	if len(parts) != 2 {
		return Range{}, rangeErr(s, "a CIDR has exactly one '/'")
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(parts[0]) + "/" + strings.TrimSpace(parts[1]))
	if err != nil {
		return Range{}, rangeErr(s, "bad CIDR: "+err.Error())
	}
	p = p.Masked()
	if p.Addr().Is4In6() {
		// Masking never yields a mapped address with fewer than 96 bits.
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	fi, first := addrBits(p.Addr())
	width := 32
	if fi == fi6 {
		width = 128
	}
	host := width - p.Bits() // number of host bits
	var mask u128
	switch {
	case host >= 128:
		mask = u128Max
	case host >= 64:
		mask = u128{1<<(host-64) - 1, math.MaxUint64}
	default:
		mask = u128{0, 1<<host - 1}
	}
	last := u128{first.hi | mask.hi, first.lo | mask.lo}
	return finishRange(s, fi, first, last)
}

func parseDashRange(s, t string) (Range, error) {
	parts := strings.Split(t, "-")
	if len(parts) != 2 {
		return Range{}, rangeErr(s, "a range has exactly one '-' (start-end)")
	}
	var ends [2]netip.Addr
	for i, part := range parts {
		part = strings.TrimSpace(part)
		a, err := netip.ParseAddr(part)
		if err != nil {
			return Range{}, rangeErr(s, "bad range: "+err.Error())
		}
		if a.Zone() != "" {
			return Range{}, rangeErr(s, "IPv6 zones are not allowed")
		}
		ends[i] = a.Unmap()
	}
	if ends[0].Is4() != ends[1].Is4() {
		return Range{}, rangeErr(s, "start and end are of different address families (IPv4 and IPv6)")
	}
	if ends[1].Less(ends[0]) {
		return Range{}, rangeErr(s, "start "+ends[0].String()+" is after end "+ends[1].String())
	}
	fi, first := addrBits(ends[0])
	_, last := addrBits(ends[1])
	return finishRange(s, fi, first, last)
}

func finishRange(s string, fi int, first, last u128) (Range, error) {
	if fi == fi6 && !last.less(mappedFirst) && !mappedLast.less(first) {
		return Range{}, rangeErr(s, "IPv6 range intersects the IPv4-mapped block ::ffff:0:0/96; write IPv4 addresses in IPv4 form")
	}
	return Range{First: bitsAddr(fi, first), Last: bitsAddr(fi, last)}, nil
}
