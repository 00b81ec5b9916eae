package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// Kinds watched, as named in metrics and readiness.
const (
	KindIngress       = "Ingress"
	KindIngressClass  = "IngressClass"
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
	KindSecret        = "Secret"
)

// watchedKind is one kind the builder watches and the prober lists.
type watchedKind struct {
	kind string
	obj  client.Object
	list func() client.ObjectList
}

// watched are the kinds of the Ingress proxy; gatewayWatched (gateway.go) those of
// `metalgate proxy --gateway`. Options.kinds picks one.
var watched = []watchedKind{
	{KindIngress, &networkingv1.Ingress{}, func() client.ObjectList { return &networkingv1.IngressList{} }},
	{KindIngressClass, &networkingv1.IngressClass{}, func() client.ObjectList { return &networkingv1.IngressClassList{} }},
	{KindService, &corev1.Service{}, func() client.ObjectList { return &corev1.ServiceList{} }},
	{KindEndpointSlice, &discoveryv1.EndpointSlice{}, func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }},
	{KindSecret, &corev1.Secret{}, func() client.ObjectList { return &corev1.SecretList{} }},
	// An auth-url to another namespace's Service needs a ReferenceGrant there (ingress.Input).
	// Left out when the API server does not serve ReferenceGrant (Options.noReferenceGrant).
	{KindReferenceGrant, &gatewayv1beta1.ReferenceGrant{}, func() client.ObjectList { return &gatewayv1beta1.ReferenceGrantList{} }},
}

// kindOf maps a reflector's type description ("*v1.EndpointSlice") to our kind name.
func kindOf(desc string) string {
	for _, w := range append(watched[:len(watched):len(watched)], gatewayWatched...) {
		if strings.HasSuffix(desc, "."+w.kind) {
			return w.kind
		}
	}
	return desc
}

// builder rebuilds the table from the cache after changes, coalescing bursts: the first
// event of a batch starts a window that ends after Quiet without events or MaxBatch at most,
// so a GitOps apply of 1,000 Ingresses is a handful of swaps, not 1,000. It runs on every
// replica: every replica serves traffic.
type builder struct {
	opts      Options
	cache     cache.Cache
	fresh     *Freshness
	kick      chan struct{}
	mu        sync.Mutex
	pending   time.Time // first unapplied event
	built     chan struct{}
	snapshots chan ingress.Input // to the status publisher (latest only)
	reported  map[types.NamespacedName]string
	// certProblems is the last logged set of a Gateway's HTTPS listeners without a
	// certificate (reportGateway).
	certProblems string
	// elected is closed when this replica leads; only the leader emits events, so N
	// replicas do not report each problem N times.
	elected <-chan struct{}
	// leads, when set, says instead whether this replica writes status now (a status writer
	// under its own Lease, Options.StatusElection, which may lose it and win it again).
	leads func() bool
	// arb decides which Ingresses another writer publishes (Options.YieldTraffic); expiry
	// rebuilds when a proxy without ready endpoints stops outranking others.
	arb    *arbiter
	expiry *time.Timer

	// batch is what the pending events changed (guarded by mu): whether only EndpointSlices,
	// and of which Services (fastpath.go).
	batch batch
	// last is the table swapped in last, nil until the first build or after a failure: the
	// next change then takes the full path.
	last *table.Table
	// arbitrated are the Services whose endpoints the arbitration reads (this proxy's own and
	// every announced proxy's), and readyArbitrated those of them with a ready endpoint, as
	// of the last full build. The status publisher arbitrates whatever Options.YieldTraffic
	// says, so they are recorded at every full build.
	arbitrated, readyArbitrated map[types.NamespacedName]bool
}

func (b *builder) NeedLeaderElection() bool { return false }

// event records a change of kind and wakes the build loop; kind "" is a timer, not a change.
// The batch takes the full path.
func (b *builder) event(kind string) { b.change(kind, nil) }

