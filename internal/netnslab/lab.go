package netnslab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Prefix starts the name of every namespace a Lab creates.
const Prefix = "l2t-"

// Addresses of the lab network.
const (
	VIP4     = "198.51.100.100"
	VIP6     = "2001:db8::100"
	ClientV4 = "198.51.100.2"
	ClientV6 = "2001:db8::2"
	// MemberlistPort is the port of every speaker.
	MemberlistPort = 7946
	// MetricsPort is where each speaker serves /metrics on 127.0.0.1 of its namespace.
	MetricsPort = 7472
)

// NodeV4 and NodeV6 are the address of node i (1-based); NodeMAC its MAC.
func NodeV4(i int) string  { return fmt.Sprintf("198.51.100.%d", 10+i) }
func NodeV6(i int) string  { return fmt.Sprintf("2001:db8::%x", 0x10+i) }
func NodeMAC(i int) string { return fmt.Sprintf("02:00:00:00:00:%02x", i) }

// NodeOfMAC returns the node index of a lab MAC, or 0.
func NodeOfMAC(mac string) int {
	var i int
	if _, err := fmt.Sscanf(strings.ToLower(mac), "02:00:00:00:00:%x", &i); err != nil {
		return 0
	}
	return i
}

// SkipUnlessRoot skips t unless it runs as root with ip(8) available, and with -short (make
// test-unit, the fast lane): a lab takes seconds to build and tests in one run at a time.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces: skipped with -short (make test-unit); make test-integration runs it as root")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root and network namespaces (run as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs root and network namespaces (run as root): no ip(8)")
	}
}

