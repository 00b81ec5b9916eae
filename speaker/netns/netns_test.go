package netns

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/netnslab"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker/election"
)

var (
	vip4 = netip.MustParseAddr(netnslab.VIP4)
	vip6 = netip.MustParseAddr(netnslab.VIP6)
)

func TestMain(m *testing.M) {
	code := m.Run()
	netnslab.CleanupBinary()
	os.Exit(code)
}

func nodeNames(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// expectedOwner is the node every speaker must elect for vip among the live ones.
func expectedOwner(vip netip.Addr, live []string) int {
	var i int
	fmt.Sscanf(election.Owner(vip, live), "n%d", &i)
	return i
}

// startCluster starts speakers on every node of l and waits until the client sees the elected
// owner's MAC for both VIPs.
func startCluster(t *testing.T, l *netnslab.Lab, obs *netnslab.Observer) {
	t.Helper()
	start := time.Now()
	cfg := l.StaticConfig(netnslab.VIP4, netnslab.VIP6)
	for i := 1; i <= l.Nodes; i++ {
		l.StartSpeaker(i, cfg)
	}
	for _, vip := range []netip.Addr{vip4, vip6} {
		want := netnslab.NodeMAC(expectedOwner(vip, nodeNames(l.Nodes)))
		if _, ok := obs.WaitMAC(vip, start, 20*time.Second, func(m string) bool { return m == want }); !ok {
			t.Fatalf("client never saw %s at %s (owner by election); sightings %v\nn1 log:\n%s", vip, want, obs.Since(vip, start), l.Log(1))
		}
	}
}

func newLab(t *testing.T) (*netnslab.Lab, *netnslab.Observer) {
	l := netnslab.New(t, 3)
	obs, err := netnslab.Observe(l.NS("c"), vip4, vip6, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	return l, obs
}

// TestRealToolsSeeTheElectedOwner: arping and ndisc6, run in the client namespace, get the MAC
// of the node the election picks, and only that one.
func TestRealToolsSeeTheElectedOwner(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	netnslab.EnsureTools(t, "arping", "ndisc6")
	l, obs := newLab(t)
	startCluster(t, l, obs)

	want4 := netnslab.NodeMAC(expectedOwner(vip4, nodeNames(3)))
	out, err := netnslab.Output("ip", "netns", "exec", l.NS("c"), "arping", "-c", "3", "-w", "5", "-I", "eth0", netnslab.VIP4)
	if err != nil {
		t.Fatalf("arping: %v\n%s", err, out)
	}
	macs := regexp.MustCompile(`(?i)([0-9a-f]{2}(:[0-9a-f]{2}){5})`).FindAllString(out, -1)
	if len(macs) == 0 {
		t.Fatalf("arping printed no MAC:\n%s", out)
	}
	for _, m := range macs {
		if !strings.EqualFold(m, want4) && !strings.EqualFold(m, "02:00:00:00:00:c0") && !strings.EqualFold(m, "ff:ff:ff:ff:ff:ff") {
			t.Errorf("arping saw %s, want only the owner %s:\n%s", m, want4, out)
		}
	}
	if !strings.Contains(strings.ToLower(out), want4) {
		t.Errorf("arping did not see owner %s:\n%s", want4, out)
	}

	want6 := netnslab.NodeMAC(expectedOwner(vip6, nodeNames(3)))
	out, err = netnslab.Output("ip", "netns", "exec", l.NS("c"), "ndisc6", "-r", "3", "-w", "1000", netnslab.VIP6, "eth0")
	if err != nil {
		t.Fatalf("ndisc6: %v\n%s", err, out)
	}
	if !strings.Contains(strings.ToLower(out), want6) {
		t.Errorf("ndisc6 did not report owner %s:\n%s", want6, out)
	}
	t.Logf("arping: owner of %s is %s; ndisc6: owner of %s is %s", netnslab.VIP4, want4, netnslab.VIP6, want6)
}

// TestFailoverSendsGratuitousBurst kills the owner of the IPv4 VIP with SIGKILL; tcpdump in the
// client namespace must capture the new owner's gratuitous ARP burst, and the client sees the new
// MAC within a second or so.
func TestFailoverSendsGratuitousBurst(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	netnslab.EnsureTools(t, "tcpdump")
	l, obs := newLab(t)
	startCluster(t, l, obs)
	owner := expectedOwner(vip4, nodeNames(3))
	var rest []string
	for _, n := range nodeNames(3) {
		if n != fmt.Sprintf("n%d", owner) {
			rest = append(rest, n)
		}
	}
	next := expectedOwner(vip4, rest)

	// Capture only the next owner's gratuitous ARP (sender IP = target IP, broadcast).
	td := exec.Command("ip", "netns", "exec", l.NS("c"), "tcpdump", "-l", "-n", "-e", "-i", "eth0", "-c", "3",
		"arp and ether src "+netnslab.NodeMAC(next)+" and ether dst ff:ff:ff:ff:ff:ff and arp[14:4] = arp[24:4]")
	var buf testenv.Buffer
	td.Stdout, td.Stderr = &buf, &buf
	if err := td.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = td.Process.Kill(); _ = td.Wait() })
	// tcpdump says "listening on eth0, …" on stderr once its capture and filter are in place.
	testenv.Eventually(t, 10*time.Second, "tcpdump listening", func() error {
		if out := buf.String(); !strings.Contains(out, "listening on") {
			return fmt.Errorf("tcpdump said %q", out)
		}
		return nil
	})

	start := time.Now()
	l.Signal(owner, syscall.SIGKILL)
	_ = l.Wait(owner)
	s, ok := obs.WaitMAC(vip4, start, 5*time.Second, func(m string) bool { return m == netnslab.NodeMAC(next) })
	if !ok {
		t.Fatalf("client never saw the new owner n%d; sightings %v\nn%d log:\n%s", next, obs.Since(vip4, start), next, l.Log(next))
	}
	t.Logf("SIGKILL of n%d → client saw n%d's MAC after %v", owner, next, s.At.Sub(start))
	if d := s.At.Sub(start); d > 3*time.Second {
		t.Errorf("failover took %v", d)
	}
	done := make(chan error, 1)
	go func() { done <- td.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatalf("tcpdump did not capture 3 gratuitous ARPs:\n%s", buf.String())
	}
	got := buf.String()
	if n := strings.Count(strings.ToLower(got), netnslab.NodeMAC(next)+" >"); n < 3 {
		t.Errorf("want 3 gratuitous ARPs from %s, tcpdump:\n%s", netnslab.NodeMAC(next), got)
	}
	t.Logf("tcpdump:\n%s", got)
}

