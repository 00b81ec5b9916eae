package membership

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the membership's Prometheus metrics.
type Metrics struct {
	// Refused counts what was refused from the network, by Refusal reason.
	Refused *prometheus.CounterVec
	// Keys is the number of keys installed (2 or more during a rotation).
	Keys prometheus.Gauge
	// PrimaryKey is 1 for the fingerprint of the primary key (one series), so that a rotation
	// can be followed across speakers.
	PrimaryKey *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_members_refused_total",
			Help: "Memberlist packets, streams, members and quorum pings refused, by reason: source-address (not from a speaker's node), key (not encrypted with a cluster key), unknown-node (not a node running a speaker), address-mismatch (a speaker's name with another address), merge (a state exchange listing such a member), ping-malformed, ping-signature, ping-unexpected (not for us, from a non-member, or an unknown or used nonce), claims-malformed (layer-2 claims that do not parse or exceed the bounds), claims-unexpected (claims in this speaker's name or of a node that is not a live member).",
		}, []string{"reason"}),
		Keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_speaker_memberlist_keys",
			Help: "Keys in the memberlist keyring (primary and accepted ones).",
		}),
		PrimaryKey: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_speaker_memberlist_primary_key",
			Help: "1 for the fingerprint (first 8 hex digits of SHA-256 of the derived key) of the key this speaker encrypts with.",
		}, []string{"fingerprint"}),
	}
	for _, r := range refusals {
		m.Refused.WithLabelValues(string(r)) // exported at 0, so rate() works from the start
	}
	if reg != nil {
		reg.MustRegister(m.Refused, m.Keys, m.PrimaryKey)
	}
	return m
}
