package bgp

import (
	"context"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/prometheus/client_golang/prometheus"
)

// bfdSessions exports metalgate_bgp_bfd_session_up{peer}: 1 while the BFD session with a
// peer that has a BFD profile is Up, else 0 (Down, Init, AdminDown, or none yet). Read from
// GoBGP when Prometheus scrapes (BFD state changes are not peer events), so its value is as
// fresh as the scrape; peers without BFD have no series.
type bfdSessions struct {
	s    *Speaker
	desc *prometheus.Desc
}

func newBFDSessions(s *Speaker) *bfdSessions {
	return &bfdSessions{s: s, desc: prometheus.NewDesc("metalgate_bgp_bfd_session_up",
		"1 when the BFD session with the peer (one with a BFD profile) is Up, else 0.", []string{"peer"}, nil)}
}

func (b *bfdSessions) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *bfdSessions) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	type state struct {
		addr netip.Addr
		up   bool
	}
	var states []state
	err := b.s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		if p.Conf == nil || !p.GetBfd().GetEnabled() {
			return
		}
		addr, err := netip.ParseAddr(p.Conf.NeighborAddress)
		if err != nil {
			return
		}
		up := p.State != nil && p.State.BfdState != nil && p.State.BfdState.SessionState == api.BfdSessionState_BFD_SESSION_STATE_UP
		states = append(states, state{addr.Unmap(), up})
	})
	if err != nil {
		return // GoBGP stopped or busy: no series rather than a wrong one
	}
	b.s.stMu.Lock()
	defer b.s.stMu.Unlock()
	for _, st := range states {
		ss, ok := b.s.sessions[st.addr]
		if !ok {
			continue
		}
		v := 0.0
		if st.up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, v, ss.name)
	}
}
