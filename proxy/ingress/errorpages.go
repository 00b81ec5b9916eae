package ingress

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/table"
)

// Error pages (custom-http-errors, default-backend), retries (proxy-next-upstream and its
// tries and timeout) and the affinity mode: read here, resolved in build.go.

// errorPagesRef is custom-http-errors with default-backend as written: the Service is
// resolved at build time.
type errorPagesRef struct {
	codes []int
	// service and port name the Ingress's default-backend ("" service: the proxy's own).
	service string
	port    networkingv1.ServiceBackendPort
	key     string // the default-backend annotation, for problems
}

// defaultNextUpstreamTries is ingress-nginx's proxy-next-upstream-tries.
const defaultNextUpstreamTries = 3

// errorPages reads custom-http-errors and default-backend (alone it does nothing here, but a
// bad value is still reported).
func (a *annotationReader) errorPages(o *options) {
	ref := &errorPagesRef{}
	if bkey, bv, ok := a.get("default-backend"); ok {
		ref.key = bkey
		name, port, hasPort := strings.Cut(bv, ":")
		p, portOK := parseServicePort(port)
		if !validServiceName(name) || hasPort && !portOK {
			a.bad(bkey, bv, "the name of a Service of the Ingress's namespace, with an optional :port (a number or a port name)")
			ref = nil
		} else {
			ref.service, ref.port = name, p
		}
	}
	key, v, ok := a.get("custom-http-errors")
	if !ok {
		return
	}
	var codes []int
	for _, f := range SplitList(v) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 400 || n > 599 {
			a.bad(key, v, "status codes from 400 to 599 separated by commas")
			return
		}
		codes = append(codes, n)
	}
	if len(codes) == 0 {
		a.bad(key, v, "status codes from 400 to 599 separated by commas")
		return
	}
	if ref == nil {
		return // an invalid default-backend: no error pages (never another backend's)
	}
	slices.Sort(codes)
	ref.codes = slices.Compact(codes)
	o.errorPages = ref
}

// nextUpstream reads proxy-next-upstream, proxy-next-upstream-tries and
// proxy-next-upstream-timeout. Any of them set gives the route a policy: the conditions
// default to ingress-nginx's "error timeout", the tries to 3, the timeout to none.
func (a *annotationReader) nextUpstream(o *options) {
	nu := &table.NextUpstream{On: table.NextError | table.NextTimeout, Tries: defaultNextUpstreamTries}
	set := false
	if key, v, ok := a.get("proxy-next-upstream"); ok {
		set = true
		on, good := parseNextUpstream(v)
		if !good {
			a.bad(key, v, "error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent or off, separated by spaces")
		} else {
			nu.On = on
		}
	}
	if key, v, ok := a.get("proxy-next-upstream-tries"); ok {
		set = true
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || n > 100:
			a.bad(key, v, "a whole number of attempts from 0 (unlimited: every endpoint once) to 100")
		case n == 0:
			nu.Tries = 0 // every endpoint once
		default:
			nu.Tries = n
		}
	}
	if key, v, ok := a.get("proxy-next-upstream-timeout"); ok {
		set = true
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			nu.Timeout = time.Duration(n) * time.Second
		} else if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			nu.Timeout = d
		} else {
			a.bad(key, v, "seconds (0: no limit) or a duration (500ms)")
		}
	}
	if set {
		o.Policy.NextUpstream = nu
	}
}

// parseNextUpstream parses proxy-next-upstream's list; off alone (or with others: off wins,
// as in nginx) is no condition at all.
func parseNextUpstream(v string) (table.NextUpstreamOn, bool) {
	var on table.NextUpstreamOn
	off := false
	fields := SplitList(v)
	if len(fields) == 0 {
		return 0, false
	}
	for _, f := range fields {
		switch strings.ToLower(f) {
		case "error":
			on |= table.NextError
		case "timeout":
			on |= table.NextTimeout
		case "invalid_header":
			on |= table.NextInvalidHeader
		case "http_500":
			on |= table.NextHTTP500
		case "http_502":
			on |= table.NextHTTP502
		case "http_503":
			on |= table.NextHTTP503
		case "http_504":
			on |= table.NextHTTP504
		case "http_403":
			on |= table.NextHTTP403
		case "http_404":
			on |= table.NextHTTP404
		case "http_429":
			on |= table.NextHTTP429
		case "non_idempotent":
			on |= table.NextNonIdempotent
		case "off":
			off = true
		default:
			return 0, false
		}
	}
	if off {
		return 0, true
	}
	return on, true
}

