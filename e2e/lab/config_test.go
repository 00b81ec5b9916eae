package lab

import (
	"net/netip"
	"strings"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		prefix   string
		portBase string
		wantErr  string
	}{
		{name: "default prefix", prefix: "mg-"},
		{name: "no dash", prefix: "t2"},
		{name: "explicit port base", prefix: "t3-", portBase: "30000"},
		{name: "upper case", prefix: "MG-", wantErr: "LAB_PREFIX"},
		{name: "too long for link names", prefix: "abcdefghij-", wantErr: "LAB_PREFIX"},
		{name: "port base too low", prefix: "t4-", portBase: "80", wantErr: "LAB_PORT_BASE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPrefix, tc.prefix)
			t.Setenv(EnvPortBase, tc.portBase)
			t.Setenv(EnvDir, "") // make exports LAB_DIR; this test is about the default
			c, err := ConfigFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one about %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(c.Dir, "/_out/lab-"+tc.prefix) {
				t.Errorf("Dir = %s, want …/_out/lab-%s", c.Dir, tc.prefix)
			}
			if c.PortBase < 20000 || c.PortBase >= 60000 {
				t.Errorf("PortBase = %d out of range", c.PortBase)
			}
			if tc.portBase == "30000" && c.PortBase != 30000 {
				t.Errorf("PortBase = %d, want 30000", c.PortBase)
			}
			// Every root-namespace name fits the 15-byte interface name limit.
			if n := len(c.userLink()); n > 15 {
				t.Errorf("user link %q is %d bytes", c.userLink(), n)
			}
			if !netip.MustParsePrefix("2001:db8:ffff::/48").Contains(c.UserAPIAddr()) {
				t.Errorf("user API address %s outside 2001:db8:ffff::/48", c.UserAPIAddr())
			}
		})
	}
}

func TestPortBaseDiffersByPrefix(t *testing.T) {
	t.Setenv(EnvPortBase, "")
	bases := map[int]string{}
	for _, p := range []string{"mg-", "t2-", "t3-", "ci-", "a"} {
		t.Setenv(EnvPrefix, p)
		c, err := ConfigFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := bases[c.PortBase]; ok {
			t.Errorf("prefixes %q and %q share port base %d", p, other, c.PortBase)
		}
		bases[c.PortBase] = p
	}
}

func TestAddressPlan(t *testing.T) {
	seen := map[netip.Addr]string{}
	for _, h := range Hosts() {
		for _, a := range []netip.Addr{h.IPv4, h.IPv6} {
			if !SegmentV4.Contains(a) && !SegmentV6.Contains(a) {
				t.Errorf("%s: %s outside the segment", h.Name, a)
			}
			if other, ok := seen[a]; ok {
				t.Errorf("%s and %s share %s", h.Name, other, a)
			}
			seen[a] = h.Name
		}
	}
	nodes := Nodes()
	if len(nodes) != NodeCount {
		t.Fatalf("%d nodes, want %d", len(nodes), NodeCount)
	}
	for i, n := range nodes {
		if !PodCIDRv4.Contains(n.PodCIDRv4.Addr()) || n.PodCIDRv4.Bits() != 27 || ServiceCIDRv4.Overlaps(n.PodCIDRv4) || !PodCIDRv6.Contains(n.PodCIDRv6.Addr()) {
			t.Errorf("%s: pod ranges %s %s outside %s %s", n.Name, n.PodCIDRv4, n.PodCIDRv6, PodCIDRv4, PodCIDRv6)
		}
		for _, o := range nodes[i+1:] {
			if n.PodCIDRv4.Overlaps(o.PodCIDRv4) || n.PodCIDRv6.Overlaps(o.PodCIDRv6) {
				t.Errorf("%s and %s pod ranges overlap", n.Name, o.Name)
			}
		}
	}
	if nodes[2].ProxyMode != "nftables" || nodes[0].ProxyMode != "iptables" {
		t.Errorf("proxy modes %s/%s/%s, want iptables/iptables/nftables", nodes[0].ProxyMode, nodes[1].ProxyMode, nodes[2].ProxyMode)
	}
	if n1, _ := NodeByName("n1"); n1.MAC != "02:00:00:00:00:0b" || n1.IPv6.String() != "2001:db8::11" {
		t.Errorf("n1 = %+v", n1)
	}
	if _, err := NodeByName("n9"); err == nil {
		t.Error("NodeByName(n9) found a node")
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:            "/a/b",
		`/a\040b`:         "/a b",
		`/x\011y\134z`:    "/x\ty\\z",
		`/trailing\04`:    `/trailing\04`,
		`/run/netns/mg-1`: "/run/netns/mg-1",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
