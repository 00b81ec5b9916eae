package dataplane

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the data plane's Prometheus metrics.
type Metrics struct {
	requests       [6]prometheus.Counter // by status class: 0 (other), 1xx … 5xx
	Duration       prometheus.Histogram
	UpstreamErrors *prometheus.CounterVec
	Ejections      prometheus.Counter
	Retries        prometheus.Counter
	TableSwaps     prometheus.Counter
}

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
			Help: "Requests that failed at the backend, by reason (connect, timeout, no_endpoints, other).",
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
	}
	for i, c := range []string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"} {
		m.requests[i] = reqs.WithLabelValues(c)
	}
	reg.MustRegister(reqs, m.Duration, m.UpstreamErrors, m.Ejections, m.Retries, m.TableSwaps)
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
