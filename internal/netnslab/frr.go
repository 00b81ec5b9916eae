package netnslab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
)

// FRRPrefix starts the name of every namespace an FRR lab creates.
const FRRPrefix = "frrt-"

// frrDaemons are the FRR daemons of the lab, started in this order and stopped in the reverse
// one.
func frrDaemons() []string { return []string{"zebra", "bfdd", "bgpd"} }

// FRROptions configure an FRR lab.
type FRROptions struct {
	// RouterAddrs are the CIDRs on the router's eth0.
	RouterAddrs []string
	// SpeakerAddrs are the CIDRs on the speaker's eth0, in order: the first IPv4 one is the
	// primary address, the kernel's source for packets not bound to another.
	SpeakerAddrs []string
	// BGPD and BFDD are bgpd.conf and bfdd.conf.
	BGPD, BFDD string
}

// FRR is a router namespace running FRR (zebra, bfdd, bgpd) and a speaker namespace, joined by
// a bridge: when the speaker's link goes down, the router's own link stays up, so the failure
// is silent for the router.
//
//	<FRRPrefix><id>-r   FRR, RouterAddrs on eth0
//	   | veth (port "r")
//	<FRRPrefix><id>-br  bridge br0
//	   | veth (port "s")
//	<FRRPrefix><id>-s   whatever the test starts with "ip netns exec", SpeakerAddrs on eth0
type FRR struct {
	*segment
	dir string // FRR's run directory (configs, pidfiles, vty sockets, logs)
}

// SkipUnlessFRR skips t unless it runs as root with ip(8) and FRR installed.
func SkipUnlessFRR(t testing.TB) {
	t.Helper()
	SkipUnlessRoot(t)
	bins := []string{"vtysh"}
	for _, d := range frrDaemons() {
		bins = append(bins, "/usr/lib/frr/"+d)
	}
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs root and network namespaces (run as root), and FRR (apt-get install -y frr): %v", err)
		}
	}
}

