package table

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EndpointSliceController is the endpointslice.kubernetes.io/managed-by value of the
// slices kube-controller-manager derives from a Service's selector: the only ones routed to
// unless Input.AllowUnmanagedSlices.
const EndpointSliceController = "endpointslice-controller.k8s.io"

// Problem is something wrong with one object (an Ingress, an HTTPRoute, a GRPCRoute); the
// rest of the table still works.
type Problem struct {
	Object  SourceRef
	Reason  string // CamelCase, for the Event
	Message string
}

// Problem reasons.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonMissingService    = "MissingService"
	ReasonMissingPort       = "MissingServicePort"
	ReasonInvalidTLS        = "InvalidTLSSecret"
	ReasonPathConflict      = "PathConflict"
	ReasonInvalidRule       = "InvalidRule"
	// ReasonHostConflict: the Ingress names a host that belongs to another namespace; its
	// rules and TLS entries for that host are ignored.
	ReasonHostConflict = "HostConflict"
	// ReasonRefusedEndpoint: a backend's EndpointSlices list addresses that are not routed
	// (not a pod IP, or a slice not managed by the endpoint-slice controller).
	ReasonRefusedEndpoint = "RefusedEndpoint"
	// ReasonUnsupportedAnnotation: an nginx.ingress.kubernetes.io annotation metalgate does
	// not implement; it has no effect (never silently).
	ReasonUnsupportedAnnotation = "UnsupportedAnnotation"
	// ReasonRefusedAnnotation: a snippet annotation, refused by name (free-form
	// configuration is how ingress-nginx got its remote-code-execution CVEs).
	ReasonRefusedAnnotation = "RefusedAnnotation"
)

// reportKey makes a Problem once per object and subject (a host, a backend).
type reportKey struct {
	src     SourceRef
	subject string
}

// Sources are the objects backends and certificates are resolved from, and how far
// endpoints are trusted. Both translators (proxy/ingress, proxy/gatewayapi) resolve through
// one Builder made from them, so an Ingress and an HTTPRoute naming one Service port get the
// same endpoints by the same rules.
type Sources struct {
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Secrets  []*corev1.Secret
	// AllowUnmanagedSlices also routes to EndpointSlices that the endpoint-slice controller
	// does not manage (label endpointslice.kubernetes.io/managed-by other than
	// EndpointSliceController, or none): hand-written slices, and slices mirrored from
	// hand-written Endpoints objects. Default false: their endpoints are refused. Addresses
	// are checked either way (see AllowLoopbackEndpoints).
	AllowUnmanagedSlices bool
	// AllowLoopbackEndpoints accepts loopback endpoint addresses (127.0.0.0/8, ::1). Only a
	// --static-config file (development, benchmarks on one host) sets it; default false.
	// Link-local, unspecified, multicast and broadcast addresses are always refused.
	AllowLoopbackEndpoints bool
}

// Builder assembles one Table. A translator resolves backends and Secrets through it
// (Backend, Secret, Service), places what it decided in the table's indexes (index.go),
// reports Problems, and calls Finish once; the Builder is not used after that.
type Builder struct {
	src      Sources
	t        *Table
	services map[types.NamespacedName]*corev1.Service
	slices   map[types.NamespacedName][]*discoveryv1.EndpointSlice
	secrets  map[types.NamespacedName]*corev1.Secret
	backends map[string]*Backend
	reported map[reportKey]bool
	problems []Problem
	patch    *patchState // what PatchEndpoints needs of this build (Table.patch)
	// listeners are the Gateway listeners in the order AddListener made them.
	listeners []*gwListener
}

