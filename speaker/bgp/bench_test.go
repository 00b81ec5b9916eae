package bgp

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/netnslab"
)

var (
	benchWithdraw = flag.Bool("bgp.bench", false, "run the FRR withdrawal benchmark (root; see bench/bench-bgp.sh)")
	benchRuns     = flag.Int("bgp.bench.runs", 5, "runs per scenario of the withdrawal benchmark")
	benchVIPs     = flag.Int("bgp.bench.vips", 10000, "VIPs in the bulk advertisement benchmark (0 skips it)")
)

// TestFRRWithdrawBench measures how long FRR keeps a node's route after the
// node fails, per failure kind, with BFD (100ms x 3) and with the hold timer
// alone (3s, keepalive 1s), and how long FRR takes to learn many VIPs. It
// prints a table and, as its last line,
//
//	RESULT bgp_withdraw_median_ms_bfd=<n> bgp_withdraw_median_ms_holdtimer=<n>
//
// where the medians pool the silent failures (frozen process, cut link).
func TestFRRWithdrawBench(t *testing.T) {
	if !*benchWithdraw {
		t.Skip("benchmark: run with -bgp.bench (see speaker/bgp/bench/bench-bgp.sh)")
	}
	l := newLab(t)
	mon := l.MonitorRoutes(t)
	bfdPeer := labPeer(srcBFD)
	bfdPeer.BFD = &BFDProfile{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, DetectMultiplier: 3}
	type scenario struct {
		name, mode, src, vip string
		peer                 Peer
		cause                func(h *helper)
		silent               bool
	}
	linkDown := func(*helper) { l.SetSpeakerLink(t, false) }
	t.Cleanup(func() { runQuiet(t, "ip", "-n", l.SpeakerNS(), "link", "set", "eth0", "up") })
	scenarios := []scenario{
		{"SIGKILL", "holdtimer", srcEBGP, "100.64.0.11", labPeer(srcEBGP), func(h *helper) { h.signal(syscall.SIGKILL) }, false},
		{"SIGSTOP", "holdtimer", srcEBGP, "100.64.0.11", labPeer(srcEBGP), func(h *helper) { h.signal(syscall.SIGSTOP) }, true},
		{"link cut", "holdtimer", srcEBGP, "100.64.0.11", labPeer(srcEBGP), linkDown, true},
		{"SIGKILL", "bfd", srcBFD, "100.64.0.14", bfdPeer, func(h *helper) { h.signal(syscall.SIGKILL) }, false},
		{"SIGSTOP", "bfd", srcBFD, "100.64.0.14", bfdPeer, func(h *helper) { h.signal(syscall.SIGSTOP) }, true},
		{"link cut", "bfd", srcBFD, "100.64.0.14", bfdPeer, linkDown, true},
	}
	pooled := map[string][]time.Duration{}
	var table []string
	for _, sc := range scenarios {
		var ds []time.Duration
		for i := 0; i < *benchRuns; i++ {
			h := l.startHelper(t, helperConfig{RouterID: sc.src, Peers: []Peer{sc.peer}, Ads: ads(sc.vip + "/32")})
			l.waitRoute(t, sc.vip+"/32", sc.src)
			if sc.peer.BFD != nil {
				l.waitBFDUp(t, sc.src)
			}
			d := l.measureWithdraw(t, mon, sc.vip, func() { sc.cause(h) }, 20*time.Second)
			ds = append(ds, d)
			h.kill()
			l.SetSpeakerLink(t, true)
			waitFor(t, "FRR to drop the session", 20*time.Second, func() bool { return l.NeighborState(t, sc.src) != "Established" })
		}
		if sc.silent {
			pooled[sc.mode] = append(pooled[sc.mode], ds...)
		}
		table = append(table, fmt.Sprintf("%-9s %-10s %8d %8d %8d   %v", sc.mode, sc.name, ms(minD(ds)), ms(median(ds)), ms(maxD(ds)), ds))
	}
	fmt.Printf("\nWithdrawal time: failure -> FRR deletes the kernel route (ip monitor route), %d runs each\n", *benchRuns)
	fmt.Printf("%-9s %-10s %8s %8s %8s   %s\n", "mode", "failure", "min ms", "med ms", "max ms", "runs")
	for _, line := range table {
		fmt.Println(line)
	}
	if *benchVIPs > 0 {
		benchBulk(t, l, *benchVIPs)
	}
	fmt.Printf("RESULT bgp_withdraw_median_ms_bfd=%d bgp_withdraw_median_ms_holdtimer=%d\n", ms(median(pooled["bfd"])), ms(median(pooled["holdtimer"])))
}

// benchBulk advertises n /32s and reports how long FRR takes to have them
// all, from the helper's start (session set-up included) and from the
// session's establishment.
func benchBulk(t *testing.T, l *lab, n int) {
	var many []Advertisement
	for i := 0; i < n; i++ {
		many = append(many, Advertisement{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 65, byte(i >> 8), byte(i)}), 32)})
	}
	start := time.Now()
	h := l.startHelper(t, helperConfig{RouterID: srcEBGP, Peers: []Peer{labPeer(srcEBGP)}, Ads: many})
	var established time.Time
	waitFor(t, fmt.Sprintf("FRR to learn %d prefixes", n), 120*time.Second, func() bool {
		var sum struct {
			Peers map[string]struct {
				State  string `json:"state"`
				PfxRcd int    `json:"pfxRcd"`
			} `json:"peers"`
		}
		out := l.Vtysh(t, "show bgp ipv4 unicast summary json")
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("parse %q: %v", out, err)
		}
		p := sum.Peers[srcEBGP]
		if established.IsZero() && p.State == "Established" {
			established = time.Now()
		}
		return p.PfxRcd == n
	})
	all := time.Since(start)
	fmt.Printf("\nBulk: %d VIPs, FRR has them all %d ms after the speaker process started (%d ms after the session came up)\n",
		n, ms(all), ms(all-established.Sub(start)))
	h.kill()
}

// runQuiet runs a command in a cleanup, where failing the test is too late.
func runQuiet(t testing.TB, args ...string) {
	out, err := netnslab.Output(args...)
	if err != nil {
		t.Logf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minD(ds []time.Duration) time.Duration { return slices.Min(ds) }
func maxD(ds []time.Duration) time.Duration { return slices.Max(ds) }
