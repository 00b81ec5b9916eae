package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
)

// +kubebuilder:rbac:groups=metalgate.io,namespace=metalgate-system,resources=bgppeers/status,verbs=get;patch

// FieldOwnerPrefix + node name is the server-side apply field manager of a node's entry in
// BGPPeer.status.nodes: every speaker owns its own entry and nothing else, so speakers on
// different nodes never overwrite each other.
const FieldOwnerPrefix = "metalgate-speaker/"

// PeerStatusSource reports the sessions of this node (*bgp.Speaker).
type PeerStatusSource interface {
	Status() []bgp.PeerStatus
}

// BGPStatusOptions configure a BGPStatus.
type BGPStatusOptions struct {
	// Node is this node's name. Required.
	Node string
	// Namespace holds the BGPPeers. Required.
	Namespace string
	// Client reads BGPPeers (the manager's cached client) and applies their status.
	Client client.Client
	// Source reports the sessions. Required.
	Source PeerStatusSource
	// Recorder records the Events on BGPPeers; nil records none.
	Recorder events.EventRecorder
	// Interval is how often the status is compared with the sessions even without a Kick.
	// Defaults to 2s.
	Interval time.Duration
	// MinInterval is the least time between two passes: changes that come faster are written
	// together. Defaults to 1s.
	MinInterval time.Duration
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// Registerer receives metalgate_bgp_peer_invalid; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// BGPStatus writes this node's entry of BGPPeer.status.nodes for every BGPPeer that selects the
// node, and removes it from the others. It is level-based: each pass compares what the cache
// shows with the sessions (Source) and the World, and applies only what differs, by
// server-side apply on the status subresource with the field manager FieldOwnerPrefix+Node.
// Applying an entry-less status removes the node's entry (its manager owned it alone).
//
// A peer that selects the node but cannot be configured (bgp.Config.Invalid, or refused by
// the BGP library) is written as Unknown with its error, gets a Warning Event once per distinct
// error, and a Normal Event when it is configured again.
//
// Start it as a manager runnable; feed it with SetWorld and Kick.
type BGPStatus struct {
	opts    BGPStatusOptions
	log     logr.Logger
	kick    chan struct{}
	invalid *prometheus.GaugeVec

	mu    sync.Mutex
	world *speaker.World

	// Owned by the goroutine running sync.
	applied   map[string]applied // by BGPPeer name: the last apply, against cache lag
	warned    map[string]string  // by BGPPeer name: the error of the last Warning Event
	invalidOn map[string]bool    // peers with metalgate_bgp_peer_invalid set
}

type applied struct {
	entry *v1alpha1.BGPPeerNodeStatus // nil: removed
	at    time.Time
}

// appliedMemo is how long a pass trusts its own last apply over a cache that still shows the
// old status (the watch is usually milliseconds behind).
const appliedMemo = 10 * time.Second

// NewBGPStatus returns a BGPStatus; it writes nothing before the first SetWorld.
func NewBGPStatus(opts BGPStatusOptions) (*BGPStatus, error) {
	if opts.Node == "" || opts.Namespace == "" || opts.Client == nil || opts.Source == nil {
		return nil, errors.New("bgp status: Node, Namespace, Client and Source are required")
	}
	if opts.Interval == 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &BGPStatus{
		opts: opts, log: opts.Logger, kick: make(chan struct{}, 1),
		invalid: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "metalgate", Subsystem: "bgp", Name: "peer_invalid",
			Help: "1 for each BGPPeer that selects this node but cannot be configured (see its status and Events).",
		}, []string{"peer"}),
		applied: map[string]applied{}, warned: map[string]string{}, invalidOn: map[string]bool{},
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(b.invalid); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return b, nil
}

// SetWorld hands over the peers of this node (the World's bgp.Config: Peers, Invalid) and
// schedules a pass.
func (b *BGPStatus) SetWorld(w speaker.World) {
	b.mu.Lock()
	b.world = &w
	b.mu.Unlock()
	b.Kick()
}

// Kick schedules a pass (wire it to bgp.Options.OnStateChange). It never blocks.
func (b *BGPStatus) Kick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Start runs passes on Kick and every Interval, at most one per MinInterval, until ctx ends.
// Entries are left in place on stop: a restarting speaker rewrites them, and a session that
// stays up under graceful restart is still worth reporting.
func (b *BGPStatus) Start(ctx context.Context) error {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	var last time.Time
	gap := b.opts.MinInterval // grows while passes fail (API server down, RBAC missing)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.kick:
		case <-t.C:
		}
		if wait := gap - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		last = time.Now()
		if err := b.sync(ctx); err != nil {
			gap = min(2*gap, maxRetryGap)
			b.log.Error(err, "Writing BGPPeer status failed", "retryIn", gap.String())
			continue
		}
		gap = b.opts.MinInterval
	}
}

