package dataplane

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the data plane's Prometheus metrics. The per-route ones (routemetrics.go) are
// labelled by the route's identity (namespace, source_kind, source, service), and requests
// also by method and exact code; every label value is bounded by construction: it comes from
// the table or a fixed set, never from what a client sent.
type Metrics struct {
	requests          *prometheus.CounterVec   // routeLabels + method, code
	duration          *prometheus.HistogramVec // routeLabels
	requestSize       *prometheus.HistogramVec
	responseSize      *prometheus.HistogramVec
	upstreamConnect   *prometheus.HistogramVec
	upstreamFirstByte *prometheus.HistogramVec
	upstreamTotal     *prometheus.HistogramVec
	unrouted          *routeSeries // requests no route took
	TLSHandshakes     *prometheus.CounterVec
	SessionTickets    *prometheus.CounterVec
	AccessLogDropped  prometheus.Counter
	UpstreamErrors    *prometheus.CounterVec
	Ejections         prometheus.Counter
	Retries           *prometheus.CounterVec
	TableSwaps        prometheus.Counter
	LimitHits         *prometheus.CounterVec
	ConnsDiscarded    *prometheus.CounterVec
	ClientConnections *prometheus.GaugeVec
	Mirrors           *prometheus.CounterVec
	certs             *certExpiry     // read from the server's table at each scrape
	backends          *endpointSeries // endpoints per Service, read at each scrape
}

// Limits counted by metalgate_proxy_limit_hits_total.
const (
	limitClientBody              = "client_body_timeout"
	limitSendTimeout             = "send_timeout"
	limitUpstreamRead            = "upstream_read_timeout"
	limitUpstreamHeaderBytes     = "upstream_header_bytes"
	limitUpstream1xx             = "upstream_1xx"
	limitMaxConnections          = "max_connections"
	limitMaxConnectionsPerClient = "max_connections_per_client"
	limitPathRejected            = "path_rejected"
	limitMisdirected             = "misdirected_request"
	limitSourceRange             = "source_range"
	limitRefusedRoute            = "refused_route"
	limitRate                    = "rate_limit"
	limitProxyProtocol           = "proxy_protocol"
	limitAuth                    = "auth_failed"
	limitRedirectHost            = "redirect_host"
	limitAuthQueue               = "auth_queue_full"
	limitAuthWait                = "auth_wait_timeout"
	limitClientCertificate       = "client_certificate"
)

