package table

import (
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ControllerName is the spec.controller of the IngressClasses metalgate serves.
const ControllerName = "metalgate.io/ingress-controller"

// defaultClassAnnotation marks the cluster's default IngressClass.
const defaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"

// Input is a snapshot of the objects a table is built from. Objects are read, never changed.
type Input struct {
	Ingresses []*networkingv1.Ingress
	Classes   []*networkingv1.IngressClass
	Services  []*corev1.Service
	Slices    []*discoveryv1.EndpointSlice
	Secrets   []*corev1.Secret
	// Controller is the spec.controller value that makes an IngressClass ours; default
	// ControllerName.
	Controller string
	// WatchDefaultClass also takes Ingresses without a class when the default IngressClass
	// is ours.
	WatchDefaultClass bool
}

// Problem is something wrong with one Ingress; the rest of the table still works.
type Problem struct {
	Ingress types.NamespacedName
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
)

// Classes returns the names of the IngressClasses with our controller, and whether one of
// them is the cluster default.
func Classes(classes []*networkingv1.IngressClass, controller string) (names map[string]bool, defaultIsOurs bool) {
	if controller == "" {
		controller = ControllerName
	}
	names = map[string]bool{}
	for _, c := range classes {
		if c.Spec.Controller != controller {
			continue
		}
		names[c.Name] = true
		if c.Annotations[defaultClassAnnotation] == "true" {
			defaultIsOurs = true
		}
	}
	return names, defaultIsOurs
}

// Owns reports whether an Ingress belongs to us given our class names (from Classes).
func Owns(ing *networkingv1.Ingress, ours map[string]bool, defaultIsOurs, watchDefault bool) bool {
	if ing.Spec.IngressClassName != nil {
		return ours[*ing.Spec.IngressClassName]
	}
	// The deprecated annotation still names a class on old manifests.
	if c, ok := ing.Annotations["kubernetes.io/ingress.class"]; ok {
		return ours[c]
	}
	return watchDefault && defaultIsOurs
}

// Build makes a table from a snapshot. It never fails as a whole: each Ingress that is wrong
// in part is reported as Problems and what is right in it is still routed. Conflicts (the
// same host, path and path type in two Ingresses; two default backends) go to the oldest
// Ingress (creation time, then namespace/name).
func Build(in Input) (*Table, []Problem) {
	b := builder{
		in:       in,
		t:        &Table{exact: map[string]*hostRules{}, wildcard: map[string]*hostRules{}, certs: map[string]*tls.Certificate{}, wildcardCerts: map[string]*tls.Certificate{}},
		services: make(map[types.NamespacedName]*corev1.Service, len(in.Services)),
		slices:   map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
		secrets:  make(map[types.NamespacedName]*corev1.Secret),
		backends: map[string]*Backend{},
		owner:    map[routeKey]types.NamespacedName{},
	}
	for _, s := range in.Services {
		b.services[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	for _, s := range in.Slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := types.NamespacedName{Namespace: s.Namespace, Name: name}
			b.slices[k] = append(b.slices[k], s)
		}
	}
	for _, s := range in.Secrets {
		b.secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	ours, defaultIsOurs := Classes(in.Classes, in.Controller)
	var owned []*networkingv1.Ingress
	for _, ing := range in.Ingresses {
		if Owns(ing, ours, defaultIsOurs, in.WatchDefaultClass) {
			owned = append(owned, ing)
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		a, c := owned[i], owned[j]
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		return a.Name < c.Name
	})
	for _, ing := range owned {
		b.ingress(ing)
	}
	b.t.Ingresses = len(owned)
	b.t.Owned = make([]types.NamespacedName, len(owned))
	for i, ing := range owned {
		b.t.Owned[i] = types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	}
	for _, be := range b.backends {
		b.t.Backends = append(b.t.Backends, be)
	}
	sort.Slice(b.t.Backends, func(i, j int) bool { return b.t.Backends[i].Key < b.t.Backends[j].Key })
	for _, hr := range b.t.exact {
		hr.sort()
	}
	for _, hr := range b.t.wildcard {
		hr.sort()
	}
	if b.t.anyHost != nil {
		b.t.anyHost.sort()
	}
	return b.t, b.problems
}

type routeKey struct{ host, path, pathType string }

type builder struct {
	in       Input
	t        *Table
	services map[types.NamespacedName]*corev1.Service
	slices   map[types.NamespacedName][]*discoveryv1.EndpointSlice
	secrets  map[types.NamespacedName]*corev1.Secret
	backends map[string]*Backend
	owner    map[routeKey]types.NamespacedName
	problems []Problem
}

func (b *builder) problem(ing types.NamespacedName, reason, format string, args ...any) {
	b.problems = append(b.problems, Problem{Ingress: ing, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (b *builder) ingress(ing *networkingv1.Ingress) {
	id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	opts, bad := parseOptions(ing.Annotations)
	for _, msg := range bad {
		b.problem(id, ReasonInvalidAnnotation, "%s", msg)
	}
	tlsHosts := b.tls(ing, id)
	if d := ing.Spec.DefaultBackend; d != nil {
		if b.t.Default != nil {
			b.problem(id, ReasonPathConflict, "default backend ignored: Ingress %s already sets one", b.t.Default.Ingress)
		} else if be := b.backend(id, ing.Namespace, d, opts); be != nil {
			b.t.Default = &Route{Path: "/", PathType: "Default", Ingress: id, Backend: be, Options: opts}
		}
	}
	for _, rule := range ing.Spec.Rules {
		host := strings.ToLower(rule.Host)
		if strings.Contains(host, "*") && (!strings.HasPrefix(host, "*.") || strings.Count(host, "*") > 1) {
			b.problem(id, ReasonInvalidRule, "host %q: a wildcard must be the whole first label (*.example.com)", rule.Host)
			continue
		}
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			pt := string(networkingv1.PathTypeImplementationSpecific)
			if p.PathType != nil {
				pt = string(*p.PathType)
			}
			path := p.Path
			if path == "" {
				path = "/"
			}
			if !strings.HasPrefix(path, "/") {
				b.problem(id, ReasonInvalidRule, "path %q on host %q must start with /", p.Path, rule.Host)
				continue
			}
			be := b.backend(id, ing.Namespace, &p.Backend, opts)
			if be == nil {
				continue
			}
			// Exact stays exact; Prefix and ImplementationSpecific both match by element.
			kind := "Prefix"
			if pt == string(networkingv1.PathTypeExact) {
				kind = "Exact"
			} else {
				path = "/" + strings.Trim(path, "/")
			}
			k := routeKey{host, path, kind}
			if prev, ok := b.owner[k]; ok {
				if prev != id {
					b.problem(id, ReasonPathConflict, "%s path %q on host %q ignored: Ingress %s already routes it", kind, path, hostOrAny(rule.Host), prev)
				}
				continue
			}
			b.owner[k] = id
			r := &Route{Host: host, Path: path, PathType: pt, Ingress: id, Backend: be, Options: opts, TLS: tlsHosts[host]}
			b.hostRules(host).add(r, kind)
		}
	}
}

func hostOrAny(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

func (b *builder) hostRules(host string) *hostRules {
	var m map[string]*hostRules
	switch {
	case host == "":
		if b.t.anyHost == nil {
			b.t.anyHost = &hostRules{exact: map[string]*Route{}}
		}
		return b.t.anyHost
	case strings.HasPrefix(host, "*."):
		m, host = b.t.wildcard, host[2:]
	default:
		m = b.t.exact
	}
	hr := m[host]
	if hr == nil {
		hr = &hostRules{exact: map[string]*Route{}}
		m[host] = hr
	}
	return hr
}

func (hr *hostRules) add(r *Route, kind string) {
	if kind == "Exact" {
		hr.exact[r.Path] = r
		return
	}
	hr.prefixes = append(hr.prefixes, r)
}

func (hr *hostRules) sort() {
	sort.SliceStable(hr.prefixes, func(i, j int) bool { return prefixLess(hr.prefixes[i].Path, hr.prefixes[j].Path) })
}

// tls loads the Ingress's certificates into the table and returns the hosts it covers.
func (b *builder) tls(ing *networkingv1.Ingress, id types.NamespacedName) map[string]bool {
	hosts := map[string]bool{}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			hosts[strings.ToLower(h)] = true
		}
		if t.SecretName == "" {
			continue // the default certificate serves these hosts
		}
		sec := b.secrets[types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}]
		if sec == nil {
			b.problem(id, ReasonInvalidTLS, "TLS Secret %s/%s not found; the default certificate is served for %v", ing.Namespace, t.SecretName, t.Hosts)
			continue
		}
		cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			b.problem(id, ReasonInvalidTLS, "TLS Secret %s/%s: %v; the default certificate is served for %v", ing.Namespace, t.SecretName, err, t.Hosts)
			continue
		}
		for _, h := range t.Hosts {
			h = strings.ToLower(h)
			m := b.t.certs
			if strings.HasPrefix(h, "*.") {
				m, h = b.t.wildcardCerts, h[2:]
			}
			if _, taken := m[h]; !taken { // the oldest Ingress keeps a host's certificate
				m[h] = &cert
			}
		}
	}
	return hosts
}

// backend resolves an IngressBackend to endpoints; nil when it cannot be served at all
// (a resource backend). A missing Service or port still gives a backend, with no endpoints
// (503), and a Problem.
func (b *builder) backend(id types.NamespacedName, ns string, ib *networkingv1.IngressBackend, opts Options) *Backend {
	if ib.Service == nil {
		b.problem(id, ReasonInvalidRule, "resource backends are not supported")
		return nil
	}
	svcID := types.NamespacedName{Namespace: ns, Name: ib.Service.Name}
	port := ib.Service.Port.Name
	if port == "" {
		port = strconv.Itoa(int(ib.Service.Port.Number))
	}
	key := svcID.String() + ":" + port + "|" + string(opts.Protocol) + "|" + opts.Balance.String()
	if be := b.backends[key]; be != nil {
		return be
	}
	be := &Backend{Key: key, Service: svcID, Port: port, Protocol: opts.Protocol, Balance: opts.Balance}
	b.backends[key] = be
	svc := b.services[svcID]
	if svc == nil {
		b.problem(id, ReasonMissingService, "Service %s not found", svcID)
		return be
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (ib.Service.Port.Name != "" && p.Name == ib.Service.Port.Name) || (ib.Service.Port.Name == "" && p.Port == ib.Service.Port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		b.problem(id, ReasonMissingPort, "Service %s has no port %s", svcID, port)
		return be
	}
	be.Endpoints, be.States = endpoints(b.slices[svcID], sp)
	return be
}

// endpoints lists "ip:port" of the ready endpoints of a Service port, or, when none is
// ready, of those serving while terminating (they still finish requests during a rollout).
// states lists every endpoint of the port with its conditions, sorted by address.
func endpoints(slices []*discoveryv1.EndpointSlice, sp *corev1.ServicePort) (routed []string, states []EndpointState) {
	var ready, serving []string
	seen, listed := map[string]bool{}, map[string]bool{}
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
		for _, e := range s.Endpoints {
			c := e.Conditions
			isReady := c.Ready == nil || *c.Ready // nil means unknown: ready, says the API
			isServing := c.Serving != nil && *c.Serving
			for _, a := range e.Addresses {
				hp := net.JoinHostPort(a, strconv.Itoa(int(port)))
				if !listed[hp] { // the first slice listing an address describes it
					listed[hp] = true
					states = append(states, EndpointState{Addr: hp, Ready: isReady, Serving: isServing || isReady && c.Serving == nil,
						Terminating: c.Terminating != nil && *c.Terminating})
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
	return out, states
}

// p2proto is the protocol of a slice's first port; slices carry one protocol in practice.
func p2proto(s *discoveryv1.EndpointSlice) corev1.Protocol {
	if len(s.Ports) > 0 && s.Ports[0].Protocol != nil {
		return *s.Ports[0].Protocol
	}
	return ""
}
