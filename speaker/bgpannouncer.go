package speaker

import (
	"context"
	"reflect"
	"sync"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker/bgp"
)

// PeerSetter is implemented by the BGP announcer: Sync hands it World.BGPPeers before every
// Announce of ModeBGP.
type PeerSetter interface {
	SetPeers(ctx context.Context, peers []bgp.Peer) error
}

// BGPSession is the part of *bgp.Speaker the BGP announcer uses.
type BGPSession interface {
	SetPeers(ctx context.Context, peers []bgp.Peer) error
	SetAdvertisements(ctx context.Context, ads []bgp.Advertisement) error
	Close(ctx context.Context) error
}

// BGPAnnouncer is the ModeBGP Announcer: it turns the desired announcements into
// bgp.Speaker advertisements and World.BGPPeers into sessions. BGP needs no election and no
// quorum: every candidate node advertises each VIP to its peers (ECMP).
type BGPAnnouncer struct {
	S BGPSession

	mu       sync.Mutex
	peers    []bgp.Peer
	peersSet bool
	ads      []bgp.Advertisement
	adsSet   bool
}

// NewBGPAnnouncer returns an announcer over s.
func NewBGPAnnouncer(s BGPSession) *BGPAnnouncer { return &BGPAnnouncer{S: s} }

// SetPeers applies peers when they differ from the previous call (the library keeps the
// sessions of unchanged peers anyway; this only saves work). Invalid peers are reported in the
// error and in bgp.Speaker.Status; the valid ones still run.
func (a *BGPAnnouncer) SetPeers(ctx context.Context, peers []bgp.Peer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.peersSet && reflect.DeepEqual(a.peers, peers) {
		return nil
	}
	err := a.S.SetPeers(ctx, peers)
	a.peers, a.peersSet = peers, err == nil
	return err
}

// Announce advertises the BGP advertisements of desired. It always calls SetAdvertisements
// once, even with nothing to advertise: the library opens no session before that.
func (a *BGPAnnouncer) Announce(ctx context.Context, desired []Announcement) error {
	var ads []bgp.Advertisement
	for _, d := range desired {
		ads = append(ads, d.BGP...)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.adsSet && reflect.DeepEqual(a.ads, ads) {
		return nil
	}
	err := a.S.SetAdvertisements(ctx, ads)
	a.ads, a.adsSet = ads, err == nil
	return err
}

// Peers returns the names of the peers of the last successful SetPeers that the session
// accepted: when S reports Status, the refused ones (state Unknown) are left out.
func (a *BGPAnnouncer) Peers() []string {
	a.mu.Lock()
	peers := a.peers
	a.mu.Unlock()
	refused := map[string]bool{}
	if st, ok := a.S.(interface{ Status() []bgp.PeerStatus }); ok {
		for _, s := range st.Status() {
			if s.SessionState == v1alpha1.SessionStateUnknown {
				refused[s.Name] = true
			}
		}
	}
	var out []string
	for _, p := range peers {
		if !refused[p.Name] {
			out = append(out, p.Name)
		}
	}
	return out
}

// CloseOnly marks BGPAnnouncer as a CloseOnly announcer: on shutdown the Speaker does not
// withdraw its advertisements before Close.
func (a *BGPAnnouncer) CloseOnly() {}

// Close closes the sessions: without graceful restart the routers withdraw the node's routes at
// once (NOTIFICATION); with it, the sessions end with the process and the routers keep the
// routes until the restarted speaker sends its End-of-RIB (bgp.Speaker.Close).
func (a *BGPAnnouncer) Close() error {
	return a.S.Close(context.Background())
}
