package bgp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/metalgate/metalgate/internal/netnslab"
)

// The FRR lab is netnslab.FRR: FRR (zebra, bfdd, bgpd) in a router namespace
// at 198.51.100.1/24 and 2001:db8::1/64, and, across a bridge, a speaker
// namespace at 198.51.100.11-15/24 and 2001:db8::11/64. FRR has one neighbor
// per node address, so each scenario picks its session by SourceAddress.
//
// The speaker runs in a child process (this test binary re-executed with
// helperEnv set, see TestMain) started with "ip netns exec" in the speaker
// namespace: GoBGP's goroutines move between OS threads, so one process
// cannot reliably use a namespace other than its own.

const (
	helperEnv = "METALGATE_BGPTEST_HELPER"
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

const bgpdConf = `hostname frrt-router
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

const bfddConf = `hostname frrt-router
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

// lab is a running FRR lab with the neighbors of bgpdConf.
type lab struct{ *netnslab.FRR }

// newLab builds the namespaces and starts FRR. Everything is torn down in
// t.Cleanup, also when the test fails.
func newLab(t testing.TB) *lab {
	t.Helper()
	// srcBFD first: it becomes the primary address, the one the kernel
	// picks as source of GoBGP's BFD packets (GoBGP does not bind them to
	// the session's source address).
	var node []string
	for _, a := range []string{srcBFD, srcEBGP, srcIBGP, srcMD5, srcGR} {
		node = append(node, a+"/24")
	}
	return &lab{netnslab.NewFRR(t, netnslab.FRROptions{
		RouterAddrs:  []string{routerV4 + "/24", routerV6 + "/64"},
		SpeakerAddrs: append(node, nodeV6+"/64"),
		BGPD:         bgpdConf,
		BFDD:         bfddConf,
	})}
}

// helperConfig is what the helper process announces.
type helperConfig struct {
	RouterID string
	Peers    []Peer
	Ads      []Advertisement
	// MetricsSocket, when set, is a unix socket path on which the helper serves its
	// metrics (a path reaches across network namespaces; an address in the speaker's
	// namespace would not).
	MetricsSocket string
}

// helper is a running speaker process in the lab's speaker namespace.
type helper struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
	mu   *sync.Mutex
}

// startHelper starts a helper process announcing cfg; t.Cleanup kills it.
func (l *lab) startHelper(t testing.TB, cfg helperConfig) *helper {
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
	h.cmd = exec.Command("ip", "netns", "exec", l.SpeakerNS(), self)
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
	if cfg.MetricsSocket != "" {
		reg := prometheus.NewRegistry()
		opts.Registerer = reg
		ln, err := net.Listen("unix", cfg.MetricsSocket)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		go func() { _ = http.Serve(ln, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) }()
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

// bfdUp scrapes a helper's metrics socket: metalgate_bgp_bfd_session_up of peer, and whether
// the series exists.
func bfdUp(sock, peer string) (float64, bool, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://helper/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, false, err
	}
	for _, m := range mfs["metalgate_bgp_bfd_session_up"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "peer" && l.GetValue() == peer {
				return m.GetGauge().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}
