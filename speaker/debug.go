package speaker

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
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
	// Where is the mode's Announcer.Where, written as "interfaces" for layer 2 (where this node
	// answers ARP/NDP for the VIP: it won the election and has quorum) and as "peers" for BGP
	// (the BGPPeers the VIP is advertised to).
	Where []string `json:"-"`
}

// MarshalJSON writes Where as "interfaces" for layer 2 and "peers" for BGP, an array even when
// empty.
func (a AnnouncementStatus) MarshalJSON() ([]byte, error) {
	type base AnnouncementStatus
	switch a.Mode {
	case ModeLayer2:
		return json.Marshal(struct {
			base
			Interfaces []string `json:"interfaces"`
		}{base(a), nonNil(a.Where)})
	case ModeBGP:
		return json.Marshal(struct {
			base
			Peers []string `json:"peers"`
		}{base(a), nonNil(a.Where)})
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
	a.Where = v.Interfaces
	if a.Mode == ModeBGP {
		a.Where = v.Peers
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
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

// updateSnapshot records what Sync made this node announce, in each mode that has an
// Announcer, with where it announces each address.
func (s *Speaker) updateSnapshot(desired map[Mode][]Announcement) {
	out := []AnnouncementStatus{}
	for mode, ann := range s.opts.Announcers {
		for _, d := range desired[mode] {
			out = append(out, AnnouncementStatus{Service: d.Service, VIP: d.VIP.String(), Mode: mode, Where: ann.Where(d.VIP)})
		}
	}
	slices.SortFunc(out, func(a, b AnnouncementStatus) int {
		return cmp.Or(netip.MustParseAddr(a.VIP).Compare(netip.MustParseAddr(b.VIP)), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Service, b.Service))
	})
	s.snapshot.Store(&out)
}
