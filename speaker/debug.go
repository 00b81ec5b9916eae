package speaker

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"

	"github.com/metalgate/metalgate/api/contract"
)

// Announcements returns what this node announced at the end of the last sync: layer-2 VIPs it
// owns after the election (and hold-down) with their interfaces, BGP VIPs with the peers they
// are advertised to. Nothing before the first sync and after Run returned.
func (s *Speaker) Announcements() contract.Announcements {
	out := contract.Announcements{Node: s.opts.Node, Announcements: []contract.AnnouncementStatus{}}
	if p := s.snapshot.Load(); p != nil {
		out.Announcements = append(out.Announcements, *p...)
	}
	return out
}

// DebugHandler serves Announcements as JSON (GET only), at contract.DebugAnnouncementsPath.
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

// updateSnapshot records what sync made this node announce, in each mode that has an
// Announcer, with where it announces each address.
func (s *Speaker) updateSnapshot(desired map[Mode][]Announcement) {
	out := []contract.AnnouncementStatus{}
	for mode, ann := range s.opts.Announcers {
		for _, d := range desired[mode] {
			out = append(out, contract.AnnouncementStatus{Service: d.Service, VIP: d.VIP.String(), Mode: string(mode), Where: ann.Where(d.VIP)})
		}
	}
	slices.SortFunc(out, func(a, b contract.AnnouncementStatus) int {
		return cmp.Or(netip.MustParseAddr(a.VIP).Compare(netip.MustParseAddr(b.VIP)), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Service, b.Service))
	})
	s.snapshot.Store(&out)
}
