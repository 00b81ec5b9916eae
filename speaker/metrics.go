package speaker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the speaker core's Prometheus metrics.
type Metrics struct {
	// Announced is 1 for every (service, vip, interface, mode) this node announces now.
	Announced *prometheus.GaugeVec
	// Members is the number of live speakers in this node's view, itself included.
	Members prometheus.Gauge
	// Quorum is 1 while this speaker may announce (see membership.Quorum), else 0.
	Quorum prometheus.Gauge
	// Failovers counts addresses this node took over from another node.
	Failovers prometheus.Counter
	// Syncs counts announcement syncs by result ("ok", "error").
	Syncs *prometheus.CounterVec
	// Expected is the number of speakers expected (World.Speakers): Members below it means a
	// speaker is down or cut off.
	Expected prometheus.Gauge
	// Takeovers counts, by vip, the times this node started announcing a layer-2 address.
	Takeovers *prometheus.CounterVec
	// WithoutAnnouncer is, by mode, the addresses with ready endpoints that no live speaker
	// may announce (Decision.WithoutAnnouncer).
	WithoutAnnouncer *prometheus.GaugeVec
	// Holds counts, by outcome, this speaker's holds (Options.HoldOnStop, Options.HoldDir):
	// HoldGiven, HoldNone, HoldResumed, HoldRefused.
	Holds *prometheus.CounterVec
	// Held is the number of layer-2 addresses that stay, in this node's view, with a node that
	// left with a hold (Decision.Held).
	Held prometheus.Gauge
}

// Outcomes of Metrics.Holds.
const (
	// HoldGiven: this speaker left with a hold (its DaemonSet's rollout replaces it).
	HoldGiven = "given"
	// HoldNone: this speaker left without a hold (not a rollout, not known, or holds off).
	HoldNone = "none"
	// HoldResumed: this speaker resumed the hold its predecessor on the node left.
	HoldResumed = "resumed"
	// HoldRefused: a hold file was there but refused (stale, corrupt, another node's).
	HoldRefused = "refused"
)

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_speaker_announced",
			Help: "1 for each address this node announces, by service, vip, interface (empty for BGP) and mode.",
		}, []string{"service", "vip", "interface", "mode"}),
		Members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_speaker_members",
			Help: "Live speakers in this node's membership view, itself included.",
		}),
		Quorum: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_speaker_quorum",
			Help: "1 while this speaker sees a quorum of the expected speakers and may announce; 0 while fenced.",
		}),
		Failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_speaker_failovers_total",
			Help: "Layer-2 addresses this node took over from another node.",
		}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_syncs_total",
			Help: "Announcement syncs by result.",
		}, []string{"result"}),
		Expected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_speaker_expected_members",
			Help: "Speakers this node expects in the membership (nodes running a speaker), itself included.",
		}),
		Takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_takeovers_total",
			Help: "Times this node started announcing a layer-2 address (first owner, failover, rebalancing, quorum regained), by vip.",
		}, []string{"vip"}),
		WithoutAnnouncer: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalgate_speaker_vips_without_announcer",
			Help: "Addresses of Services with ready endpoints that no live speaker may announce, in this node's view, by mode: no live node matches the advertisement's node selectors, or (externalTrafficPolicy Local) no node with a ready endpoint runs a live speaker.",
		}, []string{"mode"}),
		Holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_speaker_l2_holds_total",
			Help: "Layer-2 holds of this speaker by outcome: given (it left with a hold: a rollout replaces it), none (it left without one), resumed (it resumed its predecessor's hold), refused (a hold file was refused).",
		}, []string{"outcome"}),
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_speaker_l2_held_vips",
			Help: "Layer-2 addresses that stay, in this node's view, with a node whose speaker left with a hold (nobody announces them until it returns or the hold ends).",
		}),
	}
	for _, o := range []string{HoldGiven, HoldNone, HoldResumed, HoldRefused} {
		m.Holds.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.Announced, m.Members, m.Quorum, m.Failovers, m.Syncs, m.Expected, m.Takeovers, m.WithoutAnnouncer, m.Holds, m.Held)
	}
	return m
}
