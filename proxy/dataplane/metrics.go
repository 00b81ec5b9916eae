package dataplane

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the data plane's Prometheus metrics.
type Metrics struct {
	requests          [6]prometheus.Counter // by status class: 0 (other), 1xx … 5xx
	Duration          prometheus.Histogram
	UpstreamErrors    *prometheus.CounterVec
	Ejections         prometheus.Counter
	Retries           prometheus.Counter
	TableSwaps        prometheus.Counter
	LimitHits         *prometheus.CounterVec
	ConnsDiscarded    *prometheus.CounterVec
	ClientConnections *prometheus.GaugeVec
	Mirrors           *prometheus.CounterVec
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
)

// NewMetrics creates the data plane's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metalgate_proxy_requests_total",
		Help: "Requests served, by status class (1xx … 5xx).",
	}, []string{"code"})
	m := &Metrics{
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metalgate_proxy_request_duration_seconds",
			Help:    "Time from request to response headers written (upgraded connections: to the switch).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_upstream_errors_total",
			Help: "Requests that failed, by reason (connect, timeout, no_endpoints, unresolved_backend, tls, tls_settings, client_body, client_gone, response_headers_too_large, too_many_1xx, other).",
		}, []string{"reason"}),
		Ejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_endpoint_ejections_total",
			Help: "Endpoints taken out of rotation by passive health checks.",
		}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_retries_total",
			Help: "Requests retried on another endpoint after a connection failure.",
		}),
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
	for i, c := range []string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"} {
		m.requests[i] = reqs.WithLabelValues(c)
	}
	reg.MustRegister(reqs, m.Duration, m.UpstreamErrors, m.Ejections, m.Retries, m.TableSwaps, m.LimitHits, m.ConnsDiscarded, m.ClientConnections, m.Mirrors)
	return m
}

func (m *Metrics) request(code int) {
	if m == nil {
		return
	}
	i := code / 100
	if i < 1 || i > 5 {
		i = 0
	}
	m.requests[i].Inc()
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