// affinityMode reads affinity-mode (balanced or persistent).
func (a *annotationReader) affinityMode(o *options) {
	key, v, ok := a.get("affinity-mode")
	if !ok {
		return
	}
	switch strings.ToLower(v) {
	case "balanced", "":
		o.Balance.AffinityMode = table.AffinityBalanced
	case "persistent":
		o.Balance.AffinityMode = table.AffinityPersistent
	default:
		a.bad(key, v, "balanced or persistent")
	}
	if o.Balance.AffinityCookie == "" {
		o.Balance.AffinityMode = table.AffinityBalanced // alone it does nothing
	}
}

// validServiceName reports whether n can name a Service (an RFC 1035 label).
func validServiceName(n string) bool {
	if n == "" || len(n) > 63 || n[0] < 'a' || n[0] > 'z' || n[len(n)-1] == '-' {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// parseServicePort parses a Service port reference: a number (1 to 65535) or a port name.
func parseServicePort(p string) (networkingv1.ServiceBackendPort, bool) {
	if n, err := strconv.Atoi(p); err == nil {
		if n < 1 || n > 65535 {
			return networkingv1.ServiceBackendPort{}, false
		}
		return networkingv1.ServiceBackendPort{Number: int32(n)}, true
	}
	if p == "" || len(p) > 15 || !validServiceName(p) {
		return networkingv1.ServiceBackendPort{}, false
	}
	return networkingv1.ServiceBackendPort{Name: p}, true
}

// ParseServiceRef parses "namespace/name:port" (the proxy's --default-backend-service; the
// port a number or a port name, :port optional: the Service's first port).
func ParseServiceRef(s string) (types.NamespacedName, networkingv1.ServiceBackendPort, error) {
	nsName, port, hasPort := strings.Cut(s, ":")
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok || !validServiceName(ns) || !validServiceName(name) {
		return types.NamespacedName{}, networkingv1.ServiceBackendPort{}, fmt.Errorf("service %q: want namespace/name:port", s)
	}
	var p networkingv1.ServiceBackendPort
	if hasPort {
		var good bool
		if p, good = parseServicePort(port); !good {
			return types.NamespacedName{}, networkingv1.ServiceBackendPort{}, fmt.Errorf("service %q: port %q is neither a number from 1 to 65535 nor a port name", s, port)
		}
	}
	return types.NamespacedName{Namespace: ns, Name: name}, p, nil
}

// servicePort is ref, or, when it names no port, the first port of Service id (port 80 when
// the Service is unknown: Backend then reports it missing).
func (b *builder) servicePort(id types.NamespacedName, ref networkingv1.ServiceBackendPort) networkingv1.ServiceBackendPort {
	if ref.Name != "" || ref.Number != 0 {
		return ref
	}
	if svc := b.tb.Service(id); svc != nil && len(svc.Spec.Ports) > 0 {
		if p := svc.Spec.Ports[0]; p.Name != "" {
			return networkingv1.ServiceBackendPort{Name: p.Name}
		}
		return networkingv1.ServiceBackendPort{Number: svc.Spec.Ports[0].Port}
	}
	return networkingv1.ServiceBackendPort{Number: 80}
}

// errorPages resolves an Ingress's custom-http-errors: its default-backend is a Service of
// its own namespace (tenants are walls: the name has no namespace part), spoken to in plain
// HTTP with the defaults. Without one the proxy's own (ErrorBackend) serves the pages.
func (b *builder) errorPages(id types.NamespacedName, ref *errorPagesRef) *table.ErrorPages {
	ep := &table.ErrorPages{Codes: ref.codes}
	if ref.service == "" {
		if b.in.DefaultBackendService.Name == "" && b.tb.Once(ingressRef(id), "custom-http-errors") {
			b.problem(id, table.ReasonInvalidAnnotation, "custom-http-errors: no default-backend annotation and no proxy default backend (--default-backend-service); the responses are passed on as they are")
		}
		return ep
	}
	svc := types.NamespacedName{Namespace: id.Namespace, Name: ref.service}
	ep.Backend = b.tb.Backend(ingressRef(id), svc, b.servicePort(svc, ref.port), table.DefaultOptions(), nil)
	return ep
}

// errorBackend resolves the proxy's own default backend (Input.DefaultBackendService).
func (b *builder) errorBackend() {
	id := b.in.DefaultBackendService
	if id.Name == "" {
		return
	}
	src := table.SourceRef{Kind: "Service", NamespacedName: id}
	b.tb.SetErrorBackend(b.tb.Backend(src, id, b.servicePort(id, b.in.DefaultBackendPort), table.DefaultOptions(), nil))
}
