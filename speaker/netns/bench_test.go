package netns

import (
	"flag"
	"fmt"
	"github.com/metalgate/metalgate/internal/netnslab"
	"github.com/metalgate/metalgate/internal/nsexec"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/arp"
)

var (
	benchFailover = flag.Bool("bench-failover", false, "run the layer-2 failover benchmark (root)")
	benchRuns     = flag.Int("bench-runs", 10, "failover runs per address family")
	benchScale    = flag.Bool("bench-scale", false, "run the 10,000-VIP memory and ARP latency measurement (root)")
)

// TestBenchFailover measures, for each family, the time from SIGKILL of the owning speaker to
// the first ARP reply / neighbour advertisement with the new owner's MAC seen in the client
// namespace (gratuitous or answering the client's 20ms probes). Its last line is
// "RESULT l2_failover_median_ms_v4=<n> l2_failover_median_ms_v6=<n>".
func TestBenchFailover(t *testing.T) {
	if !*benchFailover {
		t.Skip("benchmark: run with -args -bench-failover")
	}
	l, obs := newLab(t)
	startCluster(t, l, obs)
	cfg := l.StaticConfig(netnslab.VIP4, netnslab.VIP6)
	medians := map[string]float64{}
	for _, fam := range []struct {
		name string
		vip  netip.Addr
	}{{"v4", vip4}, {"v6", vip6}} {
		var took []time.Duration
		for run := 0; run < *benchRuns; run++ {
			owner := expectedOwner(fam.vip, nodeNames(3))
			// Settled: the client sees the elected owner.
			settle := time.Now()
			if _, ok := obs.WaitMAC(fam.vip, settle, 20*time.Second, func(m string) bool { return m == netnslab.NodeMAC(owner) }); !ok {
				t.Fatalf("%s run %d: owner n%d not seen; sightings since: %v\n%s", fam.name, run, owner, obs.Since(fam.vip, settle), l.Log(owner))
			}
			time.Sleep(500 * time.Millisecond) // measure from a steady state (a benchmark's setup)
			start := time.Now()
			l.Signal(owner, syscall.SIGKILL)
			s, ok := obs.WaitMAC(fam.vip, start, 10*time.Second, func(m string) bool { return m != netnslab.NodeMAC(owner) })
			_ = l.Wait(owner)
			if !ok {
				t.Fatalf("%s run %d: no takeover from n%d", fam.name, run, owner)
			}
			d := s.At.Sub(start)
			took = append(took, d)
			fmt.Printf("failover %s run %2d: n%d killed, %s seen after %v\n", fam.name, run+1, owner, s.MAC, d.Round(time.Millisecond))
			l.StartSpeaker(owner, cfg)
			// The restarted node gets its address back after the hold-down.
			back := time.Now()
			if _, ok := obs.WaitMAC(fam.vip, back, 20*time.Second, func(m string) bool { return m == netnslab.NodeMAC(owner) }); !ok {
				t.Fatalf("%s run %d: n%d did not take its address back\n%s", fam.name, run, owner, l.Log(owner))
			}
			time.Sleep(time.Second) // the next run starts from a steady state (a benchmark's setup)
		}
		slices.Sort(took)
		med := took[len(took)/2]
		if len(took)%2 == 0 {
			med = (took[len(took)/2-1] + took[len(took)/2]) / 2
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Printf("failover %s: runs=%d min=%.1fms median=%.1fms max=%.1fms\n", fam.name, len(took), ms(took[0]), ms(med), ms(took[len(took)-1]))
		medians[fam.name] = ms(med)
	}
	fmt.Printf("RESULT l2_failover_median_ms_v4=%.0f l2_failover_median_ms_v6=%.0f\n", medians["v4"], medians["v6"])
}

// TestScaleTenThousandVIPs runs one speaker announcing 10,000 IPv4 addresses and reports its
// memory and how long an ARP request takes to be answered.
func TestScaleTenThousandVIPs(t *testing.T) {
	if !*benchScale {
		t.Skip("measurement: run with -args -bench-scale")
	}
	const n = 10000
	l := netnslab.New(t, 1)
	var vips []string
	for i := range n {
		vips = append(vips, fmt.Sprintf("10.100.%d.%d", i/250, i%250+1))
	}
	for _, count := range []int{1, n} {
		start := time.Now()
		l.StartSpeaker(1, l.StaticConfig(vips[:count]...))
		if !netnslab.Eventually(60*time.Second, func() bool {
			m, err := l.Metrics(1)
			return err == nil && strings.Count(m, "metalgate_speaker_announced{") == count
		}) {
			t.Fatalf("speaker never announced %d addresses\n%s", count, l.Log(1))
		}
		ready := time.Since(start)
		time.Sleep(2 * time.Second) // gratuitous bursts done: RSS and latency are measured at rest
		rss := vmRSS(l.PID(1))
		lat := arpLatency(t, l.NS("c"), vips[:count], 500)
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		fmt.Printf("scale vips=%d: announced after %v, VmRSS=%s, ARP answer over %d requests: min=%v p50=%v p99=%v max=%v\n",
			count, ready.Round(time.Millisecond), rss, len(lat), p(0), p(0.5), p(0.99), p(1))
		l.Signal(1, syscall.SIGTERM)
		_ = l.Wait(1)
	}
}

func vmRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	return "?"
}

// arpLatency sends count ARP requests from the client namespace for addresses picked across
// targets, one at a time, and returns the request → reply times.
func arpLatency(t *testing.T, ns string, targets []string, count int) []time.Duration {
	t.Helper()
	var c *arp.Client
	if err := nsexec.InNS(ns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []time.Duration
	for i := range count {
		ip := netip.MustParseAddr(targets[(i*7919)%len(targets)])
		sent := time.Now()
		if err := c.Request(ip); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			p, _, err := c.Read()
			if err != nil {
				t.Fatalf("no ARP reply for %s: %v", ip, err)
			}
			if p.Operation == arp.OperationReply && p.SenderIP == ip {
				out = append(out, time.Since(sent))
				break
			}
		}
	}
	return out
}