// change records a change of kind and wakes the build loop. objs are the objects of an
// EndpointSlice event (old and new of an update): when they name their Service, the batch
// may take the endpoint fast path; any other change makes it a full build.
func (b *builder) change(kind string, objs []any) {
	if kind != "" {
		b.fresh.OK(kind)
	}
	b.mu.Lock()
	if b.pending.IsZero() {
		b.pending = time.Now()
	}
	if kind == KindEndpointSlice && len(objs) > 0 {
		b.batch.slices(objs)
	} else {
		b.batch.full = true
	}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *builder) Start(ctx context.Context) error {
	log := b.opts.Logger.WithName("builder")
	for _, w := range b.opts.kinds() {
		inf, err := b.cache.GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("get %s informer: %w", w.kind, err)
		}
		kind := w.kind
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				// The initial list is in the store when the cache reports synced, so in the
				// first build; its adds, delivered later, would only rebuild the same table
				// (at 10,000 Ingresses, seconds of full builds right after start).
				if !initial {
					b.change(kind, []any{o})
				}
			},
			UpdateFunc: func(o, n any) { b.change(kind, []any{o, n}) },
			DeleteFunc: func(o any) { b.change(kind, []any{o}) },
		}); err != nil {
			return fmt.Errorf("watch %s: %w", kind, err)
		}
	}
	if !b.cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	for _, w := range b.opts.kinds() {
		b.fresh.OK(w.kind) // synced: every kind was listed
	}
	b.mu.Lock()
	b.pending = time.Now()
	b.batch.full = true // the first build
	b.mu.Unlock()
	b.rebuild(ctx, log)
	close(b.built)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.kick:
		}
		// Coalesce: wait for a quiet gap or the batch bound, whichever comes first.
		b.mu.Lock()
		first := b.pending
		b.mu.Unlock()
		deadline := first.Add(b.opts.MaxBatch)
		quiet := time.NewTimer(b.quiet())
	batch:
		for {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				quiet.Stop()
				return nil
			case <-b.kick:
				if !quiet.Stop() {
					select {
					case <-quiet.C:
					default:
					}
				}
				quiet.Reset(min(b.quiet(), wait))
			case <-quiet.C:
				break batch
			case <-time.After(wait):
				break batch
			}
		}
		quiet.Stop()
		b.rebuild(ctx, log)
	}
}

// rebuild applies the pending batch: by the endpoint fast path when it allows (fastpath.go),
// else it snapshots the cache, builds a table and swaps it in.
func (b *builder) rebuild(ctx context.Context, log logr.Logger) {
	b.mu.Lock()
	first := b.pending
	b.pending = time.Time{}
	bt := b.batch
	b.batch = batch{}
	b.mu.Unlock()
	start := time.Now()
	if b.patch(ctx, log, bt, first, start) {
		return
	}
	b.last = nil // until this build is swapped in: a failure leaves the next change the full path
	var in ingress.Input
	var t *table.Table
	var problems []table.Problem
	if b.opts.Gateway.Name != "" {
		gin, err := b.gatewaySnapshot(ctx)
		if err != nil {
			log.Error(err, "snapshot for table build failed")
			return
		}
		b.recordArbitrated(ctx, gin.Services, gin.Slices)
		res := gatewayapi.Translate(gin)
		t, problems = res.Table, res.Problems
	} else {
		var err error
		if in, err = b.snapshot(ctx); err != nil {
			log.Error(err, "snapshot for table build failed")
			return
		}
		b.recordArbitrated(ctx, in.Services, in.Slices)
		t, problems = ingress.Build(b.routed(ctx, in))
	}
	b.opts.Swap(t)
	b.last = t
	done := time.Now()
	if m := b.opts.Metrics; m != nil {
		m.Builds.Inc()
		m.BuildDuration.Observe(done.Sub(start).Seconds())
		if !first.IsZero() {
			m.ChangeApplied.Observe(done.Sub(first).Seconds())
		}
		m.Problems.Set(float64(len(problems)))
		m.TableIngresses.Set(float64(t.Ingresses))
		m.TableEndpoints.Set(float64(endpointCount(t)))
	}
	log.V(1).Info("table swapped", "path", "full", "ingresses", t.Ingresses, "backends", len(t.Backends), "problems", len(problems), "took", done.Sub(start))
	b.report(in, problems)
	b.reportGateway(t)
	select { // hand the latest snapshot to the status publisher, dropping an unread one
	case <-b.snapshots:
	default:
	}
	b.snapshots <- in
}