// suspicionTimeout is memberlist's suspicion timeout with membership.Config (SuspicionMult 2 ×
// max(1, log10 n) × ProbeInterval 150ms, n < 10). A takeover by failure detection cannot come
// sooner than a failed probe (ProbeInterval) plus this (450ms; measured 461ms at best), so a
// takeover faster than this came from the leave message.
const suspicionTimeout = 300 * time.Millisecond

// TestGracefulStopHandsOver: SIGTERM leaves the membership first, so the next owner takes over on
// the leave message, well within the suspicion timeout; and a client that resolved the VIP a
// moment before (its neighbour entry changed less than the kernel's ARP locktime, 1s, ago) moves
// its entry to the new owner by the gratuitous ARP / unsolicited NA alone: Linux ignores a
// plain ARP reply that would change an entry within locktime, but not a gratuitous one.
func TestGracefulStopHandsOver(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	for _, vip := range []netip.Addr{vip4, vip6} {
		t.Run(vip.String(), func(t *testing.T) {
			l, obs := newLab(t)
			startCluster(t, l, obs)
			owner := expectedOwner(vip, nodeNames(3))
			var rest []string
			for _, n := range nodeNames(3) {
				if n != fmt.Sprintf("n%d", owner) {
					rest = append(rest, n)
				}
			}
			next := expectedOwner(vip, rest)
			fam := "-4"
			if vip.Is6() {
				fam = "-6"
			}
			// The client has just resolved the VIP to the owner (its entry changed now).
			l.Run("ip", "-n", l.NS("c"), fam, "neigh", "replace", vip.String(), "lladdr", netnslab.NodeMAC(owner), "dev", "eth0", "nud", "reachable")
			start := time.Now()
			l.Signal(owner, syscall.SIGTERM)
			// The client's own neighbour entry, as its traffic would use it.
			var entryAt time.Duration
			var entry string
			for time.Since(start) < 3*time.Second {
				entry = netnslab.Run(t, "ip", "-n", l.NS("c"), fam, "neigh", "show", vip.String(), "dev", "eth0")
				if strings.Contains(entry, "lladdr "+netnslab.NodeMAC(next)) {
					entryAt = time.Since(start)
					break
				}
				time.Sleep(5 * time.Millisecond) // polling a kernel table: the measurement's resolution
			}
			s, ok := obs.WaitMAC(vip, start, 5*time.Second, func(m string) bool { return m == netnslab.NodeMAC(next) })
			if !ok {
				t.Fatalf("no takeover by n%d after SIGTERM of n%d; sightings %v", next, owner, obs.Since(vip, start))
			}
			if err := l.Wait(owner); err != nil {
				t.Errorf("speaker exited with %v\n%s", err, l.Log(owner))
			}
			took := s.At.Sub(start)
			t.Logf("SIGTERM of n%d → n%d answered after %v; the client's neighbour entry moved after %v", owner, next, took.Round(time.Millisecond), entryAt.Round(time.Millisecond))
			if took > suspicionTimeout {
				t.Errorf("graceful handover took %v, want under the suspicion timeout %v: the next owner waited for failure detection, not the leave", took, suspicionTimeout)
			}
			if entryAt == 0 || entryAt > suspicionTimeout {
				t.Errorf("the client's neighbour entry did not move to n%d (%s) within %v of SIGTERM (got %v); last: %q\nn%d log:\n%s",
					next, netnslab.NodeMAC(next), suspicionTimeout, entryAt, entry, next, l.Log(next))
			}
		})
	}
}

