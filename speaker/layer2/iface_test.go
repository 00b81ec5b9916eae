package layer2

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelectInterfaces(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	ifaces := []Interface{
		{Name: "lo", Up: true, Loopback: true, Prefixes: []netip.Prefix{p("127.0.0.1/8"), p("::1/128")}},
		{Name: "eth0", Up: true, Prefixes: []netip.Prefix{p("10.0.0.5/24"), p("fe80::1/64")}},
		{Name: "eth1", Up: true, Prefixes: []netip.Prefix{p("198.51.100.5/24"), p("2001:db8::5/64"), p("fe80::2/64")}},
		{Name: "eth2", Up: true, BondSlave: true, Prefixes: []netip.Prefix{p("198.51.100.6/24")}},
		{Name: "tun0", Up: true, NoARP: true, Prefixes: []netip.Prefix{p("198.51.100.7/24")}},
		{Name: "eth3", Up: false, Prefixes: []netip.Prefix{p("198.51.100.8/24")}},
		{Name: "v6only", Up: true, Prefixes: []netip.Prefix{p("fe80::9/64")}},
	}
	nodeIP := []netip.Addr{a("10.0.0.5")}
	tests := []struct {
		name  string
		vip   string
		named []string
		want  []string
	}{
		{name: "on-subnet interface, skipping bond slave, NOARP and down links", vip: "198.51.100.10", want: []string{"eth1"}},
		{name: "IPv6 on-subnet", vip: "2001:db8::10", want: []string{"eth1"}},
		{name: "off-subnet falls back to the node IP's interface", vip: "203.0.113.1", want: []string{"eth0"}},
		{name: "off-subnet IPv6 falls back to the node IP's interface", vip: "2001:db8:1::1", want: []string{"eth0"}},
		{name: "named interfaces win over subnets", vip: "198.51.100.10", named: []string{"eth0", "v6only"}, want: []string{"eth0"}},
		{name: "named IPv6 may use an interface without IPv4", vip: "2001:db8::10", named: []string{"eth0", "v6only"}, want: []string{"eth0", "v6only"}},
		{name: "named but unusable", vip: "198.51.100.10", named: []string{"eth2", "tun0", "eth3", "missing"}},
		{name: "loopback never", vip: "127.0.0.2", named: []string{"lo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SelectInterfaces(ifaces, a(tc.vip), tc.named, nodeIP)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SelectInterfaces (-want +got):\n%s", diff)
			}
		})
	}
}
