package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/metalgate/metalgate/internal/testenv"
)

// The FRR lab: three network namespaces joined by a bridge, so that a node
// whose link goes down is a silent failure for the router (its own link
// stays up):
//
//	bgpt-r  (FRR: zebra, bfdd, bgpd)  bgpt-r0 198.51.100.1/24  2001:db8::1/64
//	   |  veth bgpt-vr
//	bgpt-br (bridge bgpt-br0)
//	   |  veth bgpt-vn
//	bgpt-n1 (speaker helper process)  bgpt-n0 198.51.100.11-15/24 2001:db8::11/64
//
// The speaker runs in a child process (this test binary re-executed with
// helperEnv set, see TestMain) started with "ip netns exec bgpt-n1": GoBGP's
// goroutines move between OS threads, so one process cannot reliably use a
// namespace other than its own. FRR has one neighbor per node address, so
// each scenario picks its session by SourceAddress.

const (
	helperEnv = "METALGATE_BGPTEST_HELPER"
	nsRouter  = "bgpt-r"
	nsBridge  = "bgpt-br"
	nsNode    = "bgpt-n1"
	routerV4  = "198.51.100.1"
	routerV6  = "2001:db8::1"
	nodeV6    = "2001:db8::11"
)

// Node addresses, one FRR neighbor each.
const (
	srcEBGP = "198.51.100.11" // eBGP, hold 3s, no BFD
	srcIBGP = "198.51.100.12" // iBGP (AS 64500 both sides)
	srcMD5  = "198.51.100.13" // eBGP with password "s3cret"
	srcBFD  = "198.51.100.14" // eBGP with BFD 100ms x 3
	srcGR   = "198.51.100.15" // eBGP, graceful restart
	// nodeV6 (2001:db8::11) peers with 2001:db8::1 over IPv6.
)

const bgpdConf = `hostname bgpt-router
log timestamp precision 3
!
router bgp 64500
 bgp router-id 198.51.100.1
 no bgp ebgp-requires-policy
 no bgp network import-check
 bgp graceful-restart
 neighbor 198.51.100.11 remote-as 64512
 neighbor 198.51.100.11 timers 1 3
 neighbor 198.51.100.11 timers connect 1
 neighbor 198.51.100.12 remote-as 64500
 neighbor 198.51.100.12 timers 1 3
 neighbor 198.51.100.12 timers connect 1
 neighbor 198.51.100.13 remote-as 64512
 neighbor 198.51.100.13 password s3cret
 neighbor 198.51.100.13 timers 1 3
 neighbor 198.51.100.13 timers connect 1
 neighbor 198.51.100.14 remote-as 64512
 neighbor 198.51.100.14 timers 1 3
 neighbor 198.51.100.14 timers connect 1
 neighbor 198.51.100.14 bfd
 neighbor 198.51.100.14 bfd profile fast
 neighbor 198.51.100.15 remote-as 64512
 neighbor 198.51.100.15 timers 1 3
 neighbor 198.51.100.15 timers connect 1
 neighbor 2001:db8::11 remote-as 64512
 neighbor 2001:db8::11 timers 1 3
 neighbor 2001:db8::11 timers connect 1
 !
 address-family ipv4 unicast
  neighbor 198.51.100.11 activate
  neighbor 198.51.100.12 activate
  neighbor 198.51.100.13 activate
  neighbor 198.51.100.14 activate
  neighbor 198.51.100.15 activate
  neighbor 2001:db8::11 activate
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor 198.51.100.11 activate
  neighbor 198.51.100.12 activate
  neighbor 198.51.100.13 activate
  neighbor 198.51.100.14 activate
  neighbor 198.51.100.15 activate
  neighbor 2001:db8::11 activate
 exit-address-family
!
`

const bfddConf = `hostname bgpt-router
!
bfd
 profile fast
  receive-interval 100
  transmit-interval 100
  detect-multiplier 3
 exit
exit
!
`

// needRoot skips the test unless it can build network namespaces.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root and network namespaces (run as root)")
	}
	for _, bin := range []string{"ip", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs root and network namespaces (run as root), and FRR (apt-get install -y frr): %v", err)
		}
	}
}

func run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lab is a running FRR lab.
type lab struct {
	dir string // FRR's run directory (configs, pidfiles, vty sockets)
}