// TestPartitionedOwnerStopsAnswering cuts the owner's link. The cut-off speaker loses quorum and
// stops announcing (its own metrics say so) while the majority side elects a new owner; after
// healing, exactly one node announces and answers.
func TestPartitionedOwnerStopsAnswering(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	l, obs := newLab(t)
	startCluster(t, l, obs)
	owner := expectedOwner(vip4, nodeNames(3))

	start := time.Now()
	l.SetLink(owner, false)
	fenced := netnslab.Eventually(5*time.Second, func() bool {
		m, err := l.Metrics(owner)
		return err == nil && netnslab.Metric(m, "metalgate_speaker_quorum ") == "0" && !strings.Contains(m, "metalgate_speaker_announced{")
	})
	fencedAfter := time.Since(start)
	if !fenced {
		m, _ := l.Metrics(owner)
		t.Fatalf("cut-off n%d still announces after 5s:\n%s\nlog:\n%s", owner, grep(m, "metalgate_speaker_"), l.Log(owner))
	}
	s, ok := obs.WaitMAC(vip4, start, 5*time.Second, func(m string) bool { return m != netnslab.NodeMAC(owner) })
	if !ok {
		t.Fatalf("majority side did not take over; sightings %v", obs.Since(vip4, start))
	}
	t.Logf("partition of n%d: fenced (quorum=0, nothing announced) within %v; client saw %s after %v", owner, fencedAfter.Round(time.Millisecond), s.MAC, s.At.Sub(start).Round(time.Millisecond))
	// The order matters more than the speed: the cut-off node must stop before the majority
	// starts (else, with a partial partition where clients still reach both, two nodes answer).
	// Both times come from the speakers' own logs (same host clock).
	fenceAt, ok1 := logTime(l.Log(owner), start, "quorum changed", `"quorum":false`)
	next := netnslab.NodeOfMAC(s.MAC)
	takeAt, ok2 := logTime(l.Log(next), start, "announcing", netnslab.VIP4)
	if !ok1 || !ok2 {
		t.Fatalf("log lines missing: fence %v takeover %v", ok1, ok2)
	}
	t.Logf("fenced %v after the cut, majority took over %v after the cut (margin %v)",
		fenceAt.Sub(start).Round(time.Millisecond), takeAt.Sub(start).Round(time.Millisecond), takeAt.Sub(fenceAt).Round(time.Millisecond))
	if !fenceAt.Before(takeAt) {
		t.Errorf("n%d fenced at %v, after n%d took over at %v: two nodes answered meanwhile", owner, fenceAt, next, takeAt)
	}

	// Heal: memberlist merges again and from then on exactly one node announces the VIP and
	// exactly one MAC answers. Which node is not fixed (docs/speaker.md "Sticky ownership"):
	// the fenced node gave its claim up, so the majority's owner keeps the VIP (no second
	// move); if a claim the fenced node sent before the cut still reaches the others after the
	// merge, two nodes claim it for a moment and the one of higher weight, the original owner,
	// takes it back after its hold-down. Both are safe; two answering nodes never are.
	l.SetLink(owner, true)
	healed := time.Now()
	if !netnslab.Eventually(15*time.Second, func() bool {
		m, err := l.Metrics(owner)
		return err == nil && netnslab.Metric(m, "metalgate_speaker_quorum ") == "1"
	}) {
		t.Fatalf("n%d did not rejoin (quorum) within 15s of healing\nlog:\n%s", owner, l.Log(owner))
	}
	var announcer int
	if !netnslab.Eventually(15*time.Second, func() bool {
		announcer = 0
		for i := 1; i <= 3; i++ {
			m, err := l.Metrics(i)
			if err != nil {
				return false
			}
			if strings.Contains(grep(m, "metalgate_speaker_announced{"), `vip="`+vip4.String()+`"`) {
				if announcer != 0 {
					return false // two announce: not settled (hold-down) or wrong
				}
				announcer = i
			}
		}
		return announcer != 0
	}) {
		var state []string
		for i := 1; i <= 3; i++ {
			m, err := l.Metrics(i)
			state = append(state, fmt.Sprintf("n%d (%v): %s", i, err, grep(m, "metalgate_speaker_announced{")+" "+grep(m, "metalgate_speaker_quorum ")))
		}
		t.Fatalf("no single announcer within 15s of healing: %v; sightings since %v\nn%d log:\n%s\nn%d log:\n%s", state,
			obs.Since(vip4, healed)[:min(3, len(obs.Since(vip4, healed)))], owner, l.Log(owner), next, l.Log(next))
	}
	t.Logf("after healing n%d announces (original owner n%d, majority's n%d)", announcer, owner, next)
	// A grace of 500ms for replies already in flight from a node that gave the address up,
	// then a 1s window in which exactly one MAC, the announcer's, may answer: both are the
	// behaviour under test ("from then on"), not waits for a result.
	time.Sleep(500 * time.Millisecond)
	probe := time.Now()
	time.Sleep(time.Second)
	macs := map[string]int{}
	for _, s := range obs.Since(vip4, probe) {
		macs[s.MAC]++
	}
	if len(macs) != 1 || macs[netnslab.NodeMAC(announcer)] == 0 {
		t.Errorf("after healing, replies from %v, want exactly one MAC, n%d's (%s)", macs, announcer, netnslab.NodeMAC(announcer))
	}
}

