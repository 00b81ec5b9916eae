package table

import (
	"net/netip"
	"regexp"
	"slices"
	"time"
)

// Policy is what a route does besides choosing an endpoint: the one route model that Ingress
// annotations compile into (metalgate.io/… and their nginx.ingress.kubernetes.io/… forms),
// and that Gateway API filters are to compile into. The data plane applies it in one place
// for both forwarding paths. The zero value does nothing.
type Policy struct {
	// Refuse, when set, says why every request is refused (403): the Ingress asks for a
	// protection the proxy cannot enforce (an unsupported Protection, an unreadable address
	// list), and serving it without would let in whom it keeps out.
	Refuse string
	// Allow, when not empty, lists the only client addresses served; Deny lists refused ones
	// (Deny wins). Others get 403. The client address is the connection's, or what a trusted
	// proxy or the PROXY protocol says.
	Allow, Deny []netip.Prefix
	// RateLimit, when set, limits requests (and connections) per client address.
	RateLimit *RateLimit
	// Redirect answers every request with a redirect instead of forwarding it.
	Redirect *Redirect
	// RequestRedirect answers every request with a redirect built from the request (Gateway
	// API's RequestRedirect filter).
	RequestRedirect *RequestRedirect
	// HTTPSRedirect, when not 0, is the status of the redirect to https:// that plain-HTTP
	// requests get (308). OnlyWithTLS limits it to routes whose host is in spec.tls.
	HTTPSRedirect int
	HTTPSOnlyTLS  bool
	// AppRoot redirects requests for "/" there (302).
	AppRoot string
	// CORS answers preflight requests and adds the CORS headers to responses.
	CORS *CORS
	// BasicAuth asks for a user and password from an htpasswd Secret.
	BasicAuth *BasicAuth
	// ExternalAuth asks an authentication service about each request first (ingress-nginx's
	// auth-url): a 2xx lets it through, 401 and 403 answer the client.
	ExternalAuth *ExternalAuth
	// Rewrite changes the path the backend sees.
	Rewrite *Rewrite
	// UpstreamHost replaces the Host header the backend sees (upstream-vhost).
	UpstreamHost string
	// ForwardedPrefix, when set, is sent as X-Forwarded-Prefix.
	ForwardedPrefix string
	// RequestHeaders change what the backend sees; ResponseHeaders what the client sees.
	RequestHeaders, ResponseHeaders HeaderEdits
	// Timeouts override the proxy's own for this route's backend (0: the proxy's).
	Timeouts Timeouts
	// RequestTimeout, when not 0, bounds the whole exchange with the backend (Gateway API
	// timeouts): no response head by then is 504; a response still streaming is cut. Not
	// applied to protocol upgrades (WebSocket), which are long-lived by design.
	RequestTimeout time.Duration
	// Mirrors each get a copy of a sample of the requests (Gateway API's RequestMirror
	// filter); their responses are discarded and the client's response never waits for them.
	Mirrors []Mirror
	// ErrorPages replaces responses of some statuses by an error page (custom-http-errors).
	ErrorPages *ErrorPages
	// NextUpstream, when set, is when and how often a request is passed to another endpoint
	// (proxy-next-upstream); nil: connection failures of requests without a body only, on up
	// to the server's Retries other endpoints.
	NextUpstream *NextUpstream
}

// Mirror is one mirror of a route: a copy of Numerator out of every Denominator requests
// (chosen at random) goes to Backend, with the headers the route's own backend gets. A
// Backend that is Unresolved (the route's ResolvedRefs says why) gets nothing.
type Mirror struct {
	Backend                *Backend
	Numerator, Denominator int
}

// RateLimit is a token bucket per client address: RPS requests a second on average, Burst
// at once; Connections caps the requests in flight per client address (0: none).
type RateLimit struct {
	RPS         float64
	Burst       int
	Connections int
}

// Redirect is a fixed redirect: the client is sent to URL with Code (301, 302, 307, 308).
type Redirect struct {
	URL  string
	Code int
}

// RequestRedirect is a redirect built from the request: each part the request's own unless
// set. Scheme "" keeps the request's (https when it came over TLS); Host "" keeps its host;
// Port 0 is the scheme's well-known port when Scheme is set, else the port the request came
// to; the port is left out of the Location when it is the scheme's well-known one. FullPath
// replaces the whole path, PrefixPath the prefix the route matched (the rest and the query
// kept); neither keeps the path.
type RequestRedirect struct {
	Scheme     string
	Host       string
	Port       int
	FullPath   *string
	PrefixPath *string
	Code       int
}

