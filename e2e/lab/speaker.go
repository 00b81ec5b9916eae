package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TestSpeaker is a short-lived FRR bgpd in a node's namespace that peers with the router:
// proof that the router accepts a node's session, without metalgate's speaker.
type TestSpeaker struct {
	lab  *Lab
	node Node
	d    daemon
}

// StartTestSpeaker starts bgpd (no zebra, no listening socket) in a node's namespace with AS
// NodeASN, dialling the router and announcing the given prefixes. Stop it with Stop.
func (l *Lab) StartTestSpeaker(ctx context.Context, node string, announce ...netip.Prefix) (*TestSpeaker, error) {
	n, err := NodeByName(node)
	if err != nil {
		return nil, err
	}
	// Below the router's FRR dir, which user frr can reach (see frrDir).
	dir := filepath.Join(l.frrDir(), "speaker-"+n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("test speaker: %w", err)
	}
	uid, gid, err := frrUser()
	if err != nil {
		return nil, err
	}
	var nets strings.Builder
	for _, p := range announce {
		fmt.Fprintf(&nets, "  network %s\n", p)
	}
	conf := fmt.Sprintf(`hostname %[1]s-test-speaker
router bgp %[2]d
 bgp router-id %[3]s
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor %[4]s remote-as %[5]d
 neighbor %[4]s timers 3 9
 neighbor %[4]s timers connect 1
 address-family ipv4 unicast
%[6]s exit-address-family
exit
`, n.Name, NodeASN, n.IPv4, Router.IPv4, RouterASN, nets.String())
	confFile := filepath.Join(dir, "bgpd.conf")
	logFile := filepath.Join(l.frrDir(), n.Name+"-test-bgpd.log")
	for _, f := range []struct {
		path, content string
	}{{confFile, conf}, {logFile, ""}} {
		if err := os.WriteFile(f.path, []byte(f.content), 0o640); err != nil {
			return nil, fmt.Errorf("test speaker: %w", err)
		}
	}
	for _, p := range []string{dir, confFile, logFile} {
		if err := os.Chown(p, uid, gid); err != nil {
			return nil, fmt.Errorf("test speaker: %w", err)
		}
	}
	pid := filepath.Join(dir, "bgpd.pid")
	d := daemon{Name: n.Name + "-test-bgpd", Netns: l.Namespace(n.Name), Forks: true, PidFile: pid,
		Args: []string{"/usr/lib/frr/bgpd", "-d", "-Z", "-p", "0", "--vty_socket", dir, "-P", "0",
			"-f", confFile, "-i", pid, "--log", "file:" + logFile}}
	if err := l.start(ctx, d); err != nil {
		return nil, fmt.Errorf("test speaker: %w", err)
	}
	return &TestSpeaker{lab: l, node: n, d: d}, nil
}

// Stop ends the test speaker.
func (s *TestSpeaker) Stop() error {
	return s.lab.stop(s.d, 5*time.Second)
}

// BGPPeer is one neighbour in the router's `show bgp summary json`.
type BGPPeer struct {
	Address  string
	Family   string // "ipv4Unicast", "ipv6Unicast"
	State    string `json:"state"`
	RemoteAS int    `json:"remoteAs"`
	// PfxRcd is the number of prefixes received from the peer.
	PfxRcd int `json:"pfxRcd"`
}

// RouterPeers returns the router's BGP neighbours in every address family.
func (l *Lab) RouterPeers(ctx context.Context) ([]BGPPeer, error) {
	out, err := l.Vtysh(ctx, "show bgp summary json")
	if err != nil {
		return nil, err
	}
	var summary map[string]struct {
		Peers map[string]BGPPeer `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		return nil, fmt.Errorf("parse show bgp summary json: %w: %q", err, out)
	}
	var peers []BGPPeer
	for fam, s := range summary {
		for addr, p := range s.Peers {
			p.Address, p.Family = addr, fam
			peers = append(peers, p)
		}
	}
	return peers, nil
}

// RouterPath is one of the router's BGP paths for a VIP.
type RouterPath struct {
	// Stale: kept by graceful restart after the session dropped.
	Stale bool
}

// RouterPaths returns the router's BGP paths for the VIP's host prefix (/32 or /128), by next
// hop (global addresses only).
func (l *Lab) RouterPaths(ctx context.Context, vip netip.Addr) (map[string]RouterPath, error) {
	cmd := "show ip bgp " + vip.String() + "/32 json"
	if vip.Is6() {
		cmd = "show bgp ipv6 unicast " + vip.String() + "/128 json"
	}
	out, err := l.Vtysh(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("vtysh %s: %w", cmd, err)
	}
	var r struct {
		Paths []struct {
			Stale    bool `json:"stale"`
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("parse %s: %w: %.200q", cmd, err, out)
	}
	got := map[string]RouterPath{}
	for _, p := range r.Paths {
		for _, nh := range p.Nexthops {
			if a, err := netip.ParseAddr(nh.IP); err == nil && !a.IsLinkLocalUnicast() {
				got[nh.IP] = RouterPath{Stale: p.Stale}
			}
		}
	}
	return got, nil
}
