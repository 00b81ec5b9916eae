package dataplane

import (
	"net/http"
	"strings"

	"github.com/metalgate/metalgate/proxy/table"
)

// DefaultHSTS is the Strict-Transport-Security header ingress-nginx sends by default (its
// ConfigMap's hsts, hsts-max-age and hsts-include-subdomains): a year, subdomains included.
const DefaultHSTS = "max-age=31536000; includeSubDomains"

const headerSTS = "Strict-Transport-Security"

// hstsMode is what a response's Strict-Transport-Security header becomes when the proxy
// sends HSTS (Options.HSTS not "-"): then the proxy owns the header.
type hstsMode uint8

const (
	// hstsRemove: none. The zero value, for every response that is not HTTPS on a host
	// with TLS: RFC 6797 §7.2, an HSTS host must not send it over plain HTTP, so a backend's
	// own (or one a backend echoes from a client's request) is removed too.
	hstsRemove hstsMode = iota
	// hstsSet: the proxy's value, replacing the backend's (as ingress-nginx does).
	hstsSet
	// hstsRoute: the route edits the header itself (response-headers-set, -add or -remove),
	// on HTTPS: what the edit leaves is kept, the Ingress owner's choice over the default.
	hstsRoute
	// hstsKeep: the backend's, whatever it is: a Gateway API route (HSTS is an Ingress
	// default of ingress-nginx; Gateway API has none, and its routes keep what they had).
	hstsKeep
)

// hstsFor decides the header for a request routed to route: the proxy's over TLS for a route
// whose host the Ingress lists under spec.tls, the route's own edit when it makes one, else
// none; a Gateway route's responses are left alone. The connection decides, never a
// header: a client's X-Forwarded-Proto cannot ask for it.
func hstsFor(r *http.Request, route *table.Route) hstsMode {
	if route.Source.IsGateway() {
		return hstsKeep
	}
	if r.TLS == nil || !route.TLS {
		return hstsRemove
	}
	e := &route.Options.Policy.ResponseHeaders
	for _, hs := range [][]table.Header{e.Set, e.Add} {
		for _, h := range hs {
			if strings.EqualFold(h.Name, headerSTS) {
				return hstsRoute
			}
		}
	}
	for _, n := range e.Remove {
		if strings.EqualFold(n, headerSTS) {
			return hstsRoute
		}
	}
	return hstsSet
}

// applyHSTS makes header h of a response with status code follow mode. A 1xx response
// never carries it (it is a header of the final response).
func (s *Server) applyHSTS(h http.Header, code int, mode hstsMode) {
	switch {
	case mode == hstsSet && code >= 200:
		h[headerSTS] = s.hsts
	case mode == hstsKeep, mode == hstsRoute && code >= 200:
	default:
		delete(h, headerSTS)
	}
}
