package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sync"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
)

// Config is the speaker.ModeBGP entry of speaker.World.Modes: the BGP configuration of this
// node, built from the BGPPeers by speaker/config.
type Config struct {
	// Peers are the BGP sessions this node opens (BGPPeers whose node selectors match it).
	Peers []Peer
	// Invalid are the BGPPeers that select this node (or whose node selectors do not parse)
	// but cannot be configured, sorted by name. They open no session; their errors are
	// reported in BGPPeer.status and Events.
	Invalid []InvalidPeer
}

// InvalidPeer is a BGPPeer that cannot be configured on this node.
type InvalidPeer struct {
	// Name is the BGPPeer's name.
	Name string
	// Err names the offending field and why ("spec.passwordSecret: no Secret \"x\" in namespace …").
	Err error
}

// Params are the speaker.VIP.Params of a ModeBGP address: its advertisements from this node,
// one per BGPAdvertisement that selects its pool and this node (prefix, communities, local
// preference, peers).
type Params struct {
	Advertisements []Advertisement
}

// ConfigOf returns the BGP configuration of w (World.Modes[speaker.ModeBGP]); the zero Config
// when it has none.
func ConfigOf(w speaker.World) Config {
	c, _ := w.Modes[speaker.ModeBGP].(Config)
	return c
}

// Session is the part of *Speaker the Announcer uses.
type Session interface {
	SetPeers(ctx context.Context, peers []Peer) error
	SetAdvertisements(ctx context.Context, ads []Advertisement) error
	Close(ctx context.Context) error
}

var _ speaker.Announcer = (*Announcer)(nil)

// Announcer is the speaker.ModeBGP announcer: it turns the Config into sessions and the desired
// announcements into advertisements. BGP needs no election and no quorum: every candidate node
// advertises each VIP to its peers (ECMP).
type Announcer struct {
	S Session

	mu       sync.Mutex
	peers    []Peer
	peersSet bool
	ads      []Advertisement
	adsSet   bool
	byVIP    map[netip.Addr][]Advertisement // the last Announce's, for Where
}

// NewAnnouncer returns an announcer over s.
func NewAnnouncer(s Session) *Announcer { return &Announcer{S: s} }

// Announce applies the peers of config (a Config; nil: none) when they differ from the previous
// call — the library keeps the sessions of unchanged peers anyway; this only saves work — and
// then advertises the advertisements of desired. Invalid peers are reported in the error and in
// Speaker.Status; the valid ones still run, and the advertisements are set whatever the peers'
// outcome. SetAdvertisements is called at least once, even with nothing to advertise: the
// library opens no session before that.
func (a *Announcer) Announce(ctx context.Context, config any, desired []speaker.Announcement) error {
	// A wrong type is a programming error: reported, and taken as no peers / no advertisement.
	var typeErr error
	cfg, ok := config.(Config)
	if !ok && config != nil {
		typeErr = fmt.Errorf("configuration is a %T, not a bgp.Config", config)
	}
	var ads []Advertisement
	byVIP := make(map[netip.Addr][]Advertisement, len(desired))
	for _, d := range desired {
		p, ok := d.Params.(Params)
		if !ok && d.Params != nil && typeErr == nil {
			typeErr = fmt.Errorf("parameters of %s are a %T, not a bgp.Params", d.VIP, d.Params)
		}
		ads = append(ads, p.Advertisements...)
		byVIP[d.VIP] = p.Advertisements
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var peerErr, adErr error
	if !a.peersSet || !reflect.DeepEqual(a.peers, cfg.Peers) {
		peerErr = a.S.SetPeers(ctx, cfg.Peers)
		a.peers, a.peersSet = cfg.Peers, peerErr == nil
		if peerErr != nil {
			peerErr = fmt.Errorf("peers: %w", peerErr)
		}
	}
	a.byVIP = byVIP
	if !a.adsSet || !reflect.DeepEqual(a.ads, ads) {
		adErr = a.S.SetAdvertisements(ctx, ads)
		a.ads, a.adsSet = ads, adErr == nil
	}
	if adErr != nil {
		adErr = fmt.Errorf("advertisements: %w", adErr)
	}
	return errors.Join(typeErr, peerErr, adErr)
}

// Where returns the peers vip is advertised to, sorted: the peers of the last Announce that the
// session accepted (when S reports Status, the refused ones, state Unknown, are left out) and
// that one of vip's advertisements names (or all, for an advertisement naming none). It is
// never nil for an address of the last Announce.
func (a *Announcer) Where(vip netip.Addr) []string {
	a.mu.Lock()
	peers := a.peers
	ads, ok := a.byVIP[vip]
	a.mu.Unlock()
	if !ok {
		return nil
	}
	refused := map[string]bool{}
	if st, ok := a.S.(interface{ Status() []PeerStatus }); ok {
		for _, s := range st.Status() {
			if s.SessionState == v1alpha1.SessionStateUnknown {
				refused[s.Name] = true
			}
		}
	}
	out := []string{}
	for _, p := range peers {
		if refused[p.Name] {
			continue
		}
		if slices.ContainsFunc(ads, func(ad Advertisement) bool { return len(ad.Peers) == 0 || slices.Contains(ad.Peers, p.Name) }) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Close closes the sessions without withdrawing first: without graceful restart the routers
// withdraw the node's routes at once (NOTIFICATION); with it, the sessions end with the process
// and the routers keep the routes until the restarted speaker sends its End-of-RIB
// (Speaker.Close). Withdrawing everything before, as a layer-2 announcer stops answering, would
// defeat graceful restart.
func (a *Announcer) Close() error {
	return a.S.Close(context.Background())
}