// NewBuilder starts a Table resolving from src.
func NewBuilder(src Sources) *Builder {
	b := &Builder{
		src:      src,
		t:        &Table{exact: map[string]*hostRules{}, wildcard: map[string]*hostRules{}, namespaces: map[string]*namespaceRules{}},
		services: make(map[types.NamespacedName]*corev1.Service, len(src.Services)),
		slices:   map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
		secrets:  make(map[types.NamespacedName]*corev1.Secret),
		backends: map[string]*Backend{},
		reported: map[reportKey]bool{},
		patch: &patchState{unmanaged: src.AllowUnmanagedSlices, loopback: src.AllowLoopbackEndpoints,
			ports: map[string]corev1.ServicePort{}, refusals: map[string]string{}, ranked: map[string]bool{}},
	}
	b.t.patch = b.patch
	for _, s := range src.Services {
		b.services[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	for _, s := range src.Slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := types.NamespacedName{Namespace: s.Namespace, Name: name}
			b.slices[k] = append(b.slices[k], s)
		}
	}
	for _, s := range src.Secrets {
		b.secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return b
}

// Problem reports something wrong with src; the rest of the table still works.
func (b *Builder) Problem(src SourceRef, reason, format string, args ...any) {
	b.problems = append(b.problems, Problem{Object: src, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// Once reports whether this is the first time subject is asked about for src: a Problem
// that many rules of one object would cause is made once.
func (b *Builder) Once(src SourceRef, subject string) bool {
	k := reportKey{src, subject}
	if b.reported[k] {
		return false
	}
	b.reported[k] = true
	return true
}

// Service returns Service id of the Sources, or nil.
func (b *Builder) Service(id types.NamespacedName) *corev1.Service { return b.services[id] }

// Secret returns Secret id of the Sources, or nil. Whether src may read it (its own
// namespace, or a ReferenceGrant) is the translator's to decide before asking.
func (b *Builder) Secret(id types.NamespacedName) *corev1.Secret { return b.secrets[id] }

// Backend resolves Service port ref of svcID, for src, to a backend with its endpoints:
// opts gives its protocol and balancing, tlsRef (nil: the defaults) how to speak TLS to an
// https or grpcs backend. Backends are shared between routes when all of those are equal. A
// missing Service or port still gives a backend, with no endpoints (503), and a Problem on src.
func (b *Builder) Backend(src SourceRef, svcID types.NamespacedName, ref networkingv1.ServiceBackendPort, opts Options, tlsRef *BackendTLSRef) *Backend {
	tlsKey := ""
	if tlsRef != nil {
		tlsKey = "|" + tlsRef.String()
	}
	return b.backend(src, svcID, ref, opts, tlsKey, func() *BackendTLS { return b.resolveBackendTLS(src, svcID, tlsRef) })
}

// backend is Backend with the TLS settings of an https or grpcs backend made by tlsOf, and
// tlsKey (what identifies them, "" for none) in the backend's Key.
func (b *Builder) backend(src SourceRef, svcID types.NamespacedName, ref networkingv1.ServiceBackendPort, opts Options, tlsKey string, tlsOf func() *BackendTLS) *Backend {
	port := ref.Name
	if port == "" {
		port = strconv.Itoa(int(ref.Number))
	}
	key := svcID.String() + ":" + port + "|" + string(opts.Protocol) + "|" + opts.Balance.String() + tlsKey
	if be := b.backends[key]; be != nil {
		b.reportRefused(src, be)
		return be
	}
	be := &Backend{Key: key, Service: svcID, Port: port, Protocol: opts.Protocol, Balance: opts.Balance}
	if opts.Protocol == ProtocolHTTPS || opts.Protocol == ProtocolGRPCS {
		be.TLS = tlsOf()
	}
	b.backends[key] = be
	svc := b.services[svcID]
	if svc == nil {
		b.Problem(src, ReasonMissingService, "Service %s not found", svcID)
		return be
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (ref.Name != "" && p.Name == ref.Name) || (ref.Name == "" && p.Port == ref.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		b.Problem(src, ReasonMissingPort, "Service %s has no port %s", svcID, port)
		return be
	}
	b.patch.ports[key] = *sp
	var msg string
	be.Endpoints, be.States, msg = b.resolve(be, b.slices[svcID], sp)
	if msg != "" {
		b.patch.refusals[key] = msg
	}
	b.reportRefused(src, be)
	return be
}

// resolve computes the endpoints of backend be (Service port sp) from the Service's slices,
// and the message of the RefusedEndpoint Problem it causes ("" when none is refused). Build
// and PatchEndpoints both call it: one computation, so a patch cannot drift from a build.
func (b *Builder) resolve(be *Backend, slices []*discoveryv1.EndpointSlice, sp *corev1.ServicePort) (routed []string, states []EndpointState, refusal string) {
	routed, states, refused, nRefused, total := b.endpoints(slices, sp)
	if nRefused > 0 {
		const shown = 3
		more := ""
		if len(refused) > shown {
			refused, more = refused[:shown], fmt.Sprintf("; and %d more", len(refused)-shown)
		}
		refusal = fmt.Sprintf("Service %s port %s: %d of %d endpoint addresses refused: %s%s", be.Service, be.Port, nRefused, total, strings.Join(refused, "; "), more)
	}
	return routed, states, refusal
}

// reportRefused reports a backend's refused endpoints on src, once per object.
func (b *Builder) reportRefused(src SourceRef, be *Backend) {
	msg := b.patch.refusals[be.Key]
	if msg == "" {
		return
	}
	if k := (reportKey{src, "backend " + be.Key}); !b.reported[k] {
		b.reported[k] = true
		b.Problem(src, ReasonRefusedEndpoint, "%s", msg)
	}
}

// endpoints lists "ip:port" of the ready endpoints of a Service port, or, when none is
// ready, of those serving while terminating (they still finish requests during a rollout).
// states lists every address of the port in the EndpointSlices with its conditions, sorted,
// refused ones with the reason. refused describes the refusals for a Problem (one item per
// refused slice or address); nRefused of total listed addresses were refused.
func (b *Builder) endpoints(slices []*discoveryv1.EndpointSlice, sp *corev1.ServicePort) (routed []string, states []EndpointState, refused []string, nRefused, total int) {
	var ready, serving []string
	seen, listed := map[string]bool{}, map[string]int{} // listed: index in states
	for _, s := range slices {
		var port int32 = -1
		for _, p := range s.Ports {
			if (p.Name == nil && sp.Name == "") || (p.Name != nil && *p.Name == sp.Name) {
				if p.Port != nil {
					port = *p.Port
				}
				break
			}
		}
		if port < 0 || (p2proto(s) != "" && p2proto(s) != sp.Protocol && sp.Protocol != "") {
			continue
		}
		sliceWhy := b.sliceRefused(s)
		if sliceWhy != "" && len(s.Endpoints) > 0 {
			refused = append(refused, sliceWhy)
		}
		for i, e := range s.Endpoints {
			c := e.Conditions
			isReady := c.Ready == nil || *c.Ready // nil means unknown: ready, says the API
			isServing := c.Serving != nil && *c.Serving
			for j, raw := range e.Addresses {
				total++
				addr, why := raw, sliceWhy
				if why == "" {
					if addr, why = b.address(s.AddressType, raw); why != "" {
						refused = append(refused, fmt.Sprintf("EndpointSlice %s/%s endpoints[%d].addresses[%d] %q: %s", s.Namespace, s.Name, i, j, raw, why))
					}
				}
				hp := net.JoinHostPort(addr, strconv.Itoa(int(port)))
				st := EndpointState{Addr: hp, Ready: isReady, Serving: isServing || isReady && c.Serving == nil,
					Terminating: c.Terminating != nil && *c.Terminating, Refused: why}
				// The first slice listing an address describes it, unless that slice was
				// refused and this one is not.
				if k, ok := listed[hp]; !ok {
					listed[hp] = len(states)
					states = append(states, st)
				} else if states[k].Refused != "" && why == "" {
					states[k] = st
				}
				if why != "" {
					nRefused++
					continue
				}
				if (!isReady && !isServing) || seen[hp] {
					continue
				}
				seen[hp] = true
				if isReady {
					ready = append(ready, hp)
				} else {
					serving = append(serving, hp)
				}
			}
		}
	}
	out := ready
	if len(out) == 0 {
		out = serving
	}
	sort.Strings(out)
	sort.Slice(states, func(i, j int) bool { return states[i].Addr < states[j].Addr })
	return out, states, refused, nRefused, total
}

// sliceRefused says why no address of a slice is routed, or "". Only the endpoint-slice
// controller's slices are trusted by default: anyone who may write EndpointSlices (or
// Endpoints, which the mirroring controller copies into slices) could otherwise point the
// proxy at the API server, its own admin port or any address it can reach.
func (b *Builder) sliceRefused(s *discoveryv1.EndpointSlice) string {
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		// FQDN endpoints would make the proxy resolve and dial any name
		// (metadata.google.internal).
		return fmt.Sprintf("EndpointSlice %s/%s has addressType %s (only IPv4 and IPv6 are served)", s.Namespace, s.Name, s.AddressType)
	}
	if b.src.AllowUnmanagedSlices {
		return ""
	}
	switch m, ok := s.Labels[discoveryv1.LabelManagedBy]; {
	case !ok:
		return fmt.Sprintf("EndpointSlice %s/%s is not managed by %s (no label %s)", s.Namespace, s.Name, EndpointSliceController, discoveryv1.LabelManagedBy)
	case m != EndpointSliceController:
		return fmt.Sprintf("EndpointSlice %s/%s is not managed by %s (managed-by %q)", s.Namespace, s.Name, EndpointSliceController, m)
	}
	return ""
}

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// address checks one endpoint address of a slice of addressType at: a pod IP of the slice's
// family, never a special address. It returns the address in canonical form, or why it is
// refused.
func (b *Builder) address(at discoveryv1.AddressType, raw string) (addr, refused string) {
	a, err := netip.ParseAddr(raw)
	switch {
	case err != nil:
		return raw, "not an IP address"
	case a.Zone() != "":
		return raw, "address with a zone"
	case at == discoveryv1.AddressTypeIPv4 && !a.Is4():
		return raw, "IPv6 address in an IPv4 EndpointSlice"
	case at == discoveryv1.AddressTypeIPv6 && (a.Is4() || a.Is4In6()):
		return raw, "IPv4 address in an IPv6 EndpointSlice"
	case a.IsUnspecified():
		return raw, "unspecified address"
	case a.IsLoopback():
		if !b.src.AllowLoopbackEndpoints {
			return raw, "loopback address"
		}
	case a.IsLinkLocalUnicast():
		return raw, "link-local address" // 169.254.169.254 is the cloud metadata service
	case a.IsMulticast():
		return raw, "multicast address"
	case a == broadcast:
		return raw, "broadcast address"
	case a.Is4():
		return raw, "" // ParseAddr takes only the canonical IPv4 form (no leading zeros)
	}
	return a.String(), ""
}

// p2proto is the protocol of a slice's first port; slices carry one protocol in practice.
func p2proto(s *discoveryv1.EndpointSlice) corev1.Protocol {
	if len(s.Ports) > 0 && s.Ports[0].Protocol != nil {
		return *s.Ports[0].Protocol
	}
	return ""
}

// Tier ranks what a backend can serve, for default backends: 0 a ready endpoint, 1 only
// endpoints serving while terminating, 2 nothing. It is the only thing Build reads from a
// backend's endpoints besides copying them (PatchEndpoints compares it).
func (be *Backend) Tier() int {
	if len(be.Endpoints) == 0 {
		return 2
	}
	for _, st := range be.States {
		if st.Ready && st.Refused == "" {
			return 0
		}
	}
	return 1
}
