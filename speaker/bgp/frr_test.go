package bgp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/netnslab"
	"github.com/metalgate/metalgate/internal/testenv"
)

func labPeer(src string) Peer {
	return Peer{
		Name: "router", MyASN: 64512, PeerASN: 64500,
		Address:       netip.MustParseAddr(routerV4),
		SourceAddress: netip.MustParseAddr(src),
		HoldTime:      3 * time.Second, KeepaliveTime: time.Second, ConnectTime: time.Second,
	}
}

func ads(prefixes ...string) []Advertisement {
	var out []Advertisement
	for _, p := range prefixes {
		out = append(out, Advertisement{Prefix: netip.MustParsePrefix(p)})
	}
	return out
}

// waitFor waits until cond holds (testenv.Eventually).
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, timeout, what, testenv.True(cond))
}

func (l *lab) waitRoute(t testing.TB, prefix, src string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("FRR to learn %s from %s", prefix, src), 30*time.Second, func() bool { return l.Has(t, prefix, src) })
}

func (l *lab) waitBFDUp(t testing.TB, src string) {
	t.Helper()
	waitFor(t, "BFD session up with "+src, 30*time.Second, func() bool {
		out := l.Vtysh(t, "show bfd peer "+src+" json")
		return strings.Contains(out, `"status":"up"`)
	})
}

