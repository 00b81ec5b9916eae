package netnslab

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// segment is the primitive both labs are built of: a bridge namespace <prefix><id>-br and host
// namespaces attached to it by a veth each (eth0 inside, the role's name on the bridge). The id
// is random per lab, so the names are unique per test run. On cleanup whatever still runs in a
// namespace is killed and every namespace is deleted, also when the test failed.
type segment struct {
	t      testing.TB
	prefix string
	// ID is the random part of every namespace name.
	ID string

	mu   sync.Mutex
	made []string // roles whose namespace exists, in creation order
}

// newSegment creates the bridge namespace; the segment is destroyed in t.Cleanup.
func newSegment(t testing.TB, prefix string) *segment {
	t.Helper()
	// NETNSLAB_PREFIX goes before prefix: several people (or worktrees) running labs on one
	// machine each see, and clean up, only their own namespaces.
	prefix = os.Getenv("NETNSLAB_PREFIX") + prefix
	s := &segment{t: t, prefix: prefix, ID: fmt.Sprintf("%04x", rand.IntN(0x10000))}
	t.Cleanup(s.destroy)
	br := s.addNS("br")
	s.Run("ip", "-n", br, "link", "add", "br0", "type", "bridge", "forward_delay", "0", "mcast_snooping", "0")
	s.Run("ip", "-n", br, "link", "set", "br0", "up")
	return s
}

// NS returns the full namespace name of a role ("br", "c", "n1", "r").
func (s *segment) NS(role string) string { return s.prefix + s.ID + "-" + role }

// Run runs a command and fails the test on error. Call it from the goroutine of the test that
// made the lab; a subtest uses the package function Run with its own t.
func (s *segment) Run(args ...string) string {
	s.t.Helper()
	return Run(s.t, args...)
}

// Run runs a command and fails t on error; it returns the combined output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addNS creates the namespace of role with DAD off (before any link exists, so new devices
// inherit it: else the NDP socket cannot bind a tentative link-local address) plus the given
// sysctls (key, value, key, value ...), and its loopback up. It returns the namespace's name.
func (s *segment) addNS(role string, sysctls ...string) string {
	s.t.Helper()
	ns := s.NS(role)
	s.Run("ip", "netns", "add", ns)
	s.mu.Lock()
	s.made = append(s.made, role)
	s.mu.Unlock()
	kv := []string{"net.ipv6.conf.all.accept_dad", "0", "net.ipv6.conf.default.accept_dad", "0",
		"net.ipv6.conf.all.dad_transmits", "0", "net.ipv6.conf.default.dad_transmits", "0"}
	s.sysctl(ns, append(kv, sysctls...)...)
	s.Run("ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// sysctl sets key, value pairs in namespace ns.
func (s *segment) sysctl(ns string, kv ...string) {
	s.t.Helper()
	args := []string{"ip", "netns", "exec", ns, "sysctl", "-qw"}
	for i := 0; i+1 < len(kv); i += 2 {
		args = append(args, kv[i]+"="+kv[i+1])
	}
	s.Run(args...)
}

// attach links the namespace of role to the bridge: eth0 inside (with mac unless it is ""), the
// port named role on the bridge. The addresses (CIDRs) go on eth0 in order, so the first IPv4
// one is the primary address; IPv6 ones without DAD.
func (s *segment) attach(role, mac string, cidrs ...string) {
	s.t.Helper()
	ns, br := s.NS(role), s.NS("br")
	add := []string{"ip", "-n", ns, "link", "add", "eth0"}
	if mac != "" {
		add = append(add, "address", mac)
	}
	s.Run(append(add, "type", "veth", "peer", "name", role, "netns", br)...)
	s.Run("ip", "-n", br, "link", "set", role, "master", "br0", "up")
	for _, a := range cidrs {
		args := []string{"ip", "-n", ns, "addr", "add", a, "dev", "eth0"}
		if strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		s.Run(args...)
	}
	s.Run("ip", "-n", ns, "link", "set", "eth0", "up")
}

// destroy kills what still runs in the namespaces (SIGCONT first: a stopped process), except
// this test process (whose main thread may sit in a namespace after InNS), and deletes them,
// newest first.
func (s *segment) destroy() {
	self := os.Getpid()
	s.mu.Lock()
	made := s.made
	s.made = nil
	s.mu.Unlock()
	for i := len(made) - 1; i >= 0; i-- {
		ns := s.NS(made[i])
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != self {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			s.t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
}
