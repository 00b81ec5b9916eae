package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
)

// Options configure the data plane. The zero value works; each field says its default.
type Options struct {
	// DefaultCertificate is served when no Ingress certificate matches the SNI name (or there
	// is none). Default: a self-signed certificate generated at start.
	DefaultCertificate *tls.Certificate
	// TrustedProxies are the client addresses whose X-Forwarded-*, X-Real-IP, Forwarded and
	// X-Request-Id headers are kept (extended). Default: none; they are replaced.
	TrustedProxies []netip.Prefix
	// H2C accepts HTTP/2 with prior knowledge on the plain-text listener. Default false.
	H2C bool
	// ProxyProtocolHTTP and ProxyProtocolHTTPS take the PROXY protocol on each listener from
	// the ProxyProtocolFrom sources (listener.go). Default off.
	ProxyProtocolHTTP, ProxyProtocolHTTPS ProxyProtocol
	ProxyProtocolFrom                     []netip.Prefix

	// ConnectTimeout bounds dialing an endpoint. Default 5s.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a backend's response head (1xx responses
	// included). Default 60s.
	ResponseHeaderTimeout time.Duration
	// UpstreamReadTimeout bounds the wait for each read of a backend's response body (idle,
	// not total: a stream that keeps sending lives on). Default 60s, as nginx's
	// proxy_read_timeout; negative disables.
	UpstreamReadTimeout time.Duration
	// UpstreamIdleTimeout closes idle upstream keep-alive connections. Default 90s.
	UpstreamIdleTimeout time.Duration
	// MaxIdlePerEndpoint is the keep-alive pool size per endpoint. Default 512.
	MaxIdlePerEndpoint int
	// MaxResponseHeaderBytes limits a backend's response head, and the heads of its 1xx
	// responses together. Over it: 502. Default 1 MiB.
	MaxResponseHeaderBytes int64
	// Max1xxResponses limits the informational responses (103 Early Hints and the like)
	// before a final one; over it: 502. Default 8.
	Max1xxResponses int

	// ReadHeaderTimeout bounds reading a client's request headers (slowloris), and the TLS
	// handshake. Default 10s.
	ReadHeaderTimeout time.Duration
	// ClientBodyTimeout bounds each read of a client's request body (idle, not total); over
	// it: 408, and the backend connection is closed. Default 60s, as nginx's
	// client_body_timeout; negative disables.
	ClientBodyTimeout time.Duration
	// SendTimeout bounds each write of a response to a client (a slow or stalled reader);
	// over it the connection is closed. Default 60s, as nginx's send_timeout; negative
	// disables.
	SendTimeout time.Duration
	// HTTP2WriteTimeout closes an HTTP/2 connection to which nothing could be written for
	// this long. Default 60s; negative disables.
	HTTP2WriteTimeout time.Duration
	// HTTP2MaxConcurrentStreams limits the streams of one HTTP/2 connection. Default 250.
	HTTP2MaxConcurrentStreams int
	// ClientIdleTimeout closes idle client keep-alive connections. Default 120s.
	ClientIdleTimeout time.Duration
	// MaxHeaderBytes limits a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes limits request bodies of routes without a limit of their own: Gateway API
	// routes, and Ingress routes when IngressMaxBodyBytes is 0. Default 0: unlimited.
	MaxBodyBytes int64
	// IngressMaxBodyBytes limits request bodies of Ingress routes without
	// metalgate.io/proxy-body-size (cmd/metalgate gives ingress-nginx's 1m). Default 0:
	// MaxBodyBytes; -1: unlimited.
	IngressMaxBodyBytes int64
	// MaxConnections limits the client connections open at once on each listener; a
	// connection over it is closed when accepted. Default 16384; negative: no limit.
	MaxConnections int
	// MaxConnectionsPerClient limits them per client address on each listener: with the
	// PROXY protocol, the address its header names (counted once the header is read).
	// Default 0: no limit (clients behind one NAT share an address).
	MaxConnectionsPerClient int
	// RateLimitIPv6Prefix is the prefix length by which rate limits key IPv6 clients: one
	// host usually has a whole /64. Default 64; 128 keys each address on its own.
	RateLimitIPv6Prefix int
	// rateLimitClients (tests only) bounds each namespace's rate-limit table. Default
	// defaultRateLimitClients.
	rateLimitClients int

	// EscapedSlashes is the policy for %2F, %5C and '\' in request paths (path.go).
	// Default EscapedSlashesReject: 400.
	EscapedSlashes EscapedSlashes
	// KeepDuplicateSlashes routes and forwards "//" as sent. Default false: merged.
	KeepDuplicateSlashes bool
	// SSLPassthrough makes the HTTPS listener read each ClientHello's server name before
	// anything else and pass the connections for the table's passthrough hosts, undecrypted,
	// to their backend (passthrough.go). Default false.
	SSLPassthrough bool
	// AllowUnderscoreHeaders forwards request headers with '_' in their names. Default
	// false: dropped (headers.go says why).
	AllowUnderscoreHeaders bool
	// ServerHeader is the Server header of every response (the backend's is replaced).
	// Default "metalgate"; "-" sends none.
	ServerHeader string
	// HSTS is the Strict-Transport-Security header of HTTPS responses for hosts that an
	// Ingress lists under spec.tls, as ingress-nginx sends it (hsts.go says which responses
	// carry it and why). Default DefaultHSTS; "-" sends none and leaves backends' own alone.
	HSTS string
	// PublicHTTPPort and PublicHTTPSPort are the ports clients connect to, sent as
	// X-Forwarded-Port: the proxy's Service ports, not its container ports. Defaults 80, 443.
	PublicHTTPPort, PublicHTTPSPort int
	// AffinityKey keys the HMAC that names endpoints in affinity cookies; every replica needs
	// the same. Default: 32 random bytes (cookies then pin to one replica's names only).
	AffinityKey []byte

	// AuthCheckSlots is how many password checks of basic authentication (bcrypt) run at
	// once, across namespaces; one namespace gets at most half of them (at least one), and a
	// free slot goes to the waiting namespace that holds the fewest (authslots.go). Default:
	// the number of CPUs (GOMAXPROCS), at least 2.
	AuthCheckSlots int
	// AuthCheckWait bounds a password check's wait for a slot; then 503 with Retry-After.
	// A check refused because its namespace's queue is full is answered (429) after the
	// same time. Default 3s.
	AuthCheckWait time.Duration
	// AuthCheckNice, 1 to 19: the password checks of a namespace that has spent its budget of
	// check time (a tenth of a CPU; authslots.go) run on OS threads of their own at this
	// nice value (Linux), so that its bcrypt gets the CPU only as far as request handling
	// leaves it (auth.go, basicAuth.hash). 0: every check runs on its request's goroutine at
	// the proxy's priority.
	AuthCheckNice int
	// authCompare (tests only) replaces table.CheckPassword, to count or hold checks.
	authCompare func(hash, password string) bool
	// authClock (tests only) replaces time.Now for the password checks' budgets.
	authClock func() time.Time
	// externalAuthAddrs decides which addresses an outside authentication service (an
	// auth-url host --external-auth-hosts lists) may be reached at, checked as each
	// connection is made. Set by defaults to publicAddress; only tests replace it (to let a
	// loopback server stand in for an outside one).
	externalAuthAddrs func(netip.Addr) error
	// externalAuthLookup (tests only) resolves outside auth host names instead of the
	// system resolver; externalAuthRoots (tests only) verifies https ones instead of the
	// system's roots.
	// When it does not know a name (false), the system resolver does.
	externalAuthLookup func(host string) ([]netip.Addr, bool)
	// externalAuthEscaped (tests only, with externalAuthLookup) is told of each address the
	// policy allowed that is not loopback; the test guard then refuses it before connecting.
	externalAuthEscaped func(netip.Addr)
	externalAuthRoots   *x509.CertPool

	// ErrorPageTimeout bounds fetching an error page from an error backend (errorpages.go);
	// then the built-in page is sent. Default 10s.
	ErrorPageTimeout time.Duration

	// Retries is how many other endpoints an idempotent request without a body is retried on
	// after a connection failure. Default 2; negative disables.
	Retries int
	// FailureThreshold consecutive connection failures eject an endpoint for EjectFor.
	// Defaults 3 and 10s.
	FailureThreshold int
	EjectFor         time.Duration
	// ShutdownTimeout is how long Serve waits for requests in flight when ctx ends, after
	// ShutdownDelay. Default 30s.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long Serve goes on accepting after ctx ends, draining (Draining
	// reports true, responses carry Connection: close or a GOAWAY), before it stops
	// listening. Default 0: it stops at once.
	ShutdownDelay time.Duration
	// delayOver (tests only) replaces time.After for the end of ShutdownDelay.
	delayOver func(time.Duration) <-chan time.Time

	// DialContext connects to an endpoint. Default: a net.Dialer with ConnectTimeout. Tests
	// use it to map pod addresses onto loopback ones.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// DisableDirectPath sends every request through ReverseProxy instead of the direct path
	// for HTTP/1.x GET and HEAD without a body. Both use the same HTTP/1.1 transport.
	// Default false.
	DisableDirectPath bool
	// stdlibTransport (tests only) sends HTTP/1.1 requests through ReverseProxy and
	// http.Transport, the reference semantics the differential tests compare with.
	stdlibTransport bool

	// AccessLog, when set, receives the access log: one JSON object per line per request
	// (accesslog.go), written by a goroutine of its own; a line that would wait behind more
	// than 1 MiB of others is dropped and counted. Default nil: no access log.
	AccessLog io.Writer
	// AccessLogSample is the fraction of requests logged, more than 0 and at most 1.
	// Default (0): 1, every request.
	AccessLogSample float64
	// AccessLogFields selects the fields logged (AccessLogFieldNames), in their own order.
	// Default (nil): all.
	AccessLogFields []string
	// AccessLogQuery logs the path with its query. Default false: without (a query often
	// carries tokens).
	AccessLogQuery bool
	// Tracer, when set, starts a server span per routed request (spans.go) and sends the
	// backend the span as its parent; proxy/tracing builds one that exports over OTLP.
	// Default nil: no spans, trace context only passed on (trace.go).
	Tracer trace.Tracer
	// Logger receives errors and debug messages. Default: discard.
	Logger logr.Logger
	// Metrics, when set, count requests, upstream errors and limits.
	Metrics *Metrics
}