func TestFRR(t *testing.T) {
	l := newLab(t)
	mon := l.MonitorRoutes(t)

	t.Run("eBGP IPv4 and IPv6 with communities and aggregation", func(t *testing.T) {
		vip := Advertisement{Prefix: netip.MustParsePrefix("100.64.0.10/32"), Communities: []uint32{65000<<16 | 100}, LargeCommunities: []LargeCommunity{{64512, 1, 2}}}
		cfg := helperConfig{RouterID: srcEBGP, Peers: []Peer{labPeer(srcEBGP)}, Ads: append([]Advertisement{vip,
			{Prefix: netip.MustParsePrefix("100.64.1.0/24")}},
			ads("2001:db8:100::10/128")...)}
		h := l.startHelper(t, cfg)
		for _, p := range []string{"100.64.0.10/32", "100.64.1.0/24", "2001:db8:100::10/128"} {
			l.waitRoute(t, p, srcEBGP)
		}
		r := l.Route(t, "100.64.0.10/32").Paths[0]
		if r.Community == nil || r.Community.String != "65000:100" || r.LargeCommunity == nil || r.LargeCommunity.String != "64512:1:2" {
			t.Errorf("communities on FRR's route: %+v %+v, want 65000:100 and 64512:1:2", r.Community, r.LargeCommunity)
		}
		r6 := l.Route(t, "2001:db8:100::10/128").Paths[0]
		if len(r6.Nexthops) == 0 || r6.Nexthops[0].IP != nodeV6 {
			t.Errorf("IPv6 next hop on FRR = %+v, want %s", r6.Nexthops, nodeV6)
		}
		// zebra installed both in the kernel.
		waitFor(t, "kernel routes", 10*time.Second, func() bool {
			v4 := netnslab.Run(t, "ip", "-n", l.RouterNS(), "route", "show", "100.64.0.10/32")
			v6 := netnslab.Run(t, "ip", "-n", l.RouterNS(), "-6", "route", "show", "2001:db8:100::10/128")
			return strings.Contains(v4, "via "+srcEBGP) && strings.Contains(v6, "via "+nodeV6)
		})
		mon.Drain()
		start := time.Now()
		h.signal(syscall.SIGKILL)
		at, ok := mon.WaitDeleted("100.64.0.10", 10*time.Second)
		if !ok {
			t.Fatal("route not withdrawn within 10s of SIGKILL")
		}
		t.Logf("SIGKILL: route withdrawn after %v", at.Sub(start).Round(time.Millisecond))
	})

	t.Run("IPv4 and IPv6 over an IPv6 session", func(t *testing.T) {
		p := labPeer(nodeV6)
		p.Address = netip.MustParseAddr(routerV6)
		h := l.startHelper(t, helperConfig{RouterID: srcBFD, Peers: []Peer{p}, Ads: ads("100.64.0.16/32", "2001:db8:100::16/128")})
		l.waitRoute(t, "100.64.0.16/32", nodeV6)
		l.waitRoute(t, "2001:db8:100::16/128", nodeV6)
		// The IPv4 next hop is the node's primary IPv4 address on the
		// interface that holds the session's source address.
		waitFor(t, "kernel routes", 10*time.Second, func() bool {
			v4 := netnslab.Run(t, "ip", "-n", l.RouterNS(), "route", "show", "100.64.0.16/32")
			v6 := netnslab.Run(t, "ip", "-n", l.RouterNS(), "-6", "route", "show", "2001:db8:100::16/128")
			return strings.Contains(v4, "via "+srcBFD) && strings.Contains(v6, "via "+nodeV6)
		})
		h.kill()
	})

	t.Run("iBGP local preference", func(t *testing.T) {
		p := labPeer(srcIBGP)
		p.MyASN = 64500
		h := l.startHelper(t, helperConfig{RouterID: srcIBGP, Peers: []Peer{p}, Ads: []Advertisement{{Prefix: netip.MustParsePrefix("100.64.0.12/32"), LocalPref: 200}}})
		l.waitRoute(t, "100.64.0.12/32", srcIBGP)
		if got := l.Route(t, "100.64.0.12/32").Paths[0].LocPrf; got != 200 {
			t.Errorf("locPrf = %d, want 200", got)
		}
		h.kill()
	})

	t.Run("TCP MD5", func(t *testing.T) {
		p := labPeer(srcMD5)
		p.Password = "wrong"
		h := l.startHelper(t, helperConfig{RouterID: srcMD5, Peers: []Peer{p}, Ads: ads("100.64.0.13/32")})
		// Several connect attempts (1s apart) must all fail: the 5s window is the behaviour
		// under test; it looks every 200ms (each look runs vtysh).
		testenv.HoldsEvery(t, 200*time.Millisecond, 5*time.Second, "no session with a wrong password", func() error {
			if s := l.NeighborState(t, srcMD5); s == "Established" {
				return errors.New("session established")
			}
			return nil
		})
		h.kill()
		p.Password = "s3cret"
		h = l.startHelper(t, helperConfig{RouterID: srcMD5, Peers: []Peer{p}, Ads: ads("100.64.0.13/32")})
		l.waitRoute(t, "100.64.0.13/32", srcMD5)
		h.kill()
	})

	t.Run("frozen speaker: hold timer without BFD", func(t *testing.T) {
		h := l.startHelper(t, helperConfig{RouterID: srcEBGP, Peers: []Peer{labPeer(srcEBGP)}, Ads: ads("100.64.0.11/32")})
		l.waitRoute(t, "100.64.0.11/32", srcEBGP)
		d := l.measureWithdraw(t, mon, "100.64.0.11", func() { h.signal(syscall.SIGSTOP) }, 10*time.Second) // SIGSTOP
		t.Logf("SIGSTOP without BFD: withdrawn after %v (hold time 3s)", d)
		if d < 2*time.Second || d > 5*time.Second {
			t.Errorf("withdrawn after %v, want about the 3s hold time", d)
		}
		h.kill()
	})

	t.Run("frozen speaker and cut link with BFD", func(t *testing.T) {
		p := labPeer(srcBFD)
		p.BFD = &BFDProfile{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, DetectMultiplier: 3}
		cfg := helperConfig{RouterID: srcBFD, Peers: []Peer{p}, Ads: ads("100.64.0.14/32")}
		h := l.startHelper(t, cfg)
		l.waitRoute(t, "100.64.0.14/32", srcBFD)
		l.waitBFDUp(t, srcBFD)
		d := l.measureWithdraw(t, mon, "100.64.0.14", func() { h.signal(syscall.SIGSTOP) }, 10*time.Second)
		t.Logf("SIGSTOP with BFD: withdrawn after %v", d)
		if d > time.Second {
			t.Errorf("withdrawn after %v with BFD 100ms x 3, want under 1s", d)
		}
		h.kill()

		// This time the helper serves its metrics: metalgate_bgp_bfd_session_up follows the
		// session, 1 while FRR sees it up, 0 once the cut link took it down.
		cfg.MetricsSocket = filepath.Join(t.TempDir(), "metrics.sock")
		h = l.startHelper(t, cfg)
		l.waitRoute(t, "100.64.0.14/32", srcBFD)
		l.waitBFDUp(t, srcBFD)
		bfdMetric := func(want float64) func() bool {
			return func() bool {
				v, ok, err := bfdUp(cfg.MetricsSocket, p.Name)
				return err == nil && ok && v == want
			}
		}
		waitFor(t, "metalgate_bgp_bfd_session_up 1", 10*time.Second, bfdMetric(1))
		t.Cleanup(func() { l.SetSpeakerLink(t, true) })
		d = l.measureWithdraw(t, mon, "100.64.0.14", func() { l.SetSpeakerLink(t, false) }, 10*time.Second)
		t.Logf("link cut with BFD: withdrawn after %v", d)
		if d > time.Second {
			t.Errorf("withdrawn after %v with BFD 100ms x 3, want under 1s", d)
		}
		waitFor(t, "metalgate_bgp_bfd_session_up 0 with the link cut", 10*time.Second, bfdMetric(0))
		l.SetSpeakerLink(t, true)
		h.kill()
	})

	// Without graceful restart, a graceful stop (SIGTERM -> Close) ends the session with a
	// NOTIFICATION (Cease) before the socket closes: the router withdraws the node's routes
	// the moment it reads it, not after the hold time, and never keeps them as stale.
	t.Run("graceful stop without graceful restart withdraws at once", func(t *testing.T) {
		h := l.startHelper(t, helperConfig{RouterID: srcEBGP, Peers: []Peer{labPeer(srcEBGP)}, Ads: ads("100.64.0.17/32")})
		l.waitRoute(t, "100.64.0.17/32", srcEBGP)
		d := l.measureWithdraw(t, mon, "100.64.0.17", func() { h.signal(syscall.SIGTERM) }, 10*time.Second)
		<-h.done
		if code := h.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("helper exited with %d after SIGTERM", code)
		}
		nb := l.Vtysh(t, "show bgp neighbors "+srcEBGP+" json")
		t.Logf("SIGTERM without graceful restart: withdrawn after %v (hold time 3s); FRR: %s", d, lastReset(nb))
		if d > time.Second {
			t.Errorf("withdrawn after %v, want at once (well under the 3s hold time)", d)
		}
		if !strings.Contains(nb, "Notification received") {
			t.Errorf("FRR's last reset is %q, want a NOTIFICATION received from the speaker (a clean withdraw, not a closed socket)", lastReset(nb))
		}
	})

	t.Run("graceful restart keeps the route", func(t *testing.T) {
		p := labPeer(srcGR)
		p.GracefulRestart = true
		cfg := helperConfig{RouterID: srcGR, Peers: []Peer{p}, Ads: ads("100.64.0.15/32")}
		h := l.startHelper(t, cfg)
		l.waitRoute(t, "100.64.0.15/32", srcGR)
		waitFor(t, "GR capability negotiated", 10*time.Second, func() bool {
			return strings.Contains(l.Vtysh(t, "show bgp neighbors "+srcGR+" json"), `"gracefulRestart":"advertisedAndReceived"`)
		})
		// The speaker preserves forwarding across its restarts (F bit), so
		// FRR keeps the stale routes until our End-of-RIB.
		if nb := l.Vtysh(t, "show bgp neighbors "+srcGR+" json"); !strings.Contains(nb, `"fBit":true`) {
			t.Errorf("FRR did not receive the Forwarding State bit:\n%s", nb)
		}
		mon.Drain()
		var missing atomic.Int32
		stop := make(chan struct{})
		polled := make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					polled <- n
					return
				case <-time.After(50 * time.Millisecond):
				}
				n++
				if !l.Has(t, "100.64.0.15/32", srcGR) {
					missing.Add(1)
				}
			}
		}()
		// Restart: a graceful stop (SIGTERM -> Close) and a crash (SIGKILL).
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			h.signal(sig)
			<-h.done
			waitFor(t, "FRR to notice the restart", 10*time.Second, func() bool { return l.NeighborState(t, srcGR) != "Established" })
			stale := l.Route(t, "100.64.0.15/32")
			h = l.startHelper(t, cfg)
			waitFor(t, "session back", 30*time.Second, func() bool { return l.NeighborState(t, srcGR) == "Established" })
			waitFor(t, "route no longer stale", 10*time.Second, func() bool {
				r := l.Route(t, "100.64.0.15/32")
				return len(r.Paths) == 1 && !r.Paths[0].Stale
			})
			t.Logf("signal %d: while the speaker was down FRR had %+v", sig, stale.Paths)
		}
		close(stop)
		n := <-polled
		if m := missing.Load(); m != 0 {
			t.Errorf("route missing in %d of %d polls during graceful restarts", m, n)
		}
		// The route monitor saw every change of zebra's kernel routes: a
		// withdrawal, however short, would show as a deletion.
		if mon.SawDeleted("100.64.0.15") {
			t.Error("the kernel route was deleted during graceful restarts")
		}
		t.Logf("route present in all %d vtysh polls across two restarts, kernel route never deleted", n)

		// A speaker that comes back without the VIP: End-of-RIB makes FRR
		// drop the stale route at once, not after the 120s restart time.
		h.kill()
		waitFor(t, "FRR to notice the restart", 10*time.Second, func() bool { return l.NeighborState(t, srcGR) != "Established" })
		empty := cfg
		empty.Ads = nil
		h = l.startHelper(t, empty)
		start := time.Now()
		waitFor(t, "stale route dropped after End-of-RIB", 15*time.Second, func() bool { return !l.Has(t, "100.64.0.15/32", srcGR) })
		t.Logf("restart without the VIP: stale route gone %v after the restart", time.Since(start).Round(time.Millisecond))
		h.kill()
	})
}

// measureWithdraw runs cause and returns how long until the kernel route
// for prefix is deleted in the router.
func (l *lab) measureWithdraw(t testing.TB, mon *netnslab.RouteMonitor, prefix string, cause func(), timeout time.Duration) time.Duration {
	t.Helper()
	waitFor(t, "kernel route "+prefix, 10*time.Second, func() bool {
		return strings.Contains(netnslab.Run(t, "ip", "-n", l.RouterNS(), "route", "show", prefix+"/32"), "proto bgp")
	})
	mon.Drain()
	start := time.Now()
	cause()
	at, ok := mon.WaitDeleted(prefix, timeout)
	if !ok {
		t.Fatalf("route %s not withdrawn within %v", prefix, timeout)
	}
	return at.Sub(start).Round(time.Millisecond)
}

// lastReset is FRR's reason for a neighbor's last session reset, from "show bgp neighbors X
// json".
func lastReset(neighborJSON string) string {
	var nb map[string]struct {
		LastResetDueTo string `json:"lastResetDueTo"`
	}
	if err := json.Unmarshal([]byte(neighborJSON), &nb); err != nil {
		return "unreadable: " + err.Error()
	}
	for _, n := range nb {
		return n.LastResetDueTo
	}
	return ""
}
