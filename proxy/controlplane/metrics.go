package controlplane

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the control plane's Prometheus metrics. Create them once with NewMetrics.
type Metrics struct {
	ChangeApplied    prometheus.Histogram
	Builds           prometheus.Counter
	Patches          prometheus.Counter
	BuildDuration    prometheus.Histogram
	Problems         prometheus.Gauge
	StatusWrites     *prometheus.CounterVec
	StatusConflicts  prometheus.Counter
	AddressMissing   prometheus.Gauge
	IngressesYielded *prometheus.GaugeVec
	Announced        prometheus.Gauge
	StatusWriter     prometheus.Gauge
	WatchErrors      *prometheus.CounterVec
	TableIngresses   prometheus.Gauge
	TableEndpoints   prometheus.Gauge
	freshness        *Freshness
	freshnessAgeDesc *prometheus.Desc
	freshnessOKDesc  *prometheus.Desc
}

// NewMetrics creates the control plane's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ChangeApplied: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metalgate_proxy_change_applied_seconds",
			Help:    "Time from the first watch event of a batch to the swap of the table that includes it (full build or endpoint patch).",
			Buckets: []float64{.005, .01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10},
		}),
		Builds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_table_builds_total",
			Help: "Routing tables built in full from the cache and swapped in.",
		}),
		Patches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_table_patches_total",
			Help: "Endpoint-only changes applied by the fast path: the table in use patched with the changed Services' endpoints, no full build.",
		}),
		BuildDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metalgate_proxy_table_build_seconds",
			Help:    "Time to snapshot the cache and build one routing table.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		Problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_ingress_problems",
			Help: "Problems found in owned Ingresses by the last build (each is also a Warning event).",
		}),
		StatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_status_writes_total",
			Help: "Ingress status writes, by result (ok, error, cleared).",
		}, []string{"result"}),
		StatusConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_status_conflicts_total",
			Help: "Times another writer was found overwriting the status this proxy wrote (the proxy backs off, then stops; see metalgate_proxy_ingresses_yielded).",
		}),
		AddressMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_status_address_missing",
			Help: "1 when the proxy's own Service has no load-balancer address (or is not found), so no status is written.",
		}),
		IngressesYielded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_proxy_ingresses_yielded",
			Help: "Owned Ingresses whose status this proxy leaves to another writer, by reason: proxy (another metalgate proxy wins the arbitration), annotation (metalgate.io/status-owner names another writer), foreign (another writer kept replacing it).",
		}, []string{"reason"}),
		Announced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_announced",
			Help: "1 when this proxy's publish Service carries its announcement (other metalgate proxies can arbitrate with it); leader only.",
		}),
		StatusWriter: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_status_writer",
			Help: "1 while this replica holds the status Lease and writes Ingress status; 0 while it campaigns (serving goes on either way).",
		}),
		WatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_watch_errors_total",
			Help: "Watch or list failures, by kind.",
		}, []string{"kind"}),
		TableIngresses: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_table_ingresses",
			Help: "Owned Ingresses in the current table.",
		}),
		TableEndpoints: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_table_endpoints",
			Help: "Endpoints (pod ip:port) across the backends of the current table.",
		}),
		freshnessAgeDesc: prometheus.NewDesc("metalgate_proxy_watch_last_event_age_seconds",
			"Seconds since the last watch event or successful list of this kind.", []string{"kind"}, nil),
		freshnessOKDesc: prometheus.NewDesc("metalgate_proxy_watch_healthy",
			"1 when the watch of this kind is not known to be broken.", []string{"kind"}, nil),
	}
	reg.MustRegister(m.ChangeApplied, m.Builds, m.Patches, m.BuildDuration, m.Problems, m.StatusWrites, m.StatusConflicts,
		m.AddressMissing, m.IngressesYielded, m.Announced, m.StatusWriter, m.WatchErrors, m.TableIngresses, m.TableEndpoints, m)
	return m
}

// Describe implements prometheus.Collector for the freshness gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.freshnessAgeDesc
	ch <- m.freshnessOKDesc
}

// Collect implements prometheus.Collector: freshness is computed when scraped.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	f := m.freshness
	if f == nil {
		return
	}
	for _, k := range f.Snapshot() {
		ch <- prometheus.MustNewConstMetric(m.freshnessAgeDesc, prometheus.GaugeValue, k.Age.Seconds(), k.Kind)
		ok := 1.0
		if k.Broken {
			ok = 0
		}
		ch <- prometheus.MustNewConstMetric(m.freshnessOKDesc, prometheus.GaugeValue, ok, k.Kind)
	}
}
