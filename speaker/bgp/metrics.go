package bgp

import "github.com/prometheus/client_golang/prometheus"

// metrics are the speaker's Prometheus metrics, labelled by peer name.
type metrics struct {
	sessionUp   *prometheus.GaugeVec
	prefixes    *prometheus.GaugeVec
	established *prometheus.CounterVec
	flaps       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sessionUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "metalgate", Subsystem: "bgp", Name: "session_up",
			Help: "1 when the BGP session with the peer is Established, else 0.",
		}, []string{"peer"}),
		prefixes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "metalgate", Subsystem: "bgp", Name: "prefixes_advertised",
			Help: "Number of prefixes the export policy lets through to the peer.",
		}, []string{"peer"}),
		established: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "metalgate", Subsystem: "bgp", Name: "session_established_total",
			Help: "Transitions of the BGP session with the peer into Established.",
		}, []string{"peer"}),
		flaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "metalgate", Subsystem: "bgp", Name: "session_down_total",
			Help: "Transitions of the BGP session with the peer out of Established (flaps).",
		}, []string{"peer"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sessionUp, m.prefixes, m.established, m.flaps} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) forget(peer string) {
	m.sessionUp.DeleteLabelValues(peer)
	m.prefixes.DeleteLabelValues(peer)
	m.established.DeleteLabelValues(peer)
	m.flaps.DeleteLabelValues(peer)
}