// logTime returns the time of the first JSON log line at or after since whose msg is msg and
// that contains substr.
func logTime(log string, since time.Time, msg, substr string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			TS  time.Time `json:"ts"`
			Msg string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != msg || !strings.Contains(line, substr) {
			continue
		}
		if at := e.TS; !at.Before(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

func grep(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRespondersSurviveLinkFlap: when the link goes down the ARP socket fails ("network is
// down") and the NDP socket loses its link-local address; both responders reopen and answer
// again once the link is back.
func TestRespondersSurviveLinkFlap(t *testing.T) {
	netnslab.SkipUnlessRoot(t)
	l := netnslab.New(t, 1)
	obs, err := netnslab.Observe(l.NS("c"), vip4, vip6, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	start := time.Now()
	l.StartSpeaker(1, l.StaticConfig(netnslab.VIP4, netnslab.VIP6))
	for _, vip := range []netip.Addr{vip4, vip6} {
		if _, ok := obs.WaitMAC(vip, start, 20*time.Second, func(m string) bool { return m == netnslab.NodeMAC(1) }); !ok {
			t.Fatalf("no answer for %s before the flap\n%s", vip, l.Log(1))
		}
	}
	l.Run("ip", "-n", l.NodeNS(1), "link", "set", "eth0", "down")
	time.Sleep(500 * time.Millisecond) // the flap: how long the link stays down is the scenario
	l.Run("ip", "-n", l.NodeNS(1), "link", "set", "eth0", "up")
	up := time.Now()
	for _, vip := range []netip.Addr{vip4, vip6} {
		s, ok := obs.WaitMAC(vip, up, 10*time.Second, func(m string) bool { return m == netnslab.NodeMAC(1) })
		if !ok {
			m, _ := l.Metrics(1)
			t.Fatalf("no answer for %s after the flap\n%s\n%s", vip, grep(m, "metalgate_speaker_l2"), l.Log(1))
		}
		t.Logf("%s answered again %v after link up", vip, s.At.Sub(up).Round(time.Millisecond))
	}
	m, _ := l.Metrics(1)
	t.Logf("socket errors:\n%s", grep(m, "socket_errors_total{"))
}