// NewMetrics creates the data plane's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	seconds := prometheus.ExponentialBuckets(0.0005, 2.5, 14) // 0.5 ms … 73 min
	bytes := prometheus.ExponentialBuckets(64, 4, 10)         // 64 B … 16 MiB
	histogram := func(o prometheus.HistogramOpts) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(o, routeLabelNames[:])
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_requests_total",
			Help: "Requests served, by route (namespace, source_kind, source, service), method (GET … TRACE, else OTHER) and exact status code; requests no route took have empty route labels.",
		}, append(routeLabelNames[:], "method", "code")),
		duration: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_request_duration_seconds",
			Help: "Time from request to the response handler's return (the body sent; upgraded connections: to the switch), by route.", Buckets: seconds}),
		requestSize: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_request_size_bytes",
			Help: "Request body bytes read from the client, by route.", Buckets: bytes}),
		responseSize: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_response_size_bytes",
			Help: "Response body bytes written to the client, by route.", Buckets: bytes}),
		upstreamConnect: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_upstream_connect_duration_seconds",
			Help: "Time to connect to an endpoint (TCP, and TLS for https backends) when a request needed a new HTTP/1.1 connection, by route.", Buckets: seconds}),
		upstreamFirstByte: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_upstream_first_byte_duration_seconds",
			Help: "Time from sending a request to an endpoint to its response headers, by route.", Buckets: seconds}),
		upstreamTotal: histogram(prometheus.HistogramOpts{Name: "metalgate_proxy_upstream_duration_seconds",
			Help: "Time from sending a request to an endpoint to the end of its response body, by route.", Buckets: seconds}),
		TLSHandshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_tls_handshakes_total",
			Help: "TLS handshakes with clients, by outcome (ok, no_certificate: no certificate for the server name, no_route: a TLS passthrough port has no route for the server name, failed: any other failure).",
		}, []string{"outcome"}),
		SessionTickets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_tls_session_tickets_total",
			Help: "TLS session tickets clients offered, by outcome (resumed: the session was resumed; other_server_name: the ticket was made for another server name and refused; unknown_key: no key in use decrypts it, e.g. made by a replica with other keys, or with a retired key).",
		}, []string{"outcome"}),
		AccessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_access_log_dropped_total",
			Help: "Access log lines dropped because the log's output (stdout) did not keep up, or failed.",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_upstream_errors_total",
			Help: "Requests that failed, by reason (connect, timeout, no_endpoints, unresolved_backend, tls, tls_settings, client_body, client_gone, response_headers_too_large, too_many_1xx, error_page, other).",
		}, []string{"reason"}),
		Ejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_endpoint_ejections_total",
			Help: "Endpoints taken out of rotation by passive health checks.",
		}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_retries_total",
			Help: "Requests sent again to another endpoint, by reason: connect (the connection failed), timeout, invalid_header (a malformed response head), error (another failure), or http_<code> (proxy-next-upstream on that status).",
		}, []string{"reason"}),
		TableSwaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_table_swaps_total",
			Help: "Routing tables installed.",
		}),
		LimitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_limit_hits_total",
			Help: "Requests or connections stopped by a limit, by limit (client_body_timeout, send_timeout, upstream_read_timeout, upstream_header_bytes, upstream_1xx, max_connections, max_connections_per_client, path_rejected, misdirected_request, source_range, refused_route, rate_limit, proxy_protocol, auth_failed, auth_queue_full, auth_wait_timeout, redirect_host).",
		}, []string{"limit"}),
		ConnsDiscarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_upstream_connections_discarded_total",
			Help: "Backend connections closed instead of reused because the response left bytes behind (unread_bytes), bytes came while idle (unsolicited_bytes), or the body was not read to its end (incomplete).",
		}, []string{"reason"}),
		ClientConnections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_proxy_client_connections",
			Help: "Client connections open, by listener (http, https).",
		}, []string{"listener"}),
		Mirrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_mirror_requests_total",
			Help: "Mirror copies of requests (HTTPRoute RequestMirror), by result: sent (the mirror answered), failed (no answer in time, or a broken one), dropped (too many mirror requests in flight), body_too_large (a body over 64 KiB is not mirrored), no_endpoints, unsupported (upgrades, h2c and gRPC backends).",
		}, []string{"result"}),
	}
	m.unrouted = m.newSeries(routeLabelValues{})
	m.certs = newCertExpiry()
	m.backends = newEndpointSeries()
	reg.MustRegister(m.certs, m.backends, m.requests, m.duration, m.requestSize, m.responseSize, m.upstreamConnect, m.upstreamFirstByte, m.upstreamTotal,
		m.TLSHandshakes, m.SessionTickets, m.AccessLogDropped, m.UpstreamErrors, m.Ejections, m.Retries, m.TableSwaps, m.LimitHits, m.ConnsDiscarded, m.ClientConnections, m.Mirrors)
	return m
}

func (s *Server) limitHit(limit string) {
	if m := s.opts.Metrics; m != nil {
		m.LimitHits.WithLabelValues(limit).Inc()
	}
}

func (s *Server) countMirror(result string) {
	if m := s.opts.Metrics; m != nil {
		m.Mirrors.WithLabelValues(result).Inc()
	}
}

func (s *Server) discarded(reason string) {
	if m := s.opts.Metrics; m != nil {
		m.ConnsDiscarded.WithLabelValues(reason).Inc()
	}
	if reason != discardIncomplete {
		s.opts.Logger.V(1).Info("backend connection discarded", "reason", reason)
	}
}

// Outcomes counted by metalgate_proxy_tls_handshakes_total.
const (
	handshakeOK            = "ok"
	handshakeNoCertificate = "no_certificate"
	handshakeFailed        = "failed"
	// handshakeNoRoute: a connection to a Gateway's TLS passthrough port that no TLSRoute
	// takes (no or an unknown server name, not TLS, too large or too slow a ClientHello).
	handshakeNoRoute = "no_route"
)

// noListenerCertificate starts the error of a handshake refused for want of a Gateway
// listener's certificate (counted as no_certificate, not again as failed).
const noListenerCertificate = "no HTTPS listener of this Gateway"

// sessionTicket counts a session ticket a client offered, by outcome (sessions.go).
func (s *Server) sessionTicket(outcome string) {
	if m := s.opts.Metrics; m != nil {
		m.SessionTickets.WithLabelValues(outcome).Inc()
	}
}

func (s *Server) tlsHandshake(outcome string) {
	if m := s.opts.Metrics; m != nil {
		m.TLSHandshakes.WithLabelValues(outcome).Inc()
	}
}

// handshakeLog is the http.Server's error log: it counts the failed TLS handshakes the
// server reports there ("http: TLS handshake error from …"), which nothing else sees, and
// passes every line to the logger at V(1) (a client's failed handshake is not the proxy's
// error).
type handshakeLog struct{ s *Server }

func (l handshakeLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	if strings.Contains(line, "TLS handshake error") && !strings.Contains(line, noListenerCertificate) {
		l.s.tlsHandshake(handshakeFailed)
	}
	l.s.opts.Logger.V(1).Info("http server", "message", line)
	return len(p), nil
}
