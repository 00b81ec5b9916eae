package table

import (
	"slices"
	"time"
)

// ErrorPages is ingress-nginx's custom-http-errors with default-backend: a response (the
// backend's, or the proxy's own 502, 503 or 504) whose status is one of Codes is replaced by
// a page fetched from Backend — the Ingress's default-backend Service, or, when nil, the
// table's ErrorBackend (the proxy's --default-backend-service). The client gets the
// original status with that page's body; the backend's own body is discarded unread.
type ErrorPages struct {
	// Codes are the statuses replaced, 400 to 599, sorted, without duplicates.
	Codes []int
	// Backend serves the pages; nil: the table's ErrorBackend.
	Backend *Backend
}

// Intercepts reports whether a response with status code gets an error page.
func (e *ErrorPages) Intercepts(code int) bool {
	if e == nil {
		return false
	}
	_, found := slices.BinarySearch(e.Codes, code)
	return found
}

// NextUpstreamOn is a set of the conditions under which a request is passed to another
// endpoint (ingress-nginx's proxy-next-upstream, nginx's proxy_next_upstream).
type NextUpstreamOn uint16

// The conditions of NextUpstreamOn.
const (
	// NextError: the connection failed, or failed while the request was sent or the response
	// head read.
	NextError NextUpstreamOn = 1 << iota
	// NextTimeout: connecting or waiting for the response head timed out.
	NextTimeout
	// NextInvalidHeader: the response head was malformed or too large.
	NextInvalidHeader
	NextHTTP500
	NextHTTP502
	NextHTTP503
	NextHTTP504
	NextHTTP403
	NextHTTP404
	NextHTTP429
	// NextNonIdempotent also passes on requests with a non-idempotent method (POST, PATCH,
	// LOCK) once they were sent.
	NextNonIdempotent
)

// NextUpstreamStatus maps the http_NNN conditions to their status codes.
var nextUpstreamStatus = map[int]NextUpstreamOn{
	500: NextHTTP500, 502: NextHTTP502, 503: NextHTTP503, 504: NextHTTP504,
	403: NextHTTP403, 404: NextHTTP404, 429: NextHTTP429,
}

// Status reports whether a response with status code is passed on.
func (n NextUpstreamOn) Status(code int) bool {
	c, ok := nextUpstreamStatus[code]
	return ok && n&c != 0
}

// NextUpstream is a route's retry policy. Off (no conditions) never tries another
// endpoint; Tries bounds the attempts (the first included), Timeout the time from the first
// attempt after which no other begins (0: none).
type NextUpstream struct {
	On      NextUpstreamOn
	Tries   int
	Timeout time.Duration
}

// AffinityMode says how a session keeps its endpoint under cookie affinity (ingress-nginx's
// affinity-mode).
type AffinityMode string

const (
	// AffinityBalanced (the default) maps the cookie's session key onto the endpoints by a
	// consistent hash: when endpoints are added, about 1/n of the sessions move to the new
	// ones, so that a scale-up takes load at once.
	AffinityBalanced AffinityMode = ""
	// AffinityPersistent names the endpoint in the cookie: a session stays on it as long as
	// it exists and is healthy, whatever is added.
	AffinityPersistent AffinityMode = "persistent"
)

// SetErrorBackend makes be the table's ErrorBackend.
func (b *Builder) SetErrorBackend(be *Backend) { b.t.ErrorBackend = be }