// routed is the snapshot to route: all of it, or with Options.YieldTraffic without the
// Ingresses this proxy leaves to another writer by arbitration or annotation (the status
// publisher, leader only, decides the same way from the same cache). Without a known own
// Service this proxy has no address and loses to any proxy that has one.
func (b *builder) routed(ctx context.Context, in ingress.Input) ingress.Input {
	if !b.opts.YieldTraffic || b.arb == nil {
		return in
	}
	own, _ := b.arb.self.resolve(ctx, in.Services)
	var ownSvc *corev1.Service
	for _, s := range in.Services {
		if s.Namespace == own.Namespace && s.Name == own.Name {
			ownSvc = s
		}
	}
	cands, expires := b.arb.candidates(in, own, ownSvc, nil)
	if !expires.IsZero() { // a proxy without ready endpoints stops outranking others then
		b.mu.Lock()
		if b.expiry == nil {
			b.expiry = time.AfterFunc(time.Until(expires), func() { b.event("") })
		} else {
			b.expiry.Reset(time.Until(expires))
		}
		b.mu.Unlock()
	}
	out := in
	out.Ingresses = nil
	for _, ing := range in.Ingresses {
		if owner := ing.Annotations[contract.AnnotationStatusOwner]; owner != "" {
			if owner != b.opts.FieldManager && owner != own.String() {
				continue
			}
		} else if w := Arbitrate(cands, b.arb.subject(ing)).Winner; w != nil && w.Service != own {
			continue
		}
		out.Ingresses = append(out.Ingresses, ing)
	}
	return out
}

// report turns build problems into Warning events, once per Ingress per distinct set.
func (b *builder) report(in ingress.Input, problems []table.Problem) {
	byIng := map[types.NamespacedName][]table.Problem{}
	for _, p := range problems {
		byIng[p.Object.NamespacedName] = append(byIng[p.Object.NamespacedName], p)
	}
	objs := map[types.NamespacedName]*networkingv1.Ingress{}
	for _, ing := range in.Ingresses {
		objs[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
	}
	seen := map[types.NamespacedName]bool{}
	for id, ps := range byIng {
		seen[id] = true
		var msgs []string
		for _, p := range ps {
			msgs = append(msgs, p.Reason+": "+p.Message)
		}
		sort.Strings(msgs)
		sig := strings.Join(msgs, "\n")
		if b.reported[id] == sig {
			continue
		}
		b.reported[id] = sig
		ing := objs[id]
		if ing == nil || b.opts.Recorder == nil || !b.leading() {
			continue
		}
		for _, p := range ps {
			b.opts.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, p.Reason, "Route", "%s", p.Message)
		}
		b.opts.Logger.Info("ingress has problems; its valid parts are routed", "ingress", id.String(), "problems", msgs)
	}
	for id := range b.reported {
		if !seen[id] {
			delete(b.reported, id)
		}
	}
}

func (b *builder) leading() bool {
	if b.leads != nil {
		return b.leads()
	}
	if b.elected == nil {
		return true
	}
	select {
	case <-b.elected:
		return true
	default:
		return false
	}
}

// snapshot lists every watched kind of an Ingress proxy from the cache without copying
// (Build only reads).
func (b *builder) snapshot(ctx context.Context) (ingress.Input, error) {
	in := ingress.Input{Controller: b.opts.Controller, WatchDefaultClass: b.opts.WatchDefaultClass, AllowUnmanagedSlices: b.opts.AllowUnmanagedSlices,
		NginxAnnotations: b.opts.NginxAnnotations, SSLPassthrough: b.opts.SSLPassthrough, ExternalAuthHosts: b.opts.ExternalAuthHosts,
		DefaultBackendService: b.opts.DefaultBackendService, DefaultBackendPort: b.opts.DefaultBackendPort}
	nocopy := client.UnsafeDisableDeepCopy
	watchNS := map[string]bool{}
	for _, ns := range b.opts.WatchNamespaces {
		watchNS[ns] = true
	}
	inScope := func(ns string) bool { return len(watchNS) == 0 || watchNS[ns] }

	var ings networkingv1.IngressList
	if err := b.cache.List(ctx, &ings, nocopy); err != nil {
		return in, fmt.Errorf("list Ingresses: %w", err)
	}
	for i := range ings.Items {
		if inScope(ings.Items[i].Namespace) {
			in.Ingresses = append(in.Ingresses, &ings.Items[i])
		}
	}
	var classes networkingv1.IngressClassList
	if err := b.cache.List(ctx, &classes, nocopy); err != nil {
		return in, fmt.Errorf("list IngressClasses: %w", err)
	}
	for i := range classes.Items {
		in.Classes = append(in.Classes, &classes.Items[i])
	}
	if !b.opts.noReferenceGrant {
		var grants gatewayv1beta1.ReferenceGrantList
		if err := b.cache.List(ctx, &grants, nocopy); err != nil {
			return in, fmt.Errorf("list ReferenceGrants: %w", err)
		}
		for i := range grants.Items {
			in.ReferenceGrants = append(in.ReferenceGrants, &grants.Items[i])
		}
	}
	var err error
	in.Services, in.Slices, in.Secrets, err = b.listShared(ctx)
	return in, err
}

