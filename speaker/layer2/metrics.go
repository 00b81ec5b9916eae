package layer2

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the layer-2 announcer's Prometheus metrics.
type Metrics struct {
	// Answered counts ARP replies and neighbour advertisements sent for owned addresses, by
	// protocol ("arp", "ndp") and interface.
	Answered *prometheus.CounterVec
	// Gratuitous counts gratuitous ARP and unsolicited neighbour advertisements sent, by protocol.
	Gratuitous *prometheus.CounterVec
	// Errors counts socket errors (open, read, write), by protocol and operation.
	Errors *prometheus.CounterVec
	// Dropped counts received packets not answered, by protocol and Outcome.
	Dropped *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Answered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_requests_answered_total",
			Help: "ARP requests and NDP neighbour solicitations answered for addresses this node announces.",
		}, []string{"protocol", "interface"}),
		Gratuitous: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_gratuitous_sent_total",
			Help: "Gratuitous ARP replies and unsolicited neighbour advertisements sent on takeover.",
		}, []string{"protocol"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_socket_errors_total",
			Help: "ARP/NDP socket errors by protocol and operation (open, read, write); a responder reopens its socket after a read error.",
		}, []string{"protocol", "op"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_requests_dropped_total",
			Help: "ARP and NDP packets received and not answered, by protocol and reason (malformed, own, not-ours, fenced; ARP: not-ethernet-ipv4, not-request, ethernet-destination, sender-mismatch, sender-address; NDP, RFC 4861 7.1.1: hop-limit, icmp-code, length, target-multicast, option-length, dad-destination, dad-source-lladdr, not-solicitation).",
		}, []string{"protocol", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Answered, m.Gratuitous, m.Errors, m.Dropped)
	}
	return m
}