// maxRetryGap bounds the backoff between failed passes.
const maxRetryGap = 30 * time.Second

// sync makes one pass. Start calls it (tests through export_test.go). Calls must not overlap.
func (b *BGPStatus) sync(ctx context.Context) error {
	b.mu.Lock()
	w := b.world
	b.mu.Unlock()
	if w == nil {
		return nil // nothing known yet: leave the entries of a previous run alone
	}
	var list v1alpha1.BGPPeerList
	if err := b.opts.Client.List(ctx, &list, client.InNamespace(b.opts.Namespace)); err != nil {
		return fmt.Errorf("list BGPPeers: %w", err)
	}
	now := b.opts.Now()
	want := b.desired(w, now)
	b.events(list.Items, want)
	b.metrics(want)

	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		cur := nodeEntry(p, b.opts.Node)
		d, ok := want[p.Name]
		var next *v1alpha1.BGPPeerNodeStatus
		if ok {
			e := d.status
			e.LastTransitionTime = metav1.NewTime(d.since.Truncate(time.Second))
			if cur != nil && cur.SessionState == e.SessionState && !cur.LastTransitionTime.IsZero() {
				e.LastTransitionTime = cur.LastTransitionTime // the state did not change
			}
			next = &e
		}
		if sameEntry(cur, next) {
			b.applied[p.Name] = applied{entry: next, at: now}
			continue
		}
		if a, ok := b.applied[p.Name]; ok && sameEntry(a.entry, next) && now.Sub(a.at) < appliedMemo {
			continue // applied already; the cache has not seen it yet
		}
		if err := b.apply(ctx, p.Name, next); err != nil {
			errs = append(errs, err)
			continue
		}
		b.applied[p.Name] = applied{entry: next, at: now}
	}
	for name := range b.applied {
		if !slices.ContainsFunc(list.Items, func(p v1alpha1.BGPPeer) bool { return p.Name == name }) {
			delete(b.applied, name)
		}
	}
	errs = append(errs, b.removeDeletedNodes(ctx, w, list.Items)...)
	return errors.Join(errs...)
}

// desiredEntry is this node's entry for one peer, before the transition time is settled.
type desiredEntry struct {
	status v1alpha1.BGPPeerNodeStatus
	since  time.Time
}

// desired is this node's entry per peer: the sessions for the World's peers (Idle until the
// library reports them), Unknown with the error for the invalid ones.
func (b *BGPStatus) desired(w *speaker.World, now time.Time) map[string]desiredEntry {
	sessions := map[string]bgp.PeerStatus{}
	for _, s := range b.opts.Source.Status() {
		sessions[s.Name] = s
	}
	out := map[string]desiredEntry{}
	for _, p := range bgp.ConfigOf(*w).Peers {
		d := desiredEntry{status: v1alpha1.BGPPeerNodeStatus{Node: b.opts.Node, SessionState: v1alpha1.SessionStateIdle}, since: now}
		if s, ok := sessions[p.Name]; ok {
			d.status.SessionState = s.SessionState
			d.status.PrefixesAdvertised = int32(min(s.PrefixesAdvertised, 1<<31-1))
			d.status.LastError = s.LastError
			if !s.Since.IsZero() {
				d.since = s.Since
			}
		}
		out[p.Name] = d
	}
	for _, p := range bgp.ConfigOf(*w).Invalid {
		out[p.Name] = desiredEntry{
			status: v1alpha1.BGPPeerNodeStatus{Node: b.opts.Node, SessionState: v1alpha1.SessionStateUnknown, LastError: p.Err.Error()},
			since:  now,
		}
	}
	return out
}

// invalidEntry reports whether an entry is a configuration error (not a session error).
func invalidEntry(e v1alpha1.BGPPeerNodeStatus) bool {
	return e.SessionState == v1alpha1.SessionStateUnknown && e.LastError != ""
}