// newLab builds the namespaces and starts FRR. Everything is torn down in
// t.Cleanup, also when the test fails.
func newLab(t testing.TB) *lab {
	t.Helper()
	needRoot(t)
	for _, ns := range []string{nsRouter, nsBridge, nsNode} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s (a previous run left it behind? ip netns del %s)", ns, err, out, ns)
		}
		t.Cleanup(func() { deleteNetns(t, ns) })
		// Before any link exists: new devices inherit "default".
		run(t, "ip", "netns", "exec", ns, "sysctl", "-qw",
			"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.conf.all.dad_transmits=0", "net.ipv6.conf.default.dad_transmits=0",
			"net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", nsBridge, "link", "add", "bgpt-br0", "type", "bridge")
	run(t, "ip", "-n", nsBridge, "link", "set", "bgpt-br0", "type", "bridge", "stp_state", "0", "mcast_snooping", "0")
	run(t, "ip", "-n", nsBridge, "link", "set", "bgpt-br0", "up")
	for _, l := range []struct{ ns, brSide, inside string }{{nsRouter, "bgpt-vr", "bgpt-r0"}, {nsNode, "bgpt-vn", "bgpt-n0"}} {
		run(t, "ip", "-n", nsBridge, "link", "add", l.brSide, "type", "veth", "peer", "name", l.inside, "netns", l.ns)
		run(t, "ip", "-n", nsBridge, "link", "set", l.brSide, "master", "bgpt-br0", "up")
		run(t, "ip", "-n", l.ns, "link", "set", l.inside, "up")
	}
	run(t, "ip", "-n", nsRouter, "addr", "add", routerV4+"/24", "dev", "bgpt-r0")
	run(t, "ip", "-n", nsRouter, "addr", "add", "2001:db8::1/64", "dev", "bgpt-r0", "nodad")
	// srcBFD first: it becomes the primary address, the one the kernel
	// picks as source of GoBGP's BFD packets (GoBGP does not bind them to
	// the session's source address).
	for _, a := range []string{srcBFD, srcEBGP, srcIBGP, srcMD5, srcGR} {
		run(t, "ip", "-n", nsNode, "addr", "add", a+"/24", "dev", "bgpt-n0")
	}
	run(t, "ip", "-n", nsNode, "addr", "add", nodeV6+"/64", "dev", "bgpt-n0", "nodad")

	dir, err := os.MkdirTemp("", "bgpt-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &lab{dir: dir}
	for name, conf := range map[string]string{"zebra.conf": "hostname bgpt-router\n", "bgpd.conf": bgpdConf, "bfdd.conf": bfddConf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The daemons run as user frr (root is not in group frrvty, so "-u
	// root" fails in privs_init) and must own their run directory.
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("needs the frr user (apt-get install -y frr): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })
	t.Cleanup(func() { l.stopFRR(t) })
	common := []string{"-d", "--vty_socket", dir, "-P", "0", "-z", filepath.Join(dir, "zserv.api")}
	daemon := func(name string, extra ...string) {
		args := append([]string{"netns", "exec", nsRouter, "/usr/lib/frr/" + name}, common...)
		args = append(args, "-f", filepath.Join(dir, name+".conf"), "-i", filepath.Join(dir, name+".pid"),
			"--log", "file:"+filepath.Join(dir, name+".log"))
		run(t, append(append([]string{"ip"}, args...), extra...)...)
	}
	daemon("zebra")
	waitFile(t, filepath.Join(dir, "zserv.api"))
	daemon("bfdd", "--bfdctl", filepath.Join(dir, "bfdd.sock"))
	daemon("bgpd")
	waitFile(t, filepath.Join(dir, "bgpd.vty"))
	return l
}

func waitFile(t testing.TB, path string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, path+" appears", func() error {
		_, err := os.Stat(path)
		return err
	})
}

// stopFRR kills the daemons by pidfile.
func (l *lab) stopFRR(t testing.TB) {
	for _, d := range []string{"bgpd", "bfdd", "zebra"} {
		b, err := os.ReadFile(filepath.Join(l.dir, d+".pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		// Up to 2s to exit before SIGKILL (cleanup; the daemons are not our children, so
		// there is no Wait: polling the pid is the only way to see them go).
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// deleteNetns kills what still runs in ns (our helpers) and deletes it.
func deleteNetns(t testing.TB, ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGCONT)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
}

// vtysh runs one command against the lab's FRR.
func (l *lab) vtysh(t testing.TB, cmd string) string {
	t.Helper()
	out, err := exec.Command("vtysh", "--vty_socket", l.dir, "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("vtysh -c %q: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// frrRoute is the part of FRR's "show bgp <afi> unicast <prefix> json" the
// tests check.
type frrRoute struct {
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

// route returns FRR's paths for prefix (v4 or v6).
func (l *lab) route(t testing.TB, prefix string) frrRoute {
	t.Helper()
	afi := "ipv4"
	if strings.Contains(prefix, ":") {
		afi = "ipv6"
	}
	var r frrRoute
	out := l.vtysh(t, fmt.Sprintf("show bgp %s unicast %s json", afi, prefix))
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return r
}

// has reports whether FRR has a path for prefix from the node address src.
func (l *lab) has(t testing.TB, prefix, src string) bool {
	for _, p := range l.route(t, prefix).Paths {
		if p.Peer.PeerID == src && p.Valid {
			return true
		}
	}
	return false
}

// neighborState is FRR's BGP state of the neighbor src.
func (l *lab) neighborState(t testing.TB, src string) string {
	t.Helper()
	var n map[string]struct {
		State string `json:"bgpState"`
	}
	out := l.vtysh(t, "show bgp neighbors "+src+" json")
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return n[src].State
}

// helperConfig is what the helper process announces.
type helperConfig struct {
	RouterID string
	Peers    []Peer
	Ads      []Advertisement
}

// helper is a running speaker process in bgpt-n1.
type helper struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
	mu   *sync.Mutex
}

func startHelper(t testing.TB, cfg helperConfig) *helper {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "helper.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &helper{done: make(chan struct{}), out: &strings.Builder{}, mu: &sync.Mutex{}}
	h.cmd = exec.Command("ip", "netns", "exec", nsNode, self)
	h.cmd.Env = append(os.Environ(), helperEnv+"="+f)
	h.cmd.Stdout = lockedWriter{h}
	h.cmd.Stderr = lockedWriter{h}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		h.kill()
		if t.Failed() {
			h.mu.Lock()
			t.Logf("helper output:\n%s", h.out.String())
			h.mu.Unlock()
		}
	})
	return h
}

type lockedWriter struct{ h *helper }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.out.Write(p)
}

func (h *helper) signal(sig syscall.Signal) {
	if h.cmd.Process != nil {
		h.cmd.Process.Signal(sig)
	}
}

// kill ends the helper (also when stopped) and waits for it.
func (h *helper) kill() {
	h.signal(syscall.SIGKILL)
	h.signal(syscall.SIGCONT)
	<-h.done
}

// runHelper is the helper process: announce cfg until SIGTERM (graceful
// Close) or death.
func runHelper(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var cfg helperConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), prefix, args) }, funcr.Options{})
	opts := Options{ListenPort: -1}
	if err := opts.RouterID.UnmarshalText([]byte(cfg.RouterID)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := New(log, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	if err := s.SetPeers(ctx, cfg.Peers); err != nil {
		log.Error(err, "SetPeers")
	}
	if err := s.SetAdvertisements(ctx, cfg.Ads); err != nil {
		log.Error(err, "SetAdvertisements")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		// Report the status now and then; it ends up in the test log on failure.
		for range time.Tick(time.Second) {
			logStatus(log, s)
		}
	}()
	<-sig
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Close(cctx); err != nil {
		log.Error(err, "Close")
		return 1
	}
	return 0
}

func logStatus(log logr.Logger, s *Speaker) {
	for _, st := range s.Status() {
		log.Info("status", "peer", st.Name, "state", st.SessionState, "prefixes", st.PrefixesAdvertised, "lastError", st.LastError)
	}
}

// routeMonitor timestamps the deletions of kernel routes in bgpt-r, as
// zebra removes what bgpd withdrew.
type routeMonitor struct {
	cmd     *exec.Cmd
	deleted chan string // "Deleted ..." lines
}

func startRouteMonitor(t testing.TB) *routeMonitor {
	t.Helper()
	m := &routeMonitor{cmd: exec.Command("ip", "-n", nsRouter, "monitor", "route"), deleted: make(chan string, 1024)}
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
		m.cmd.Process.Kill()
		m.cmd.Wait()
	})
	return m
}

// drain forgets deletions seen so far.
func (m *routeMonitor) drain() {
	for {
		select {
		case <-m.deleted:
		default:
			return
		}
	}
}

// waitDeleted returns when the kernel route for prefix (as "ip route"
// prints it, e.g. "100.64.0.10") is deleted.
func (m *routeMonitor) waitDeleted(prefix string, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case line := <-m.deleted:
			if f := strings.Fields(line); len(f) > 1 && f[1] == prefix {
				return time.Now(), true
			}
		case <-deadline:
			return time.Time{}, false
		}
	}
}

func execCommand(args ...string) ([]byte, error) {
	return exec.Command(args[0], args[1:]...).CombinedOutput()
}

// sawDeleted reports whether a deletion of the kernel route for prefix was
// seen since the last drain, and forgets the deletions seen.
func (m *routeMonitor) sawDeleted(prefix string) bool {
	seen := false
	for {
		select {
		case line := <-m.deleted:
			if f := strings.Fields(line); len(f) > 1 && f[1] == prefix {
				seen = true
			}
		default:
			return seen
		}
	}
}