// defaults fills in every unset option (each default is documented on its field) and refuses
// values out of range. It is long because it is a flat list, one line or case per option, in
// the order of the fields; split, the defaults would no longer read beside each other.
func (o *Options) defaults() error {
	def := func(d *time.Duration, v time.Duration) {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			*d = 0 // disabled
		}
	}
	def(&o.ConnectTimeout, 5*time.Second)
	def(&o.ResponseHeaderTimeout, 60*time.Second)
	def(&o.UpstreamReadTimeout, 60*time.Second)
	def(&o.UpstreamIdleTimeout, 90*time.Second)
	def(&o.ReadHeaderTimeout, 10*time.Second)
	def(&o.ClientBodyTimeout, 60*time.Second)
	def(&o.SendTimeout, 60*time.Second)
	def(&o.HTTP2WriteTimeout, 60*time.Second)
	def(&o.ClientIdleTimeout, 120*time.Second)
	def(&o.EjectFor, 10*time.Second)
	def(&o.ShutdownTimeout, 30*time.Second)
	def(&o.ErrorPageTimeout, 10*time.Second)
	switch {
	case o.AccessLogSample == 0:
		o.AccessLogSample = 1
	case !(o.AccessLogSample > 0 && o.AccessLogSample <= 1): // NaN too
		return fmt.Errorf("access log sample %v: want a fraction more than 0 and at most 1", o.AccessLogSample)
	}
	if _, err := parseAccessLogFields(o.AccessLogFields); err != nil {
		return err
	}
	if o.AuthCheckWait < 0 {
		return fmt.Errorf("authentication check wait %v: want more than 0 (a check must not wait for ever)", o.AuthCheckWait)
	}
	def(&o.AuthCheckWait, 3*time.Second)
	switch {
	case o.AuthCheckSlots == 0:
		o.AuthCheckSlots = DefaultAuthCheckSlots()
	case o.AuthCheckSlots < 0:
		return fmt.Errorf("authentication check slots %d: want 1 or more", o.AuthCheckSlots)
	}
	if o.AuthCheckNice < 0 || o.AuthCheckNice > 19 {
		return fmt.Errorf("authentication check nice value %d: want 0 (the proxy's priority) to 19 (the lowest)", o.AuthCheckNice)
	}
	if o.MaxIdlePerEndpoint == 0 {
		o.MaxIdlePerEndpoint = 512
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.MaxResponseHeaderBytes == 0 {
		o.MaxResponseHeaderBytes = 1 << 20
	}
	if o.Max1xxResponses == 0 {
		o.Max1xxResponses = 8
	}
	if o.HTTP2MaxConcurrentStreams == 0 {
		o.HTTP2MaxConcurrentStreams = 250
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 16384
	}
	switch {
	case o.RateLimitIPv6Prefix == 0:
		o.RateLimitIPv6Prefix = 64
	case o.RateLimitIPv6Prefix < 1 || o.RateLimitIPv6Prefix > 128:
		return fmt.Errorf("rate limit IPv6 prefix length %d: want 1 to 128", o.RateLimitIPv6Prefix)
	}
	if o.rateLimitClients == 0 {
		o.rateLimitClients = defaultRateLimitClients
	}
	if o.externalAuthAddrs == nil {
		o.externalAuthAddrs = publicAddress
	}
	if o.Retries == 0 {
		o.Retries = 2
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 3
	}
	if o.ServerHeader == "" {
		o.ServerHeader = "metalgate"
	}
	if o.HSTS == "" {
		o.HSTS = DefaultHSTS
	}
	if o.PublicHTTPPort == 0 {
		o.PublicHTTPPort = 80
	}
	if o.PublicHTTPSPort == 0 {
		o.PublicHTTPSPort = 443
	}
	for _, pp := range []ProxyProtocol{o.ProxyProtocolHTTP, o.ProxyProtocolHTTPS} {
		switch pp {
		case ProxyProtocolOff, ProxyProtocolOptional, ProxyProtocolRequired:
		default:
			return fmt.Errorf("PROXY protocol mode %q: want %q, %q or %q", pp, "off", ProxyProtocolOptional, ProxyProtocolRequired)
		}
		if pp != ProxyProtocolOff && len(o.ProxyProtocolFrom) == 0 {
			return fmt.Errorf("PROXY protocol %s needs the sources it may come from (ProxyProtocolFrom): a header from anyone else would be a forged client address", pp)
		}
	}
	switch o.EscapedSlashes {
	case "":
		o.EscapedSlashes = EscapedSlashesReject
	case EscapedSlashesReject, EscapedSlashesKeep, EscapedSlashesDecode:
	default:
		return fmt.Errorf("escaped slashes policy %q: want %s, %s or %s", o.EscapedSlashes, EscapedSlashesReject, EscapedSlashesKeep, EscapedSlashesDecode)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"public HTTP port", o.PublicHTTPPort}, {"public HTTPS port", o.PublicHTTPSPort}} {
		if p.v < 1 || p.v > 65535 {
			return fmt.Errorf("%s %d: want 1 to 65535", p.name, p.v)
		}
	}
	return nil
}

// DefaultAuthCheckSlots is Options.AuthCheckSlots's default: the number of CPUs the runtime
// uses (GOMAXPROCS), at least 2, so that a namespace's share (half) leaves another one slot.
func DefaultAuthCheckSlots() int {
	return max(runtime.GOMAXPROCS(0), 2)
}
