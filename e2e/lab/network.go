package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// netnsExists reports whether the named network namespace exists.
func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

// namespaces lists every network namespace of the lab, bridge last.
func (c Config) namespaces() []string {
	var ns []string
	for _, h := range Hosts() {
		ns = append(ns, c.Namespace(h.Name))
	}
	return append(ns, c.bridgeNS())
}

// sysctlsBeforeLinks are set in every lab namespace before any link exists, because the
// "default" values are what new and moved-in devices inherit: no duplicate address detection
// (addresses are usable at once; an NDP responder can bind them) and no router advertisements.
var sysctlsBeforeLinks = []string{
	"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
	"net.ipv6.conf.all.dad_transmits=0", "net.ipv6.conf.default.dad_transmits=0",
	"net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0",
}

// netUp creates the namespaces, the segment and the user link. It expects none of them to
// exist (Up tears a broken lab down first).
func (c Config) netUp(ctx context.Context) error {
	for _, step := range []func(context.Context) error{c.namespacesUp, c.segmentUp, c.routesUp, addRootBlackholes, c.userLinkUp} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ipCmd runs ip with args.
func ipCmd(ctx context.Context, args ...string) error {
	_, err := run(ctx, append([]string{"ip"}, args...)...)
	return err
}

// inNS runs a command in the network namespace ns.
func inNS(ctx context.Context, ns string, args ...string) error {
	_, err := run(ctx, append([]string{"ip", "netns", "exec", ns}, args...)...)
	return err
}

// ipSteps runs ip once per entry of steps, in order; what names the failing step.
func ipSteps(ctx context.Context, what string, steps [][]string) error {
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// namespacesUp creates every namespace of the lab with the sysctls new links inherit and
// loopback up.
func (c Config) namespacesUp(ctx context.Context) error {
	for _, ns := range c.namespaces() {
		if err := ipCmd(ctx, "netns", "add", ns); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		if err := inNS(ctx, ns, append([]string{"sysctl", "-qw"}, sysctlsBeforeLinks...)...); err != nil {
			return fmt.Errorf("sysctls of %s: %w", ns, err)
		}
		if err := ipCmd(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	return nil
}

// segmentUp builds the one layer-2 segment: a bridge in its own namespace and every host's
// eth0 on it, with the host's MAC and addresses.
func (c Config) segmentUp(ctx context.Context) error {
	br := c.bridgeNS()
	// The bridge's namespace must not run bridged frames through its (empty) netfilter.
	if err := inNS(ctx, br, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0",
		"net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"); err != nil {
		return fmt.Errorf("bridge netfilter sysctls: %w", err)
	}
	if err := ipCmd(ctx, "-n", br, "link", "add", "br0", "type", "bridge", "stp_state", "0", "mcast_snooping", "0"); err != nil {
		return fmt.Errorf("create bridge: %w", err)
	}
	if err := ipCmd(ctx, "-n", br, "link", "set", "br0", "up"); err != nil {
		return err
	}
	for _, h := range Hosts() {
		ns := c.Namespace(h.Name)
		port := "v-" + h.Name
		if err := ipSteps(ctx, "attach "+h.Name, [][]string{
			{"-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", br, "link", "set", port, "master", "br0", "up"},
			{"-n", ns, "link", "set", "eth0", "address", h.MAC, "up"},
			{"-n", ns, "addr", "add", h.IPv4.String() + "/24", "dev", "eth0"},
			{"-n", ns, "addr", "add", h.IPv6.String() + "/64", "dev", "eth0", "nodad"},
		}); err != nil {
			return err
		}
	}
	return nil
}

// routesUp makes the pod ranges reachable: nodes forward for their pods and route to each
// other's; router and control plane reach every pod range directly; the client goes through
// the router (its default route), like a laptop.
func (c Config) routesUp(ctx context.Context) error {
	// Nodes: never answer ARP for an address that is not on the asking interface (VIPs) nor
	// use one as ARP source, or every node answers for every VIP.
	nodes := Nodes()
	for _, n := range nodes {
		ns := c.Namespace(n.Name)
		if err := inNS(ctx, ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
			"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"); err != nil {
			return fmt.Errorf("sysctls of %s: %w", n.Name, err)
		}
		for _, o := range nodes {
			if o.Name != n.Name {
				if err := c.podRoutes(ctx, ns, o); err != nil {
					return err
				}
			}
		}
		if err := c.defaultRoutesVia(ctx, ns, Router); err != nil {
			return err
		}
	}
	for _, h := range []Host{Router, ControlPlane} {
		for _, n := range nodes {
			if err := c.podRoutes(ctx, c.Namespace(h.Name), n); err != nil {
				return err
			}
		}
	}
	if err := inNS(ctx, c.Namespace(Router.Name), "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0"); err != nil {
		return fmt.Errorf("router sysctls: %w", err)
	}
	return c.defaultRoutesVia(ctx, c.Namespace(Client.Name), Router)
}

// podRoutes routes node n's pod ranges (both families) via n, in namespace ns.
func (c Config) podRoutes(ctx context.Context, ns string, n Node) error {
	if err := ipCmd(ctx, "-n", ns, "route", "add", n.PodCIDRv4.String(), "via", n.IPv4.String()); err != nil {
		return err
	}
	return ipCmd(ctx, "-n", ns, "-6", "route", "add", n.PodCIDRv6.String(), "via", n.IPv6.String())
}

// userLinkUp makes the user link: root namespace <-> control plane only. The control plane
// does not forward, so the root namespace reaches the API server and nothing else of the lab.
func (c Config) userLinkUp(ctx context.Context) error {
	cp := c.Namespace(ControlPlane.Name)
	if err := inNS(ctx, cp, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0"); err != nil {
		return err
	}
	return ipSteps(ctx, "user link", [][]string{
		{"link", "add", c.userLink(), "type", "veth", "peer", "name", "api0", "netns", cp},
		{"-n", cp, "addr", "add", c.UserAPIAddr().String() + "/64", "dev", "api0", "nodad"},
		{"-n", cp, "link", "set", "api0", "up"},
		{"addr", "add", c.userRootAddr().String() + "/64", "dev", c.userLink(), "nodad"},
		{"link", "set", c.userLink(), "up"},
	})
}

// rootBlackholes are the lab's ranges that the root namespace must never send anywhere: a
// developer who curls a VIP from the root namespace gets "no route" instead of a packet on the
// machine's uplink. Only the VIP pool: the documentation ranges the lab uses inside its
// namespaces are also used by this workplace's own infrastructure (the uplink is on
// 192.0.2.0/24, the Go module proxy and the Debian mirror answer on 203.0.113.80), so
// blackholing them in the root namespace would cut the machine off. addRootBlackholes also
// refuses a range that holds the default gateway or an address of the machine.
var rootBlackholes = []string{VIPPool.String()}

// legacyBlackholes were added by earlier versions of the lab; Down removes them too.
var legacyBlackholes = []string{SegmentV4.String(), "203.0.113.0/24", "203.0.113.0/25", "203.0.113.128/25", "2001:db8::/32"}

// blackholeMetric marks the lab's blackhole routes, so Down removes only its own.
const blackholeMetric = "4242"

// addRootBlackholes adds the blackhole routes; routes already there (another lab) are fine.
func addRootBlackholes(ctx context.Context) error {
	used, err := rootAddresses(ctx)
	if err != nil {
		return err
	}
	for _, r := range rootBlackholes {
		pfx := netip.MustParsePrefix(r)
		if slices.ContainsFunc(used, pfx.Contains) {
			return fmt.Errorf("the lab's range %s holds this machine's address or default gateway (%v): pick another range", r, used)
		}
		if _, err := run(ctx, "ip", "route", "add", "blackhole", r, "metric", blackholeMetric); err != nil && !strings.Contains(err.Error(), "File exists") {
			return fmt.Errorf("blackhole %s in the root namespace: %w", r, err)
		}
	}
	return nil
}

// removeRootBlackholes removes the blackhole routes unless another lab's user link is still
// there (its lab still needs them).
func (c Config) removeRootBlackholes(ctx context.Context) error {
	out, err := run(ctx, "ip", "-6", "-o", "addr", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] != c.userLink() && strings.HasPrefix(f[3], "2001:db8:ffff:") {
			return nil
		}
	}
	for _, r := range append(slices.Clone(rootBlackholes), legacyBlackholes...) {
		_, _ = run(ctx, "ip", "route", "del", "blackhole", r, "metric", blackholeMetric)
	}
	return nil
}

// rootAddresses are the root namespace's own addresses and default gateways.
func rootAddresses(ctx context.Context) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, args := range [][]string{{"-o", "addr", "show"}, {"route", "show", "default"}, {"-6", "route", "show", "default"}} {
		text, err := run(ctx, append([]string{"ip"}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(text) {
			if a, err := netip.ParsePrefix(f); err == nil {
				out = append(out, a.Addr())
			} else if a, err := netip.ParseAddr(f); err == nil {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func (c Config) defaultRoutesVia(ctx context.Context, ns string, gw Host) error {
	if _, err := run(ctx, "ip", "-n", ns, "route", "add", "default", "via", gw.IPv4.String()); err != nil {
		return err
	}
	_, err := run(ctx, "ip", "-n", ns, "-6", "route", "add", "default", "via", gw.IPv6.String())
	return err
}

// netDown deletes the lab's namespaces and the user link. Processes must be gone already.
func (c Config) netDown(ctx context.Context) error {
	var errs []string
	// The user link first: deleting the control plane's namespace deletes it too, but
	// asynchronously (the kernel cleans namespaces up in a work queue), so after `ip netns del`
	// it may still exist when checked and be gone when deleted ("Cannot find device").
	if _, err := os.Stat("/sys/class/net/" + c.userLink()); err == nil {
		if _, err := run(ctx, "ip", "link", "del", c.userLink()); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err.Error())
		}
	}
	for _, ns := range c.namespaces() {
		if !netnsExists(ns) {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := c.removeRootBlackholes(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete network: %s", strings.Join(errs, "; "))
	}
	return nil
}
