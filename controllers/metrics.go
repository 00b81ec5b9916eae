package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics. Create them once with NewMetrics.
type Metrics struct {
	InUse       *prometheus.GaugeVec
	Usable      *prometheus.GaugeVec
	Allocations prometheus.Counter
	Failures    *prometheus.CounterVec
	Conflicts   prometheus.Counter
	Releases    prometheus.Counter
	LostClaims  prometheus.Counter
	// AllocationDuration: from the start of the reconcile to its status write, for Services
	// newly given addresses.
	AllocationDuration prometheus.Histogram
	// Pending: Services whose last allocation was refused, waiting for an address.
	Pending prometheus.Gauge
}

// NewMetrics creates the controller's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		InUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_pool_addresses_in_use",
			Help: "Addresses of the pool assigned to Services (a shared address counts once).",
		}, []string{"pool", "family"}),
		Usable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_pool_addresses_usable",
			Help: "Addresses of the pool that can be assigned (after avoidBuggyIPs), in use or not; saturates at 2^63-1.",
		}, []string{"pool", "family"}),
		Allocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_allocations_total",
			Help: "Services that were given new addresses.",
		}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_allocation_failures_total",
			Help: "Allocations that failed, by reason (exhausted, in_use, not_in_pool, family_unavailable, sharing_refused, no_such_pool, pool_not_eligible, invalid_request, other).",
		}, []string{"reason"}),
		Conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_claim_conflicts_total",
			Help: "Addresses this controller chose but found claimed by another Service on the API server (a race with another writer, lost safely).",
		}),
		Releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_claim_releases_total",
			Help: "Holds on address claims this controller released after withdrawing the address from the Service's status.",
		}),
		LostClaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_claims_lost_before_publish_total",
			Help: "Status writes not made because, checked on the API server just before, a claim no longer held the Service (another controller released or took it): nothing was published, the Service was tried again.",
		}),
		AllocationDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metalgate_allocation_duration_seconds",
			Help:    "Time from the start of the reconcile that gave a Service new addresses to its status written (API round trips included; the wait of a pending Service is not).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_services_pending",
			Help: "LoadBalancer Services of this controller whose last allocation was refused (pool exhausted, address in use, …): waiting for an address. 0 on a controller that is not the leader.",
		}),
	}
	reg.MustRegister(m.InUse, m.Usable, m.Allocations, m.Failures, m.Conflicts, m.Releases, m.LostClaims,
		m.AllocationDuration, m.Pending)
	return m
}