// events records a Warning Event for each invalid peer whose error is new, and a Normal Event
// for each peer that was invalid and is configured now.
func (b *BGPStatus) events(peers []v1alpha1.BGPPeer, want map[string]desiredEntry) {
	byName := map[string]*v1alpha1.BGPPeer{}
	for i := range peers {
		byName[peers[i].Name] = &peers[i]
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		e := want[name].status
		p := byName[name]
		switch {
		case invalidEntry(e):
			if b.warned[name] == e.LastError || p == nil {
				continue
			}
			b.warned[name] = e.LastError
			b.log.Info("BGPPeer cannot be configured on this node", "bgpPeer", name, "error", e.LastError)
			if b.opts.Recorder != nil {
				b.opts.Recorder.Eventf(p, nil, corev1.EventTypeWarning, contract.ReasonBGPPeerInvalid, "Configure",
					"node %s cannot use this peer: %s", b.opts.Node, e.LastError)
			}
		case b.warned[name] != "":
			delete(b.warned, name)
			if p != nil && b.opts.Recorder != nil {
				b.opts.Recorder.Eventf(p, nil, corev1.EventTypeNormal, contract.ReasonBGPPeerValid, "Configure",
					"node %s configured the peer (session %s)", b.opts.Node, e.SessionState)
			}
		}
	}
	for name := range b.warned {
		if _, ok := want[name]; !ok {
			delete(b.warned, name) // no longer for this node: a later error is news again
		}
	}
}

func (b *BGPStatus) metrics(want map[string]desiredEntry) {
	next := map[string]bool{}
	for name, d := range want {
		if invalidEntry(d.status) {
			next[name] = true
			b.invalid.WithLabelValues(name).Set(1)
		}
	}
	for name := range b.invalidOn {
		if !next[name] {
			b.invalid.DeleteLabelValues(name)
		}
	}
	b.invalidOn = next
}

// apply sets this node's entry of the peer's status to e, or removes it when e is nil.
func (b *BGPStatus) apply(ctx context.Context, peer string, e *v1alpha1.BGPPeerNodeStatus) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "BGPPeer",
		"metadata":   map[string]any{"name": peer, "namespace": b.opts.Namespace},
	}}
	if e != nil {
		raw, err := json.Marshal(e)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		u.Object["status"] = map[string]any{"nodes": []any{m}}
	}
	err := b.opts.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FieldOwnerPrefix+b.opts.Node), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return fmt.Errorf("apply status of BGPPeer %s: %w", peer, err)
	}
	if e == nil {
		b.log.V(1).Info("Removed BGPPeer status entry", "bgpPeer", peer)
	} else {
		b.log.V(1).Info("Wrote BGPPeer status", "bgpPeer", peer, "sessionState", e.SessionState,
			"prefixesAdvertised", e.PrefixesAdvertised, "lastError", e.LastError)
	}
	return nil
}

// removeDeletedNodes removes the entries of nodes that no longer exist: their speakers cannot.
// Only the first speaker by name does it, with a JSON patch guarded by a test of the entry's
// node (a concurrent change makes it fail harmlessly; the next pass sees the new list).
func (b *BGPStatus) removeDeletedNodes(ctx context.Context, w *speaker.World, peers []v1alpha1.BGPPeer) []error {
	if len(w.Nodes) == 0 || len(w.Speakers) == 0 || w.Speakers[0] != b.opts.Node {
		return nil
	}
	exists := map[string]bool{}
	for _, n := range w.Nodes {
		exists[n.Name] = true
	}
	var errs []error
	for i := range peers {
		p := &peers[i]
		for j := len(p.Status.Nodes) - 1; j >= 0; j-- {
			n := p.Status.Nodes[j].Node
			if exists[n] {
				continue
			}
			ops := []map[string]any{
				{"op": "test", "path": fmt.Sprintf("/status/nodes/%d/node", j), "value": n},
				{"op": "remove", "path": fmt.Sprintf("/status/nodes/%d", j)},
			}
			raw, _ := json.Marshal(ops)
			err := b.opts.Client.Status().Patch(ctx, p, client.RawPatch(types.JSONPatchType, raw))
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				errs = append(errs, fmt.Errorf("remove entry of deleted node %s from BGPPeer %s: %w", n, p.Name, err))
				break
			}
			b.log.Info("Removed the BGPPeer status entry of a deleted node", "bgpPeer", p.Name, "deletedNode", n)
			break // indexes moved: the next pass does the rest
		}
	}
	return errs
}

func nodeEntry(p *v1alpha1.BGPPeer, node string) *v1alpha1.BGPPeerNodeStatus {
	for i := range p.Status.Nodes {
		if p.Status.Nodes[i].Node == node {
			return &p.Status.Nodes[i]
		}
	}
	return nil
}

func sameEntry(a, b *v1alpha1.BGPPeerNodeStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Node == b.Node && a.SessionState == b.SessionState && a.PrefixesAdvertised == b.PrefixesAdvertised &&
		a.LastError == b.LastError && a.LastTransitionTime.Unix() == b.LastTransitionTime.Unix()
}
