package layer2

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/internal/testenv"
)

// testSocket is one socket a responder under test opened: ask sends it a request the
// responder must answer, answered waits for that answer, fail breaks it as a link going
// down breaks a packet socket.
type testSocket struct {
	ask      func()
	answered func(t *testing.T)
	fail     func()
	joins    <-chan netip.Addr // NDP: each solicited-node group joined on it; ARP: nil
}

// joinRecorder is a fakeNDP that reports each group joined.
type joinRecorder struct {
	*fakeNDP
	joins chan netip.Addr
}

func (j *joinRecorder) JoinGroup(g netip.Addr) error { j.joins <- g; return nil }

// TestRespondersReopen: the ARP and the NDP responder share one socket life. A socket that
// will not open at first is retried; one that fails while read is reopened and the new one
// answers (NDP: after joining the solicited-node group again, or the kernel would drop the
// solicitations); each failure is counted; close ends it all.
func TestRespondersReopen(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	fake := *lo
	fake.Name, fake.HardwareAddr = "eth0", ourMAC
	answerAll := func(netip.Addr) Outcome { return "" }
	tests := []struct {
		family string
		// start creates the responder; open fails while it returns an error; each socket it
		// opens is sent on sockets. It returns the responder's close.
		start func(t *testing.T, m *Metrics, open func() error, sockets chan<- testSocket) (close func())
		group netip.Addr // the group each NDP socket must join; zero for ARP
	}{
		{
			family: "arp",
			start: func(t *testing.T, m *Metrics, open func() error, sockets chan<- testSocket) func() {
				dial := func(*net.Interface) (net.PacketConn, error) {
					if err := open(); err != nil {
						return nil, err
					}
					c := newPipeConn()
					sockets <- testSocket{
						ask: func() { c.in <- request(t, vip4) },
						answered: func(t *testing.T) {
							if p, _ := readARP(t, c); p.SenderIP != vip4 || p.TargetIP != clientIP {
								t.Fatalf("reply %+v, want %s is-at for %s", p, vip4, clientIP)
							}
						},
						fail: func() { _ = c.Close() },
					}
					return c, nil
				}
				return newARPResponder(&fake, answerAll, dial, logr.Discard(), m).close
			},
		},
		{
			family: "ndp",
			group:  solicited6,
			start: func(t *testing.T, m *Metrics, open func() error, sockets chan<- testSocket) func() {
				listen := func(*net.Interface) (ndpConn, netip.Addr, error) {
					if err := open(); err != nil {
						return nil, netip.Addr{}, err
					}
					c := &joinRecorder{fakeNDP: &fakeNDP{in: make(chan rawNDP, 4), sent: make(chan netip.Addr, 4), closed: make(chan struct{})},
						joins: make(chan netip.Addr, 4)}
					sockets <- testSocket{
						ask: func() { c.in <- rawNDP{ns(vip6, 0, srcLL...), 255, clientLL, solicited6} },
						answered: func(t *testing.T) {
							if dst := testenv.Receive(t, 5*time.Second, "a neighbour advertisement", c.sent); dst != clientLL {
								t.Fatalf("advertisement to %s, want %s", dst, clientLL)
							}
						},
						fail:  func() { _ = c.Close() },
						joins: c.joins,
					}
					return c, netip.MustParseAddr("fe80::1"), nil
				}
				r := newNDPResponder(&fake, answerAll, listen, logr.Discard(), m)
				r.setAddrs([]netip.Addr{vip6})
				return r.close
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.family, func(t *testing.T) {
			m := NewMetrics(nil)
			var opens atomic.Int32
			open := func() error {
				if opens.Add(1) == 1 {
					return errors.New("network is down")
				}
				return nil
			}
			sockets := make(chan testSocket, 4)
			closeResponder := tc.start(t, m, open, sockets)
			closed := false
			defer func() {
				if !closed {
					closeResponder()
				}
			}()
			errs := func(op string) float64 { return testutil.ToFloat64(m.Errors.WithLabelValues(tc.family, op)) }
			for i, what := range []string{"the socket opened after a failed open", "the socket reopened after a read failure"} {
				s := testenv.Receive(t, 10*time.Second, what, sockets)
				if tc.group.IsValid() {
					if g := testenv.Receive(t, 5*time.Second, what+" joins the solicited-node group", s.joins); g != tc.group {
						t.Fatalf("%s joined %s, want %s", what, g, tc.group)
					}
				}
				s.ask()
				s.answered(t)
				if i == 0 {
					s.fail()
				}
			}
			if got := errs("open"); got != 1 {
				t.Errorf("errors{%s,open} = %v, want 1", tc.family, got)
			}
			if got := errs("read"); got != 1 {
				t.Errorf("errors{%s,read} = %v, want 1", tc.family, got)
			}
			closeResponder() // returns once the responder's goroutine has
			closed = true
			if n := opens.Load(); n != 3 {
				t.Errorf("%d opens, want 3 (a failed one, the first socket, its replacement)", n)
			}
			select {
			case s := <-sockets:
				t.Errorf("a socket opened after close: %+v", s)
			default:
			}
		})
	}
}
