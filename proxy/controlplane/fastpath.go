package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/proxy/table"
)

// The endpoint fast path. At 10,000 Ingresses a full build (list the whole cache, Build,
// recompile every pool) takes a few hundred milliseconds and leaves as much garbage, while
// most changes are a pod coming or going: one EndpointSlice. A batch of EndpointSlice events
// only, each naming its Service, is applied by table.PatchEndpoints to the table in use,
// from those Services' slices alone; the data plane then builds pools for the replaced
// backends only. table.PatchEndpoints refuses what endpoints change beyond endpoint lists
// (a RefusedEndpoint message, the ranking of default backends); the builder refuses what
// reads endpoints outside the table:
//   - the arbitration ranks proxies by whether their publish Services have a ready
//     endpoint: the status publisher always (it decides who writes an Ingress's status), the
//     builder too with Options.YieldTraffic (routed). A batch touching this proxy's own
//     Service or an announced proxy's takes the full path, with or without YieldTraffic.
//     With it, the presence of the others is refreshed as routed would (their readiness is
//     as of the last build: their slices did not change);
//   - the status publisher reads the snapshot of the last full build: Ingresses, Services,
//     and of the EndpointSlices only the readiness of the same arbitrated Services, which
//     the fast path never changes, so that snapshot stays true and is not resent;
//   - Problems (Events) and a Gateway's status are the last build's: a patch keeps them.
// Everything else — the first build, a timer, any other kind, a slice without the
// kubernetes.io/service-name label or a delete seen only as a tombstone — is a full build,
// as before.

// maxPatchServices bounds the Services of a patched batch: each is one List of the cache
// (its namespace's slices, filtered by label), so a batch of thousands (a whole namespace
// redeployed, the informers' initial adds) is cheaper built in full.
const maxPatchServices = 100

// patchQuiet is the quiet gap that ends a batch the fast path can take, instead of
// Options.Quiet: coalescing saves full builds, but a patch costs well under a millisecond, so
// waiting 15 ms for more endpoint changes would be most of the time to apply one.
const patchQuiet = 2 * time.Millisecond

// quiet is the quiet gap that ends the pending batch: patchQuiet while it can be patched,
// else Options.Quiet.
func (b *builder) quiet() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bt := b.batch; !bt.full && len(bt.services) > 0 && len(bt.services) <= maxPatchServices && b.last != nil {
		return min(patchQuiet, b.opts.Quiet)
	}
	return b.opts.Quiet
}

// batch is what the pending events changed.
type batch struct {
	// full: something other than EndpointSlices of known Services changed.
	full bool
	// services whose EndpointSlices changed.
	services map[types.NamespacedName]bool
}

// slices records the Services of an EndpointSlice event's objects; one it cannot attribute
// (a tombstone, a slice without the service-name label) makes the batch full.
func (bt *batch) slices(objs []any) {
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok { // toolscache.DeletedFinalStateUnknown: the last state may be stale
			bt.full = true
			return
		}
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			bt.full = true
			return
		}
		if bt.services == nil {
			bt.services = map[types.NamespacedName]bool{}
		}
		bt.services[types.NamespacedName{Namespace: s.Namespace, Name: name}] = true
	}
}

// patch applies an endpoint-only batch to the table in use and reports whether it did; false
// leaves the batch to a full build.
func (b *builder) patch(ctx context.Context, log logr.Logger, bt batch, first, start time.Time) bool {
	if bt.full || len(bt.services) == 0 || len(bt.services) > maxPatchServices || b.last == nil {
		return false
	}
	for id := range bt.services {
		if b.arbitrated[id] {
			log.V(1).Info("endpoint change of a proxy's Service: full build", "service", id.String())
			return false
		}
	}
	slices, err := b.serviceSlices(ctx, bt.services)
	if err != nil {
		log.Error(err, "list EndpointSlices for an endpoint patch failed; building the table in full")
		return false
	}
	t, ok := table.PatchEndpoints(b.last, slices)
	if !ok {
		log.V(1).Info("endpoint change is not endpoint-only (a refused endpoint or a default backend's rank): full build", "services", len(bt.services))
		return false
	}
	if t != b.last {
		b.opts.Swap(t)
		b.last = t
	}
	if b.opts.YieldTraffic && b.arb != nil {
		for id := range b.readyArbitrated { // as routed would: their slices did not change
			b.arb.presence.serving(id, true)
		}
	}
	done := time.Now()
	if m := b.opts.Metrics; m != nil {
		m.Patches.Inc()
		if !first.IsZero() {
			m.ChangeApplied.Observe(done.Sub(first).Seconds())
		}
		m.TableEndpoints.Set(float64(endpointCount(t)))
	}
	log.V(1).Info("table swapped", "path", "endpoints", "services", len(bt.services), "took", done.Sub(start))
	return true
}

// serviceSlices lists from the cache, without copying, the EndpointSlices of each Service.
func (b *builder) serviceSlices(ctx context.Context, services map[types.NamespacedName]bool) (map[types.NamespacedName][]*discoveryv1.EndpointSlice, error) {
	out := make(map[types.NamespacedName][]*discoveryv1.EndpointSlice, len(services))
	for id := range services {
		var list discoveryv1.EndpointSliceList
		if err := b.cache.List(ctx, &list, client.InNamespace(id.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: id.Name},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list EndpointSlices of Service %s: %w", id, err)
		}
		out[id] = make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
		for i := range list.Items {
			out[id] = append(out[id], &list.Items[i])
		}
	}
	return out, nil
}

// recordArbitrated remembers, at a full build, the Services whose endpoints the arbitration
// reads — this proxy's own publish Service and every announced proxy's (CandidateFromService:
// the candidates the arbiter makes, without touching its presence state) — and which of them
// have a ready endpoint.
func (b *builder) recordArbitrated(ctx context.Context, services []*corev1.Service, slices []*discoveryv1.EndpointSlice) {
	b.arbitrated, b.readyArbitrated = nil, nil
	if b.arb == nil {
		return
	}
	own, _ := b.arb.self.resolve(ctx, services) // unknown: only the announced ones
	b.arbitrated = map[types.NamespacedName]bool{}
	if own.Name != "" {
		b.arbitrated[own] = true
	}
	for _, svc := range services {
		if _, ok, _ := CandidateFromService(svc); ok {
			b.arbitrated[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = true
		}
	}
	b.readyArbitrated = map[types.NamespacedName]bool{}
	for _, s := range slices {
		id := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		if !b.arbitrated[id] || b.readyArbitrated[id] {
			continue
		}
		if ReadyServices([]*discoveryv1.EndpointSlice{s})[id] {
			b.readyArbitrated[id] = true
		}
	}
}

// endpointCount is the number of endpoints across a table's backends.
func endpointCount(t *table.Table) int {
	n := 0
	for _, be := range t.Backends {
		n += len(be.Endpoints)
	}
	return n
}