// CORS is the cross-origin policy of a route (the Fetch standard's CORS protocol), in one of
// two flavours: ingress-nginx's enable-cors annotations (Gateway nil), or Gateway API's CORS
// filter (Gateway set; cors_gateway.go says how its semantics differ).
type CORS struct {
	AllowOrigins []string // "*" for any; otherwise origins as written ("https://*.a.example")
	// Origins are AllowOrigins parsed (the ingress-nginx flavour; none for "*"): matched as the
	// Gateway flavour matches its own (AllowsOrigin).
	Origins          []OriginPattern
	AllowMethods     string
	AllowHeaders     string
	ExposeHeaders    string
	AllowCredentials bool
	MaxAge           int // seconds a preflight may be cached
	// Gateway, when set, holds the filter's origin patterns and wildcards and switches the
	// data plane to Gateway API's semantics.
	Gateway *GatewayCORS
}

// AllowsOrigin reports whether a request's Origin is allowed, by the one matcher of both
// flavours: scheme, host (any case) and port (the scheme's own when none is written) as
// listed, and a leftmost "*" label standing for one or more labels (https://*.example.org
// allows https://a.b.example.org, never https://example.org or https://evilexample.org).
// With "*" listed, the ingress-nginx flavour allows every origin.
func (c *CORS) AllowsOrigin(origin string) bool {
	if c.Gateway != nil {
		return c.Gateway.AllowsOrigin(origin)
	}
	if slices.Contains(c.AllowOrigins, "*") {
		return true
	}
	return matchOrigin(false, c.Origins, origin)
}

// BasicAuth is HTTP Basic authentication (RFC 7617) against htpasswd lines from a Secret.
// Users empty refuses everyone: the Secret is missing or unusable (a Problem says why);
// authentication never fails open.
type BasicAuth struct {
	Realm string
	// Users maps a user name to its htpasswd hash (bcrypt, $apr1$ or {SHA}: CheckPassword).
	Users map[string]string
	// Version identifies the Secret's content, so that a verification cache forgets what it
	// knew when the Secret changes.
	Version string
	// Decoy is the hash a user not in Users is checked against (the result thrown away), so
	// that an unknown user costs what a known one does: one of Users' hashes, the most
	// expensive. "" when Users is empty.
	Decoy string
}

// Rewrite changes the request path before it is forwarded. With Regex, the route's path is
// a regular expression and the whole path becomes Target with $1…$9 expanded from its
// groups (ingress-nginx's rewrite-target); without, the route's matched prefix is replaced
// by Target (Gateway API's ReplacePrefixMatch). The query is kept either way.
type Rewrite struct {
	Target string
	Regex  bool
}

// HeaderEdits set (replace), add (append) and remove headers, in that order: remove first.
type HeaderEdits struct {
	Set, Add []Header
	Remove   []string
}

// Header is one header line.
type Header struct{ Name, Value string }

// Empty reports whether the edits change nothing.
func (e HeaderEdits) Empty() bool { return len(e.Set) == 0 && len(e.Add) == 0 && len(e.Remove) == 0 }

// Timeouts are per-route backend timeouts (ingress-nginx's proxy-connect-timeout,
// proxy-read-timeout, proxy-send-timeout).
type Timeouts struct {
	Connect time.Duration // dialing an endpoint
	Read    time.Duration // the response head, and each read of the body
	Send    time.Duration // each write of the request to the backend
}

// RegexRoute compiles a route path written as a regular expression the way ingress-nginx
// matches it: Anchored at the start, case-insensitive. RE2 syntax (no look-around or back
// references).
func RegexRoute(path string) (*regexp.Regexp, error) {
	return regexp.Compile("(?i)^" + path)
}

// CanaryRule says which requests of a route go to a canary Ingress's backend instead of the
// route's own: by header (always/never, an exact value, or a regular expression), then by
// cookie (always/never), then by weight, as ingress-nginx decides.
type CanaryRule struct {
	Header        string
	HeaderValue   string
	HeaderPattern *regexp.Regexp
	Cookie        string
	Weight        int // out of WeightTotal
	WeightTotal   int
}

// Canary is a canary Ingress (or the second backend of a Gateway rule) attached to the
// route it shadows; Source names that Ingress (or the rule's route).
type Canary struct {
	CanaryRule
	Source  SourceRef
	Backend *Backend
}

// ExternalAuth is an authentication service asked before a request is forwarded, with the
// request's headers and no body. The service is either a Service — of the Ingress's own
// namespace, or of another whose ReferenceGrant allows it — reached at its endpoints like any
// backend (Backend), or a host outside the cluster that the install lists (Outside); never an
// address a tenant could point at the API server or a metadata service. Neither set refuses
// every request (a Problem says why).
type ExternalAuth struct {
	Backend *Backend
	Outside *OutsideAuth
	Host    string // the Host header of the check: the auth-url's host
	Path    string // the auth-url's path and query
	Method  string // GET unless auth-method
	// Signin, when set, is where a 401 sends the client instead (302), with rd= the URL it
	// asked for; $host, $scheme, $request_uri and $escaped_request_uri are replaced.
	Signin string
	// ResponseHeaders are copied from the service's answer into the forwarded request; the
	// client's own headers of those names are dropped either way.
	ResponseHeaders []string
	// RequestRedirect, when set, is sent as X-Auth-Request-Redirect instead of the URI.
	RequestRedirect string
}
