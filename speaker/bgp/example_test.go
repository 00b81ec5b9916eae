package bgp_test

import (
	"context"
	"net/netip"
	"time"

	"github.com/go-logr/logr"

	"github.com/metalgate/metalgate/speaker/bgp"
)

// A node peers with its top-of-rack router and announces one VIP, with BFD
// and graceful restart.
func Example() {
	ctx := context.Background()
	s, err := bgp.New(logr.Discard(), bgp.Options{RouterID: netip.MustParseAddr("198.51.100.11"), ListenPort: -1})
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	err = s.SetPeers(ctx, []bgp.Peer{{
		Name: "tor1", MyASN: 64512, PeerASN: 64500,
		Address:  netip.MustParseAddr("198.51.100.1"),
		HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
		BFD:             &bgp.BFDProfile{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, DetectMultiplier: 3},
		GracefulRestart: true,
	}})
	if err != nil {
		panic(err)
	}
	// no-export (65535:65281); speaker/config builds these from BGPAdvertisements.
	ad := bgp.Advertisement{Prefix: netip.MustParsePrefix("100.64.0.10/32"), Communities: []uint32{65535<<16 | 65281}}
	if err := s.SetAdvertisements(ctx, []bgp.Advertisement{ad}); err != nil {
		panic(err)
	}
	for _, st := range s.Status() {
		_ = st.SessionState // "Idle", "Active", ..., "Established"
	}
}
