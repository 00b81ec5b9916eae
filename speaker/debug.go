package speaker

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"

	"github.com/metalgate/metalgate/speaker/bgp"
)

// DebugAnnouncementsPath is where DebugHandler is served, on the speaker's metrics listener
// (kubectl metalgate announcers reads it from every speaker).
const DebugAnnouncementsPath = "/debug/announcements"

// Announcements is what one node announces right now: the body of DebugAnnouncementsPath.
type Announcements struct {
	Node string `json:"node"`
	// Announcements are sorted by VIP, then mode; never null.
	Announcements []AnnouncementStatus `json:"announcements"`
}

// AnnouncementStatus is one VIP this node announces, in one mode.
type AnnouncementStatus struct {
	// Service is "namespace/name" of a Service holding the VIP (the first by name if shared).
	Service string `json:"service"`
	VIP     string `json:"vip"`
	// Mode is "layer2" or "bgp".
	Mode Mode `json:"mode"`
	// Interfaces (layer2 only) are where this node answers ARP/NDP for the VIP: it won the
	// election and has quorum.
	Interfaces []string `json:"-"`
	// Peers (bgp only) are the BGPPeers the VIP is advertised to.
	Peers []string `json:"-"`
}

// MarshalJSON writes "interfaces" for layer 2 and "peers" for BGP, as arrays even when empty.
func (a AnnouncementStatus) MarshalJSON() ([]byte, error) {
	type base AnnouncementStatus
	switch a.Mode {
	case ModeLayer2:
		return json.Marshal(struct {
			base
			Interfaces []string `json:"interfaces"`
		}{base(a), nonNil(a.Interfaces)})
	case ModeBGP:
		return json.Marshal(struct {
			base
			Peers []string `json:"peers"`
		}{base(a), nonNil(a.Peers)})
	}
	return json.Marshal(base(a))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *AnnouncementStatus) UnmarshalJSON(b []byte) error {
	type base AnnouncementStatus
	var v struct {
		base
		Interfaces []string `json:"interfaces"`
		Peers      []string `json:"peers"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = AnnouncementStatus(v.base)
	a.Interfaces, a.Peers = v.Interfaces, v.Peers
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// PeerLister is implemented by the BGP announcer: the peers that take advertisements now
// (configured and accepted by the library), for Announcements.
type PeerLister interface {
	Peers() []string
}

// Announcements returns what this node announced at the end of the last Sync: layer-2 VIPs it
// owns after the election (and hold-down) with their interfaces, BGP VIPs with the peers they
// are advertised to. Nothing before the first Sync and after Run returned.
func (s *Speaker) Announcements() Announcements {
	out := Announcements{Node: s.opts.Node, Announcements: []AnnouncementStatus{}}
	if p := s.snapshot.Load(); p != nil {
		out.Announcements = append(out.Announcements, *p...)
	}
	return out
}

// DebugHandler serves Announcements as JSON (GET only).
func (s *Speaker) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(s.Announcements())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}

// updateSnapshot records what Sync made this node announce: the layer-2 addresses it took and
// the BGP advertisements, each with its peers.
func (s *Speaker) updateSnapshot(w *World, taken map[netip.Addr]VIP, bgpDesired []Announcement, loc Locator) {
	out := []AnnouncementStatus{}
	if _, ok := s.opts.Announcers[ModeLayer2]; ok {
		for vip, v := range taken {
			a := AnnouncementStatus{Service: v.Service, VIP: vip.String(), Mode: ModeLayer2}
			if loc != nil {
				a.Interfaces = loc.Where(vip)
			}
			out = append(out, a)
		}
	}
	if ann, ok := s.opts.Announcers[ModeBGP]; ok {
		var accepted map[string]bool
		if pl, ok := ann.(PeerLister); ok {
			accepted = map[string]bool{}
			for _, n := range pl.Peers() {
				accepted[n] = true
			}
		}
		for _, d := range bgpDesired {
			a := AnnouncementStatus{Service: d.Service, VIP: d.VIP.String(), Mode: ModeBGP, Peers: []string{}}
			for _, p := range w.BGPPeers {
				if accepted != nil && !accepted[p.Name] {
					continue
				}
				if slices.ContainsFunc(d.BGP, func(ad bgp.Advertisement) bool { return len(ad.Peers) == 0 || slices.Contains(ad.Peers, p.Name) }) {
					a.Peers = append(a.Peers, p.Name)
				}
			}
			slices.Sort(a.Peers)
			a.Peers = slices.Compact(a.Peers)
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b AnnouncementStatus) int {
		return cmp.Or(netip.MustParseAddr(a.VIP).Compare(netip.MustParseAddr(b.VIP)), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Service, b.Service))
	})
	s.snapshot.Store(&out)
}