// NewFRR builds the namespaces and starts FRR. t.Cleanup stops FRR and deletes the namespaces
// with whatever still runs in them, also when the test fails.
func NewFRR(t testing.TB, o FRROptions) *FRR {
	t.Helper()
	SkipUnlessFRR(t)
	// The daemons run as user frr (root is not in group frrvty, so "-u root" fails in
	// privs_init) and must own their run directory.
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("needs the frr user (apt-get install -y frr): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	f := &FRR{segment: newSegment(t, FRRPrefix)}
	noRA := []string{"net.ipv6.conf.all.accept_ra", "0", "net.ipv6.conf.default.accept_ra", "0"}
	f.addNS("r", noRA...)
	f.addNS("s", noRA...)
	f.attach("r", "", o.RouterAddrs...)
	f.attach("s", "", o.SpeakerAddrs...)

	if f.dir, err = os.MkdirTemp("", "frrt-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(f.dir) })
	confs := map[string]string{"zebra": "hostname frrt-router\n", "bfdd": o.BFDD, "bgpd": o.BGPD}
	for d, conf := range confs {
		if err := os.WriteFile(filepath.Join(f.dir, d+".conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(f.dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.stop)
	common := []string{"-d", "--vty_socket", f.dir, "-P", "0", "-z", filepath.Join(f.dir, "zserv.api")}
	extra := map[string][]string{"bfdd": {"--bfdctl", filepath.Join(f.dir, "bfdd.sock")}}
	ready := map[string]string{"zebra": "zserv.api", "bgpd": "bgpd.vty"}
	for _, d := range frrDaemons() {
		args := append([]string{"ip", "netns", "exec", f.RouterNS(), "/usr/lib/frr/" + d}, common...)
		args = append(args, "-f", filepath.Join(f.dir, d+".conf"), "-i", filepath.Join(f.dir, d+".pid"),
			"--log", "file:"+filepath.Join(f.dir, d+".log"))
		f.Run(append(args, extra[d]...)...)
		if r := ready[d]; r != "" {
			p := filepath.Join(f.dir, r)
			testenv.Eventually(t, 10*time.Second, p+" appears", func() error {
				_, err := os.Stat(p)
				return err
			})
		}
	}
	return f
}

// RouterNS is the namespace FRR runs in.
func (f *FRR) RouterNS() string { return f.NS("r") }

// SpeakerNS is the namespace on the other side of the bridge.
func (f *FRR) SpeakerNS() string { return f.NS("s") }

// SetSpeakerLink sets the speaker namespace's eth0 up or down (the router's link stays up).
func (f *FRR) SetSpeakerLink(t testing.TB, up bool) {
	t.Helper()
	Run(t, "ip", "-n", f.SpeakerNS(), "link", "set", "eth0", linkState(up))
}

func linkState(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// stop kills the daemons by pidfile.
func (f *FRR) stop() {
	daemons := frrDaemons()
	for i := len(daemons) - 1; i >= 0; i-- {
		b, err := os.ReadFile(filepath.Join(f.dir, daemons[i]+".pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		// Up to 2s to exit before SIGKILL (cleanup; the daemons are not our children, so
		// there is no Wait: polling the pid is the only way to see them go).
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Vtysh runs one command against the lab's FRR and returns its output; an error fails t.
func (f *FRR) Vtysh(t testing.TB, cmd string) string {
	t.Helper()
	out, err := exec.Command("vtysh", "--vty_socket", f.dir, "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("vtysh -c %q: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// FRRRoute is the part of FRR's "show bgp <afi> unicast <prefix> json" the tests check.
type FRRRoute struct {
	Paths []struct {
		Valid     bool   `json:"valid"`
		Stale     bool   `json:"stale"`
		LocPrf    uint32 `json:"locPrf"`
		Community *struct {
			String string `json:"string"`
		} `json:"community"`
		LargeCommunity *struct {
			String string `json:"string"`
		} `json:"largeCommunity"`
		Nexthops []struct {
			IP string `json:"ip"`
		} `json:"nexthops"`
		Peer struct {
			PeerID string `json:"peerId"`
		} `json:"peer"`
		Bestpath *struct {
			Overall bool `json:"overall"`
		} `json:"bestpath"`
	} `json:"paths"`
}

// Route returns FRR's paths for prefix (IPv4 or IPv6).
func (f *FRR) Route(t testing.TB, prefix string) FRRRoute {
	t.Helper()
	afi := "ipv4"
	if strings.Contains(prefix, ":") {
		afi = "ipv6"
	}
	var r FRRRoute
	out := f.Vtysh(t, fmt.Sprintf("show bgp %s unicast %s json", afi, prefix))
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return r
}

// Has reports whether FRR has a valid path for prefix from the neighbor src.
func (f *FRR) Has(t testing.TB, prefix, src string) bool {
	t.Helper()
	for _, p := range f.Route(t, prefix).Paths {
		if p.Peer.PeerID == src && p.Valid {
			return true
		}
	}
	return false
}

// NeighborState is FRR's BGP state of the neighbor src ("Established", "Active" ...).
func (f *FRR) NeighborState(t testing.TB, src string) string {
	t.Helper()
	var n map[string]struct {
		State string `json:"bgpState"`
	}
	out := f.Vtysh(t, "show bgp neighbors "+src+" json")
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return n[src].State
}

// RouteMonitor timestamps the deletions of kernel routes in the router namespace, as zebra
// removes what bgpd withdrew.
type RouteMonitor struct {
	cmd     *exec.Cmd
	deleted chan string // "Deleted ..." lines
}

// MonitorRoutes starts a RouteMonitor ("ip monitor route" in the router namespace), stopped in
// t.Cleanup.
func (f *FRR) MonitorRoutes(t testing.TB) *RouteMonitor {
	t.Helper()
	m := &RouteMonitor{cmd: exec.Command("ip", "-n", f.RouterNS(), "monitor", "route"), deleted: make(chan string, 1024)}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "Deleted ") {
				select {
				case m.deleted <- line:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	})
	return m
}

// Drain forgets the deletions seen so far.
func (m *RouteMonitor) Drain() {
	for {
		select {
		case <-m.deleted:
		default:
			return
		}
	}
}

// WaitDeleted returns when the kernel route for prefix (as "ip route" prints it, e.g.
// "100.64.0.10") is deleted, or false after timeout.
func (m *RouteMonitor) WaitDeleted(prefix string, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case line := <-m.deleted:
			if deletes(line, prefix) {
				return time.Now(), true
			}
		case <-deadline:
			return time.Time{}, false
		}
	}
}

// SawDeleted reports whether a deletion of the kernel route for prefix was seen since the last
// Drain, and forgets the deletions seen.
func (m *RouteMonitor) SawDeleted(prefix string) bool {
	seen := false
	for {
		select {
		case line := <-m.deleted:
			seen = seen || deletes(line, prefix)
		default:
			return seen
		}
	}
}

// deletes reports whether the "Deleted ..." line of ip monitor is about prefix.
func deletes(line, prefix string) bool {
	f := strings.Fields(line)
	return len(f) > 1 && f[1] == prefix
}
