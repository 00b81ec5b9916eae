package dataplane

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/proxy/table"
)

// certExpiry exports metalgate_proxy_certificate_expiry_timestamp_seconds: the end of validity
// of each certificate the table in use serves, read when Prometheus scrapes (not on every Swap:
// the endpoint fast path swaps tables often, certificates rarely change). Its labels come from
// the table (an Ingress host and its owner namespace, or a Gateway listener), never from a
// client.
type certExpiry struct {
	desc   *prometheus.Desc
	source atomic.Pointer[func() []table.ServedCertificate] // the server's table; nil: none yet
}

func newCertExpiry() *certExpiry {
	return &certExpiry{desc: prometheus.NewDesc("metalgate_proxy_certificate_expiry_timestamp_seconds",
		"End of validity (Unix time) of each certificate the proxy serves, by owner namespace and host (Ingress) or Gateway listener and its hostname, with its Secret (namespace/name).",
		[]string{"namespace", "host", "listener", "secret"}, nil)}
}

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	f := c.source.Load()
	if f == nil {
		return
	}
	for _, sc := range (*f)() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(sc.NotAfter.Unix()), sc.Namespace, sc.Host, sc.Listener, sc.Secret)
	}
}