// listShared lists the Services, EndpointSlices and Secrets from the cache without copying:
// what both an Ingress table and a Gateway table read (backends, and certificates).
func (b *builder) listShared(ctx context.Context) ([]*corev1.Service, []*discoveryv1.EndpointSlice, []*corev1.Secret, error) {
	nocopy := client.UnsafeDisableDeepCopy
	var svcs corev1.ServiceList
	if err := b.cache.List(ctx, &svcs, nocopy); err != nil {
		return nil, nil, nil, fmt.Errorf("list Services: %w", err)
	}
	services := make([]*corev1.Service, len(svcs.Items))
	for i := range svcs.Items {
		services[i] = &svcs.Items[i]
	}
	var sl discoveryv1.EndpointSliceList
	if err := b.cache.List(ctx, &sl, nocopy); err != nil {
		return nil, nil, nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	slices := make([]*discoveryv1.EndpointSlice, len(sl.Items))
	for i := range sl.Items {
		slices[i] = &sl.Items[i]
	}
	var secs corev1.SecretList
	if err := b.cache.List(ctx, &secs, nocopy); err != nil {
		return nil, nil, nil, fmt.Errorf("list Secrets: %w", err)
	}
	secrets := make([]*corev1.Secret, len(secs.Items))
	for i := range secs.Items {
		secrets[i] = &secs.Items[i]
	}
	return services, slices, secrets, nil
}

// prober lists one object of each kind from the API server every ProbeInterval, so a dead
// API server shows in readiness even when no watch event would have come. Each kind is probed
// on its own, each list within timeout (default 10 s): one after another, a hung API server
// (accepting connections, answering nothing) was noticed for a kind only after every kind
// before it had timed out — a minute later with six kinds. Now a kind's failure shows at most
// ProbeInterval + timeout after the API server stops answering, whatever the other kinds do.
type prober struct {
	reader  client.Reader
	fresh   *Freshness
	opts    Options
	timeout time.Duration
}

func (p *prober) NeedLeaderElection() bool { return false }

func (p *prober) Start(ctx context.Context) error {
	timeout := p.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var wg sync.WaitGroup
	for _, w := range p.opts.kinds() {
		wg.Go(func() {
			t := time.NewTicker(p.opts.ProbeInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				p.probe(ctx, w, timeout)
			}
		})
	}
	wg.Wait()
	return nil
}

// probe lists one object of kind w and records the outcome.
func (p *prober) probe(ctx context.Context, w watchedKind, timeout time.Duration) {
	opts := []client.ListOption{client.Limit(1)}
	if w.kind == KindSecret {
		opts = append(opts, client.MatchingFields{"type": string(corev1.SecretTypeTLS)})
	}
	if len(p.opts.WatchNamespaces) > 0 && w.kind != KindIngressClass {
		opts = append(opts, client.InNamespace(p.opts.WatchNamespaces[0]))
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err := p.reader.List(pctx, w.list(), opts...)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the API server's failure
		}
		p.fresh.Failed(w.kind, err)
		if p.opts.Metrics != nil {
			p.opts.Metrics.WatchErrors.WithLabelValues(w.kind).Inc()
		}
		return
	}
	p.fresh.OK(w.kind)
}
