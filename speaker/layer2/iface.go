package layer2

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Interface is a network interface as interface selection sees it.
type Interface struct {
	Name string
	// Up is true when the link is administratively up.
	Up bool
	// NoARP is true for links flagged IFF_NOARP (tunnels, some virtual links): no neighbours.
	NoARP bool
	// BondSlave is true for links enslaved to a bond: the bond answers, not its members.
	BondSlave bool
	// Loopback is true for lo.
	Loopback bool
	// Prefixes are the addresses configured on the link with their subnet.
	Prefixes []netip.Prefix
}

// usable reports whether a responder may run on the interface.
func (i Interface) usable() bool { return i.Up && !i.NoARP && !i.BondSlave && !i.Loopback }

// SelectInterfaces returns the names of the interfaces on which vip is announced, sorted:
//
//   - named non-empty (the L2Advertisement lists interfaces): the named interfaces that exist and
//     are usable (up, ARP-capable, not a bond slave, not loopback).
//   - otherwise, the usable interfaces holding an address whose subnet contains vip;
//   - if there is none, the usable interfaces holding one of nodeIPs (the node's InternalIPs), so
//     an address from a subnet routed to the LAN is still announced where the node lives.
//
// An IPv4 VIP additionally needs an IPv4 address on the interface (the ARP socket needs a sender
// address); an IPv6 VIP needs nothing more (the NDP socket uses the link-local address).
func SelectInterfaces(ifaces []Interface, vip netip.Addr, named []string, nodeIPs []netip.Addr) []string {
	vip = vip.Unmap()
	ok := func(i Interface) bool {
		if !i.usable() {
			return false
		}
		if vip.Is4() {
			return slices.ContainsFunc(i.Prefixes, func(p netip.Prefix) bool { return p.Addr().Is4() })
		}
		return true
	}
	var out []string
	if len(named) > 0 {
		for _, i := range ifaces {
			if slices.Contains(named, i.Name) && ok(i) {
				out = append(out, i.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, i := range ifaces {
		if ok(i) && slices.ContainsFunc(i.Prefixes, func(p netip.Prefix) bool { return p.Contains(vip) }) {
			out = append(out, i.Name)
		}
	}
	if len(out) == 0 {
		for _, i := range ifaces {
			if ok(i) && slices.ContainsFunc(i.Prefixes, func(p netip.Prefix) bool { return slices.Contains(nodeIPs, p.Addr().Unmap()) }) {
				out = append(out, i.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// iffNoARP is IFF_NOARP from <linux/if.h>.
const iffNoARP = 0x80

// SystemInterfaces lists the host's interfaces with what SelectInterfaces needs; bond slaves and
// NOARP come from /sys/class/net.
func SystemInterfaces() ([]Interface, error) {
	ifis, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifis))
	for _, ifi := range ifis {
		i := Interface{
			Name:     ifi.Name,
			Up:       ifi.Flags&net.FlagUp != 0,
			Loopback: ifi.Flags&net.FlagLoopback != 0,
		}
		sys := filepath.Join("/sys/class/net", ifi.Name)
		if _, err := os.Stat(filepath.Join(sys, "bonding_slave")); err == nil {
			i.BondSlave = true
		}
		if b, err := os.ReadFile(filepath.Join(sys, "flags")); err == nil {
			if f, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32); err == nil {
				i.NoARP = f&iffNoARP != 0
			}
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ip, _ := netip.AddrFromSlice(n.IP)
				ones, _ := n.Mask.Size()
				i.Prefixes = append(i.Prefixes, netip.PrefixFrom(ip.Unmap(), ones))
			}
		}
		out = append(out, i)
	}
	return out, nil
}
