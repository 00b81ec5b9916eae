package contract

import (
	"encoding/json"
	"time"
)

// Default ports of the listeners that serve the debug endpoints: the speaker's metrics
// listener (--metrics-bind-address, on the host network) and the proxy's admin listener
// (--admin-bind-address). kubectl metalgate reaches them through pods/portforward.
const (
	SpeakerMetricsPort = 7472
	ProxyAdminPort     = 10254
)

// DebugAnnouncementsPath is where each speaker serves Announcements as JSON, on its metrics
// listener (kubectl metalgate announcers reads it from every speaker).
const DebugAnnouncementsPath = "/debug/announcements"

// The announcement modes, as AnnouncementStatus.Mode writes them.
const (
	ModeLayer2 = "layer2"
	ModeBGP    = "bgp"
)

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
	// Mode is ModeLayer2 or ModeBGP.
	Mode string `json:"mode"`
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

// DebugBackendsPath is where the proxy's admin listener serves the live routes of one Ingress,
// GET /debug/backends?ingress=<namespace>/<name>, or (a Gateway's proxy) of one HTTPRoute,
// GET /debug/backends?httproute=<namespace>/<name>. kubectl metalgate backends reads it.
const DebugBackendsPath = "/debug/backends"

// Backends is the answer of DebugBackendsPath: the routes of one Ingress (or HTTPRoute) in the
// table the proxy serves now, with what the data plane knows about each endpoint.
type Backends struct {
	Ingress string `json:"ingress"` // namespace/name; "" when HTTPRoute or GRPCRoute is set
	// HTTPRoute is the HTTPRoute asked for (namespace/name) of a Gateway's proxy; "" for an
	// Ingress.
	HTTPRoute string `json:"httpRoute,omitempty"`
	// GRPCRoute likewise, for a GRPCRoute.
	GRPCRoute string `json:"grpcRoute,omitempty"`
	// Generation counts the tables installed since the proxy started (1 is the first);
	// Applied is when this one was installed. Both are zero when unknown.
	Generation uint64         `json:"generation"`
	Applied    time.Time      `json:"applied"`
	Routes     []BackendRoute `json:"routes"`
}

// BackendRoute is one rule of the Ingress as the proxy routes it.
type BackendRoute struct {
	Host     string `json:"host"`     // "" for any host
	Path     string `json:"path"`     // normalised: "/foo/" of a Prefix rule is "/foo"
	PathType string `json:"pathType"` // Exact, Prefix, ImplementationSpecific; Default for spec.defaultBackend
	Service  string `json:"service"`  // namespace/name
	Port     string `json:"port"`     // the Ingress's port: a number or a name
	Protocol string `json:"protocol"`
	Balance  string `json:"balance"`
	// Weight is the route's share of its rule's requests, in percent, when the rule splits
	// them between backendRefs (0: the rule does not split). Unresolved: the backendRef names
	// nothing usable and the rule's requests get 500 (HTTPRoute only).
	Weight     int  `json:"weight,omitempty"`
	Unresolved bool `json:"unresolved,omitempty"`
	// Endpoints are every endpoint of the Service port in its EndpointSlices, sorted by
	// address; Routed says whether requests go to it.
	Endpoints []BackendEndpoint `json:"endpoints"`
}

// BackendEndpoint is one backend address: its EndpointSlice conditions and the data plane's
// view.
type BackendEndpoint struct {
	Address     string `json:"address"` // ip:port
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	// Routed: the balancer picks it (ready, or serving while no endpoint is ready).
	Routed bool `json:"routed"`
	// Healthy: not ejected by passive health checks. Meaningful only when Routed.
	Healthy  bool  `json:"healthy"`
	InFlight int64 `json:"inFlight"`
	// Refused says why the address is never routed: not a pod IP (loopback, link-local,
	// ...) or from an EndpointSlice that is not trusted. Empty when it may be.
	Refused string `json:"refused,omitempty"`
}