// EnsureTools installs the Debian packages that provide the named commands, once, if missing.
func EnsureTools(t testing.TB, cmds ...string) {
	t.Helper()
	pkgs := map[string]string{"arping": "arping", "ndisc6": "ndisc6", "tcpdump": "tcpdump"}
	var missing []string
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, pkgs[c])
		}
	}
	if len(missing) == 0 {
		return
	}
	args := append([]string{"-y", "install", "--no-install-recommends"}, missing...)
	if out, err := exec.Command("apt-get", args...).CombinedOutput(); err != nil {
		t.Skipf("cannot install %v: %v\n%s", missing, err, out)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the metalgate command once per test process and returns its path; with
// $METALGATE_BIN set it uses that binary instead.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("METALGATE_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "l2t-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "metalgate")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/metalgate/metalgate/cmd/metalgate").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// CleanupBinary removes the binary built by Binary; call it from TestMain.
func CleanupBinary() {
	if binPath != "" && os.Getenv("METALGATE_BIN") == "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// Lab is a bridge, Nodes node namespaces and one client namespace.
type Lab struct {
	*segment
	Nodes int
	dir   string
	// Key is the speaker cluster's key, in KeyDir/key (every speaker's --memberlist-key-dir).
	Key []byte

	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

// NodeNS returns the namespace of node i.
func (l *Lab) NodeNS(i int) string { return l.NS(fmt.Sprintf("n%d", i)) }

// New creates the lab; t.Cleanup kills the speakers and deletes the namespaces, even on failure.
func New(t testing.TB, nodes int) *Lab {
	t.Helper()
	SkipUnlessRoot(t)
	l := &Lab{segment: newSegment(t, Prefix), Nodes: nodes, dir: t.TempDir(), procs: map[int]*exec.Cmd{}}
	t.Cleanup(l.stopSpeakers)
	l.Key = []byte(fmt.Sprintf("lab %s key %016x%016x", l.ID, rand.Uint64(), rand.Uint64()))
	if err := os.MkdirAll(l.KeyDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.KeyDir(), "key"), l.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	l.addNS("c")
	for i := 1; i <= nodes; i++ {
		// The kernel must not answer for the VIPs, and the NDP responder may use the VIP as the
		// NA source (ndisc6 accepts nothing else).
		l.addNS(fmt.Sprintf("n%d", i), "net.ipv4.conf.all.arp_ignore", "1", "net.ipv4.conf.all.arp_announce", "2",
			"net.ipv6.ip_nonlocal_bind", "1")
	}
	l.attach("c", "02:00:00:00:00:c0", ClientV4+"/24", ClientV6+"/64")
	for i := 1; i <= nodes; i++ {
		l.attach(fmt.Sprintf("n%d", i), NodeMAC(i), NodeV4(i)+"/24", NodeV6(i)+"/64")
	}
	return l
}

// AddHost adds a namespace for role (e.g. "r" for a rogue host) on the bridge with the given
// MAC and addresses, deleted with the lab, and returns its name.
func (l *Lab) AddHost(role, mac, v4, v6 string) string {
	l.t.Helper()
	ns := l.addNS(role)
	l.attach(role, mac, v4+"/24", v6+"/64")
	return ns
}

// stopSpeakers kills the speakers and reaps them.
func (l *Lab) stopSpeakers() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.procs {
		_ = p.Process.Kill()
		_, _ = p.Process.Wait()
		delete(l.procs, i)
	}
}

// KeyDir is the speakers' --memberlist-key-dir: one file "key" holding Key.
func (l *Lab) KeyDir() string { return filepath.Join(l.dir, "memberlist") }

// StaticConfig is the speaker's --static-config for this lab: every node is a speaker,
// admitted at its IPv4 and IPv6 address.
func (l *Lab) StaticConfig(vips ...string) []byte {
	type vip struct {
		VIP     string `json:"vip"`
		Service string `json:"service"`
	}
	cfg := struct {
		Speakers  []string            `json:"speakers"`
		Peers     []string            `json:"peers"`
		Addresses map[string][]string `json:"addresses"`
		VIPs      []vip               `json:"vips"`
	}{Addresses: map[string][]string{}}
	for i := 1; i <= l.Nodes; i++ {
		cfg.Speakers = append(cfg.Speakers, fmt.Sprintf("n%d", i))
		cfg.Peers = append(cfg.Peers, net.JoinHostPort(NodeV4(i), fmt.Sprint(MemberlistPort)))
		cfg.Addresses[fmt.Sprintf("n%d", i)] = []string{NodeV4(i), NodeV6(i)}
	}
	for _, v := range vips {
		cfg.VIPs = append(cfg.VIPs, vip{VIP: v, Service: "lab/" + v})
	}
	b, _ := json.Marshal(cfg)
	return b
}

// StartSpeaker starts the real speaker binary in node i's namespace with config and extra args.
func (l *Lab) StartSpeaker(i int, config []byte, extra ...string) {
	l.t.Helper()
	cfgPath := filepath.Join(l.dir, fmt.Sprintf("n%d.json", i))
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		l.t.Fatal(err)
	}
	logf, err := os.OpenFile(l.LogPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.t.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"netns", "exec", l.NodeNS(i), Binary(l.t), "speaker",
		"--node-name", fmt.Sprintf("n%d", i), "--node-ip", NodeV4(i), "--static-config", cfgPath, "--memberlist-key-dir", l.KeyDir(),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", MetricsPort), "--zap-log-level", "info", "--zap-time-encoding", "rfc3339nano"}, extra...)
	// ip netns exec execs the program itself, so Process is the speaker.
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.mu.Lock()
	l.procs[i] = cmd
	l.mu.Unlock()
}

// LogPath is node i's speaker log.
func (l *Lab) LogPath(i int) string { return filepath.Join(l.dir, fmt.Sprintf("n%d.log", i)) }

// Log returns node i's speaker log.
func (l *Lab) Log(i int) string {
	b, _ := os.ReadFile(l.LogPath(i))
	return string(b)
}

// Signal sends sig to node i's speaker; for SIGKILL it also reaps it.
func (l *Lab) Signal(i int, sig syscall.Signal) {
	l.t.Helper()
	l.mu.Lock()
	p := l.procs[i]
	l.mu.Unlock()
	if p == nil {
		l.t.Fatalf("node %d runs no speaker", i)
	}
	if err := p.Process.Signal(sig); err != nil {
		l.t.Fatal(err)
	}
}

// PID returns the process id of node i's speaker, or 0.
func (l *Lab) PID(i int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.procs[i]; p != nil {
		return p.Process.Pid
	}
	return 0
}

// Wait waits for node i's speaker to exit and returns its error.
func (l *Lab) Wait(i int) error {
	l.mu.Lock()
	p := l.procs[i]
	delete(l.procs, i)
	l.mu.Unlock()
	if p == nil {
		return errors.New("no such speaker")
	}
	return p.Wait()
}

// SetLink sets node i's port on the bridge up or down (a partition of that node).
func (l *Lab) SetLink(i int, up bool) {
	l.Run("ip", "-n", l.NS("br"), "link", "set", fmt.Sprintf("n%d", i), linkState(up))
}

// Metrics returns node i's /metrics text.
func (l *Lab) Metrics(i int) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", l.NodeNS(i), "curl", "-sf", "--max-time", "2",
		fmt.Sprintf("http://127.0.0.1:%d/metrics", MetricsPort)).Output()
	return string(out), err
}

// Metric returns the value of the first sample line that starts with name (including labels),
// or "" when absent.
func Metric(text, prefix string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	return ""
}

// Eventually polls cond every 20ms until it holds or limit passes.
func Eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// Output runs a command and returns its combined output and error.
func Output(args ...string) (string, error) {
	var b bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}
