package netnslab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/nsexec"
	"github.com/metalgate/metalgate/internal/testenv"
)

// reach reports whether addr answers from namespace ns: a TCP connection to port 1 is refused
// (the host's kernel answered) rather than timing out or finding no route.
func reach(ns, addr string) error {
	return nsexec.InNS(ns, func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "1"), 3*time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		return fmt.Errorf("%s from %s: %w", addr, ns, err)
	})
}

// gone fails t unless every namespace is deleted and every pid has exited.
func gone(t *testing.T, namespaces []string, pids []int) {
	t.Helper()
	for _, ns := range namespaces {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); !os.IsNotExist(err) {
			t.Errorf("namespace %s still exists after cleanup (stat: %v)", ns, err)
		}
	}
	for _, pid := range pids {
		// A killed child of ours is a zombie until reaped: look at its state, not only kill -0.
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("pid %d still runs after cleanup: %s", pid, b)
		}
	}
}

func TestLabNamesUniqueAndTornDown(t *testing.T) {
	SkipUnlessRoot(t)
	var namespaces []string
	var pids []int
	t.Run("two labs", func(t *testing.T) {
		a, b := New(t, 1), New(t, 2)
		if a.ID == b.ID {
			t.Fatalf("two labs share the id %s", a.ID)
		}
		b.AddHost("r", "02:00:00:00:00:e0", "198.51.100.250", "2001:db8::250")
		for _, r := range []string{"br", "c", "n1"} {
			namespaces = append(namespaces, a.NS(r))
		}
		for _, r := range []string{"br", "c", "n1", "n2", "r"} {
			namespaces = append(namespaces, b.NS(r))
		}
		// A process the test left behind in a namespace (stopped, as a frozen speaker).
		cmd := exec.Command("ip", "netns", "exec", b.NS("r"), "sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
		comm := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "comm")
		testenv.Eventually(t, 10*time.Second, "ip netns exec to exec sleep", func() error {
			b, err := os.ReadFile(comm)
			if err == nil && strings.TrimSpace(string(b)) != "sleep" {
				err = fmt.Errorf("%s is %q", comm, b)
			}
			return err
		})
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// The bridge joins the hosts.
		if err := reach(b.NS("r"), NodeV4(2)); err != nil {
			t.Error(err)
		}
	})
	gone(t, namespaces, pids)
}

func TestFRRLab(t *testing.T) {
	var f *FRR
	var pids []int
	t.Run("lab", func(t *testing.T) {
		f = NewFRR(t, FRROptions{
			RouterAddrs:  []string{"198.51.100.1/24", "2001:db8::1/64"},
			SpeakerAddrs: []string{"198.51.100.11/24", "2001:db8::11/64"},
			BGPD:         "router bgp 64500\n neighbor 198.51.100.11 remote-as 64512\n",
			BFDD:         "bfd\n",
		})
		if got := f.NeighborState(t, "198.51.100.11"); got == "" || got == "Established" {
			t.Errorf("state of a neighbor that runs no BGP = %q, want a state short of Established", got)
		}
		if err := reach(f.SpeakerNS(), "198.51.100.1"); err != nil {
			t.Error(err)
		}
		m := f.MonitorRoutes(t)
		// The monitor sees a route of the router deleted; after a Drain it is forgotten.
		Run(t, "ip", "-n", f.RouterNS(), "route", "add", "100.64.9.9/32", "dev", "eth0")
		Run(t, "ip", "-n", f.RouterNS(), "route", "del", "100.64.9.9/32", "dev", "eth0")
		if _, ok := m.WaitDeleted("100.64.9.9", 10*time.Second); !ok {
			t.Error("route monitor did not see the deletion of 100.64.9.9")
		}
		Run(t, "ip", "-n", f.RouterNS(), "route", "add", "100.64.9.8/32", "dev", "eth0")
		Run(t, "ip", "-n", f.RouterNS(), "route", "del", "100.64.9.8/32", "dev", "eth0")
		testenv.Eventually(t, 10*time.Second, "the monitor to see 100.64.9.8 deleted", testenv.True(func() bool { return m.SawDeleted("100.64.9.8") }))
		m.Drain()
		if m.SawDeleted("100.64.9.8") {
			t.Error("SawDeleted after Drain reports an old deletion")
		}
		// The speaker's link down: its ping fails, the router's link stays up.
		f.SetSpeakerLink(t, false)
		if err := reach(f.SpeakerNS(), "198.51.100.1"); err == nil {
			t.Error("the router answers with the speaker's link down")
		}
		if out := Run(t, "ip", "-n", f.RouterNS(), "link", "show", "eth0"); !strings.Contains(out, "state UP") {
			t.Errorf("router link with the speaker's link down:\n%s", out)
		}
		f.SetSpeakerLink(t, true)
		for _, d := range frrDaemons() {
			b, err := os.ReadFile(filepath.Join(f.dir, d+".pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pidfile of %s: %v", d, err)
			}
			pids = append(pids, pid)
		}
	})
	if f == nil {
		return // skipped
	}
	gone(t, []string{f.RouterNS(), f.SpeakerNS(), f.NS("br")}, pids)
	if _, err := os.Stat(f.dir); !os.IsNotExist(err) {
		t.Errorf("FRR run directory %s left behind (stat: %v)", f.dir, err)
	}
}
