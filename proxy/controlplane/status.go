package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// Why a proxy leaves an owned Ingress's status to another writer (label reason of
// metalgate_proxy_ingresses_yielded).
const (
	yieldProxy      = "proxy"      // another metalgate proxy wins the arbitration
	yieldAnnotation = "annotation" // metalgate.io/status-owner names another writer
	yieldForeign    = "foreign"    // another writer kept replacing the status
)

var yieldReasons = []string{yieldProxy, yieldAnnotation, yieldForeign}

// timeNow is the clock of the publisher and the arbiter.
var timeNow = time.Now

// publisher writes the proxy's own Service addresses into the status of the Ingresses it
// owns. It runs on the leader only. The rules:
//
//   - The addresses are exactly those in the own Service's status.loadBalancer.ingress. When
//     the Service has none or does not exist, nothing is written (a Warning event says why)
//     and what this proxy wrote before is cleared — never a node IP, never a ClusterIP.
//   - Only Ingresses it owns are written. What it wrote is known from managedFields: its
//     field manager owns status.loadBalancer. It clears only that, e.g. when an Ingress
//     changes class.
//   - It announces itself on its own Service (announce.go) before it writes any status.
//   - Annotation metalgate.io/status-owner on an Ingress decides first: only the writer it
//     names writes.
//   - Among metalgate proxies that serve one Ingress, only the winner of Arbitrate writes;
//     the others leave it alone and say so once per Ingress (Warning StatusYielded). Before
//     it replaces a value another writer put there, the winner decides again on the live
//     Services of the Ingress's namespace, not the cache, which may not show yet the proxy
//     that wrote it.
//   - When another writer overwrites the value it wrote twice within ConflictWindow, it stops
//     rewriting in a loop: each further rewrite waits BackoffBase, doubling up to BackoffMax,
//     and every conflict is a Warning event naming the other field manager (on the Ingress
//     and its IngressClass) and a count in metalgate_proxy_status_conflicts_total. At
//     MaxConflicts overwrites within ConflictWindow it stops writing that Ingress (Warning
//     ForeignStatusWriter) until the status has not changed for ForeignQuiet; after such a
//     resume, one overwrite stops it again and the quiet time doubles (up to 8×).
//
// These rules are decide's (decide.go), a pure function per Ingress; the publisher gathers
// its inputs and carries its decisions out.
type publisher struct {
	opts      Options
	client    client.Client // reads from the cache, writes to the API server
	reader    client.Reader // the API server: own Pod, live Services before a takeover
	arb       *arbiter
	snapshots chan ingress.Input
	kick      chan struct{}
	states    map[types.NamespacedName]*statusState
	lastWhy   string
	announce  string // the last announcement error reported ("" when announced)
	// announcedRV is the own Service's resourceVersion our last announcement was applied
	// to: while the cache still shows it, the cache has not seen the announcement yet.
	announcedRV string
	now         func() time.Time
}

// statusState is what the publisher remembers about one Ingress.
type statusState struct {
	wrote      []networkingv1.IngressLoadBalancerIngress // the value we last wrote
	overwrites []time.Time                               // when others replaced it, within the window
	backoff    time.Duration
	notBefore  time.Time // no rewrite before this (backing off)
	noAddrWhy  string    // the last "no address" reason reported on this Ingress
	// basedOn is the resourceVersion our last write replaced: while the cache still shows it,
	// the cache has not seen our write yet and the Ingress is skipped.
	basedOn string
	// yielded says why we leave the status to another writer (yieldProxy, yieldAnnotation,
	// yieldForeign; "" while we write it); reported is what the last Event said, so that each
	// yield is reported once per Ingress, not once per sync.
	yielded  string
	reported string
	// Foreign writer: stoppedBy names the writer we stopped fighting; lastSeen is the status
	// value we last saw and quietSince since when it has not changed; stops counts the stops
	// (each doubles the quiet time needed to resume).
	stoppedBy  string
	lastSeen   string
	quietSince time.Time
	stops      int
}

func (p *publisher) NeedLeaderElection() bool { return true }

func (p *publisher) Start(ctx context.Context) error {
	log := p.opts.Logger.WithName("status")
	var in ingress.Input
	tick := time.NewTicker(p.opts.ResyncStatus)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case in = <-p.snapshots:
		case <-p.kick:
		case <-tick.C:
		case <-retry:
		}
		if in.Ingresses == nil && in.Classes == nil {
			continue // no snapshot yet
		}
		next := p.sync(ctx, log, in)
		retry = nil
		if !next.IsZero() {
			retry = time.After(time.Until(next))
		}
	}
}

// syncRound is what one sync knows for every Ingress it looks at.
type syncRound struct {
	in    ingress.Input
	ownID types.NamespacedName
	addrs []networkingv1.IngressLoadBalancerIngress // the own Service's addresses
	why   string                                    // why there are none to publish ("" when there are)
	cands []Candidate
	self  Candidate
	// ours are the IngressClasses of this proxy's controller; defaultIsOurs whether the
	// default class is one of them.
	ours          map[string]bool
	defaultIsOurs bool
	classes       map[string]*networkingv1.IngressClass
	next          time.Time // the earliest time the publisher must look again (zero: none)
}

// wake asks for another sync at t, unless one is due earlier.
func (r *syncRound) wake(t time.Time) {
	if !t.IsZero() && (r.next.IsZero() || t.Before(r.next)) {
		r.next = t
	}
}

// sync brings every Ingress's status in line; it returns when it next needs to run for a
// backoff or a quiet time to expire (zero: no need).
func (p *publisher) sync(ctx context.Context, log logr.Logger, in ingress.Input) time.Time {
	r := p.startRound(ctx, log, in)
	seen := map[types.NamespacedName]bool{}
	for _, ing := range in.Ingresses {
		id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		seen[id] = true
		p.syncIngress(ctx, log, r, id, ing)
	}
	for id := range p.states {
		if !seen[id] {
			delete(p.states, id)
		}
	}
	p.countYielded()
	return r.next
}

// startRound reads the own Service (reporting when it has no address to publish), announces
// this proxy on it, and works out the arbitration candidates and the classes of the round.
func (p *publisher) startRound(ctx context.Context, log logr.Logger, in ingress.Input) *syncRound {
	r := &syncRound{in: in}
	var ownSvc *corev1.Service
	r.ownID, ownSvc, r.addrs, r.why = p.ownService(ctx, in)
	if m := p.opts.Metrics; m != nil {
		if r.why != "" {
			m.AddressMissing.Set(1)
		} else {
			m.AddressMissing.Set(0)
		}
	}
	if r.why != "" && r.why != p.lastWhy {
		log.Info("not writing Ingress status", "reason", r.why)
	}
	p.lastWhy = r.why
	if ownSvc != nil {
		p.announceSelf(ctx, log, ownSvc)
	}
	var expires time.Time
	r.cands, expires = p.arb.candidates(in, r.ownID, ownSvc, nil)
	for _, c := range r.cands {
		if c.Service == r.ownID {
			r.self = c
		}
	}
	r.ours, r.defaultIsOurs = ingress.Classes(in.Classes, p.opts.Controller)
	r.classes = map[string]*networkingv1.IngressClass{}
	for _, c := range in.Classes {
		r.classes[c.Name] = c
	}
	r.wake(expires) // a proxy without ready endpoints stops outranking others then
	return r
}

// syncIngress brings one Ingress's status in line: it gathers what decide needs, asks the
// API server for the live Services when decide wants them before replacing another writer's
// value, and carries the decision out.
func (p *publisher) syncIngress(ctx context.Context, log logr.Logger, r *syncRound, id types.NamespacedName, ing *networkingv1.Ingress) {
	st := p.states[id]
	if st == nil {
		st = &statusState{}
		p.states[id] = st
	}
	in := decideInput{
		Now:             p.now(),
		Policy:          p.opts.statusPolicy(),
		Self:            r.ownID,
		FieldManager:    p.opts.FieldManager,
		Owned:           ingress.Owns(ing, r.ours, r.defaultIsOurs, p.opts.WatchDefaultClass),
		ResourceVersion: ing.ResourceVersion,
		Current:         ing.Status.LoadBalancer.Ingress,
		Mine:            p.ownsStatus(ing),
		OtherWriter:     p.otherWriter(ing),
		StatusOwner:     ing.Annotations[contract.AnnotationStatusOwner],
		Want:            r.addrs,
		NoAddress:       r.why,
		Cached:          p.rivalFor(ctx, log, r, ing, false),
		State:           *st,
	}
	d := decide(in)
	if d.Action == actRecheck {
		live := p.rivalFor(ctx, log, r, ing, true)
		in.Live = &live
		d = decide(in)
	}
	p.carryOut(ctx, log, r, id, ing, st, d)
}

// carryOut applies a decision on one Ingress: it remembers the next state, reports what the
// decision says to report (Events, logs, metrics) and writes or clears the status.
func (p *publisher) carryOut(ctx context.Context, log logr.Logger, r *syncRound, id types.NamespacedName, ing *networkingv1.Ingress, st *statusState, d statusDecision) {
	if d.Forget {
		delete(p.states, id)
	} else {
		*st = d.Next
	}
	r.wake(d.Until)
	cur := ing.Status.LoadBalancer.Ingress
	if d.NoAddressEvent && p.opts.Recorder != nil {
		p.opts.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, contract.ReasonNoAddress, "PublishStatus", "%s; not writing status.loadBalancer (never a node or cluster IP)", r.why)
	}
	if d.ResumedFrom != "" {
		log.Info("publishing Ingress status again", "ingress", id.String(), "was", d.ResumedFrom)
	}
	if d.ResumedForeign != "" {
		log.Info("writing Ingress status again: the other writer let go of it or was quiet", "ingress", id.String(), "otherWriter", d.ResumedForeign, "letGo", d.LetGo)
	}
	if d.Conflict {
		p.conflict(log, ing, r.classes, r.cands, cur, st.backoff)
	}
	if d.Stopped && p.opts.Metrics != nil {
		p.opts.Metrics.StatusConflicts.Inc()
	}
	switch d.Action {
	case actClear:
		p.write(ctx, log, ing, nil, "cleared")
	case actYield:
		if d.ReportYield {
			p.reportYield(log, r, ing, st, d)
		}
	case actWrite:
		if p.write(ctx, log, ing, d.Addrs, "ok") {
			st.wrote, st.basedOn = d.Addrs, ing.ResourceVersion
		}
	}
}

// countYielded sets metalgate_proxy_ingresses_yielded from the Ingresses' states.
func (p *publisher) countYielded() {
	m := p.opts.Metrics
	if m == nil {
		return
	}
	count := map[string]int{}
	for _, st := range p.states {
		if st.yielded != "" {
			count[st.yielded]++
		}
	}
	for _, r := range yieldReasons {
		m.IngressesYielded.WithLabelValues(r).Set(float64(count[r]))
	}
}

// rivalFor is the arbitration's verdict on the Ingress: whether another metalgate proxy wins
// it, and which. With live, it decides on the Services of the Ingress's namespace as the API
// server has them now (our other candidates stay as cached; when the API server cannot be
// read, on the cache): decide asks so before it replaces a value another writer put there,
// since the proxy that wrote it may be newer than our cache.
func (p *publisher) rivalFor(ctx context.Context, log logr.Logger, r *syncRound, ing *networkingv1.Ingress, live bool) rival {
	cands, self := r.cands, r.self
	if live {
		var list corev1.ServiceList
		if err := p.reader.List(ctx, &list, client.InNamespace(ing.Namespace)); err != nil {
			log.Error(err, "list Services before replacing another writer's status; deciding on the cache", "namespace", ing.Namespace)
		} else {
			svcs := make([]*corev1.Service, len(list.Items))
			for i := range list.Items {
				svcs[i] = &list.Items[i]
			}
			var ownSvc *corev1.Service
			for _, svc := range r.in.Services {
				if svc.Namespace == self.Service.Namespace && svc.Name == self.Service.Name {
					ownSvc = svc
				}
			}
			cands, _ = p.arb.candidates(r.in, self.Service, ownSvc, map[string][]*corev1.Service{ing.Namespace: svcs})
		}
	}
	if d := Arbitrate(cands, p.arb.subject(ing)); d.Winner != nil && d.Winner.Service != self.Service {
		return rival{Lost: true, Winner: *d.Winner}
	}
	return rival{}
}

// servingNote says whether this proxy still routes the traffic of Ingresses it yields.
func (p *publisher) servingNote() string {
	if p.opts.YieldTraffic {
		return ". This proxy does not route its traffic either (--serve-yielded-ingresses=false)"
	}
	return ". This proxy still routes its traffic (its VIP keeps working; --serve-yielded-ingresses=false stops that)"
}

// reportYield reports that another writer has the Ingress's status (an Event and a log
// line); decide says when: once per Ingress and writer, not once per sync, and every stop
// for a foreign writer.
func (p *publisher) reportYield(log logr.Logger, r *syncRound, ing *networkingv1.Ingress, st *statusState, d statusDecision) {
	y := d.Yield
	eventType, reason := corev1.EventTypeWarning, contract.ReasonYielded
	var msg string
	switch y.Why {
	case yieldAnnotation:
		eventType = corev1.EventTypeNormal
		msg = fmt.Sprintf("annotation %s names %q as the writer of status.loadBalancer; this proxy (%s, field manager %q) leaves it alone%s",
			contract.AnnotationStatusOwner, y.To, r.ownID, p.opts.FieldManager, p.servingNote())
	case yieldProxy:
		w := y.Winner
		msg = fmt.Sprintf("status.loadBalancer of this Ingress is published by metalgate proxy %s (%s), not by this proxy (%s): %s (docs/proxy.md, \"Two proxies, one class\")%s",
			w, strings.Join(w.Addresses, ","), r.self.Service, Why(w, r.self, ing.Namespace), p.servingNote())
	case yieldForeign:
		reason = contract.ReasonForeignWriter
		msg = p.stopMessage(r, ing, st, d)
	}
	log.Info("leaving Ingress status to another writer", "ingress", ing.Namespace+"/"+ing.Name, "why", y.Why, "writer", y.To)
	if p.opts.Recorder != nil {
		p.opts.Recorder.Eventf(ing, nil, eventType, reason, "PublishStatus", "%s", msg)
	}
}

// stopMessage says that this proxy stops writing the Ingress for a foreign writer, and when
// it writes again.
func (p *publisher) stopMessage(r *syncRound, ing *networkingv1.Ingress, st *statusState, d statusDecision) string {
	other, theirs, own := d.Yield.To, ing.Status.LoadBalancer.Ingress, r.ownID
	quiet := p.opts.statusPolicy().quietNeeded(st.stops)
	name := describeWriter(other, r.cands)
	resume := fmt.Sprintf("once the status has not changed for %s", quiet)
	if quiet == 0 {
		resume = "only when the other writer clears the status"
	}
	if st.stops > 1 {
		return fmt.Sprintf("status.loadBalancer of this Ingress was replaced again by %s (now %s) after this proxy (%s) wrote it again; it stops writing it (stop %d of %d) and writes again %s, or when annotation %s names this proxy",
			name, formatAddresses(theirs), own, st.stops, maxQuietStops, resume, contract.AnnotationStatusOwner)
	}
	return fmt.Sprintf("status.loadBalancer of this Ingress was replaced %d time(s) within %s by %s (now %s); this proxy (%s, field manager %q) stops writing it. "+
		"It writes again %s, or at once if annotation %s names this proxy; to leave the Ingress to the other writer for good, set %s=%q",
		d.Overwrites, p.opts.ConflictWindow, name, formatAddresses(theirs), own, p.opts.FieldManager, resume, contract.AnnotationStatusOwner, contract.AnnotationStatusOwner, other)
}

// describeWriter names a field manager for a message, and the metalgate proxy behind it.
func describeWriter(fm string, cands []Candidate) string {
	if fm == "" {
		return "an unknown writer (no field manager in managedFields)"
	}
	for _, c := range cands {
		if c.FieldManager == fm {
			return fmt.Sprintf("field manager %q (metalgate proxy %s)", fm, c.Service)
		}
	}
	return fmt.Sprintf("field manager %q", fm)
}

// announceSelf puts this proxy's announcement on its own Service unless it is there already.
// A failure is reported once per distinct error (log, Warning AnnounceFailed on the Service,
// metric metalgate_proxy_announced 0); statuses are still written.
func (p *publisher) announceSelf(ctx context.Context, log logr.Logger, svc *corev1.Service) {
	ok := p.opts.announced(svc) || svc.ResourceVersion == p.announcedRV && p.announce == ""
	if !ok {
		lbls, ann := p.opts.announcement()
		ac := corev1ac.Service(svc.Name, svc.Namespace).WithLabels(lbls).WithAnnotations(ann)
		err := p.client.Apply(ctx, ac, client.FieldOwner(p.opts.FieldManager), client.ForceOwnership)
		if err != nil {
			why := fmt.Sprintf("cannot announce this proxy on its publish Service %s/%s (other metalgate proxies cannot arbitrate with it): %v", svc.Namespace, svc.Name, err)
			if why != p.announce {
				p.announce = why
				log.Info("announce failed", "service", svc.Namespace+"/"+svc.Name, "error", err.Error())
				if p.opts.Recorder != nil {
					p.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, contract.ReasonAnnounceFailed, "Announce", "%s", why)
				}
			}
		} else {
			ok = true
			p.announce, p.announcedRV = "", svc.ResourceVersion
			log.Info("announced on publish Service", "service", svc.Namespace+"/"+svc.Name)
		}
	}
	if p.opts.Metrics != nil {
		if ok {
			p.opts.Metrics.Announced.Set(1)
		} else {
			p.opts.Metrics.Announced.Set(0)
		}
	}
}

// conflict reports another writer of an owned Ingress's status.
func (p *publisher) conflict(log logr.Logger, ing *networkingv1.Ingress, classes map[string]*networkingv1.IngressClass, cands []Candidate, theirs []networkingv1.IngressLoadBalancerIngress, backoff time.Duration) {
	other := describeWriter(p.otherWriter(ing), cands)
	msg := fmt.Sprintf("status.loadBalancer of this Ingress is being overwritten by %s (to %s); another controller may claim the same IngressClass. Backing off %s before rewriting; at %d overwrites within %s this proxy stops writing it",
		other, formatAddresses(theirs), backoff, p.opts.MaxConflicts, p.opts.ConflictWindow)
	log.Info("ingress status conflict", "ingress", ing.Namespace+"/"+ing.Name, "otherWriter", other, "backoff", backoff)
	if p.opts.Metrics != nil {
		p.opts.Metrics.StatusConflicts.Inc()
	}
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, contract.ReasonStatusConflict, "PublishStatus", "%s", msg)
	// The class is cluster-scoped: its Events go to the default namespace, where a proxy
	// scoped to its own namespaces may not write (config/proxy/namespaced), so only a
	// cluster-wide proxy reports there.
	if ing.Spec.IngressClassName != nil && len(p.opts.WatchNamespaces) == 0 {
		if c := classes[*ing.Spec.IngressClassName]; c != nil {
			p.opts.Recorder.Eventf(c, ing, corev1.EventTypeWarning, contract.ReasonStatusConflict, "PublishStatus",
				"Ingress %s/%s: status overwritten by %s; is another controller serving this class?", ing.Namespace, ing.Name, other)
		}
	}
}

// write sets status.loadBalancer.ingress to want (nil clears it) as our field manager. The
// update carries the resourceVersion read, so a concurrent change makes it fail instead of
// being overwritten blindly; the next event brings the new version.
func (p *publisher) write(ctx context.Context, log logr.Logger, ing *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress, result string) bool {
	obj := ing.DeepCopy()
	obj.Status.LoadBalancer.Ingress = want
	if want == nil {
		result = "cleared"
	}
	err := p.client.Status().Update(ctx, obj, client.FieldOwner(p.opts.FieldManager))
	if err != nil {
		if p.opts.Metrics != nil {
			p.opts.Metrics.StatusWrites.WithLabelValues("error").Inc()
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			log.Error(err, "write ingress status failed", "ingress", ing.Namespace+"/"+ing.Name)
		}
		return false
	}
	if p.opts.Metrics != nil {
		p.opts.Metrics.StatusWrites.WithLabelValues(result).Inc()
	}
	log.V(1).Info("ingress status written", "ingress", ing.Namespace+"/"+ing.Name, "addresses", formatAddresses(want))
	return true
}

// ownsStatus reports whether our field manager owns status.loadBalancer in managedFields:
// the value there is the one we wrote.
func (p *publisher) ownsStatus(ing *networkingv1.Ingress) bool {
	for _, mf := range ing.ManagedFields {
		if mf.Manager == p.opts.FieldManager && mf.Subresource == "status" && mf.FieldsV1 != nil &&
			bytes.Contains(mf.FieldsV1.Raw, []byte(`"f:loadBalancer"`)) {
			return true
		}
	}
	return false
}

// otherWriter names the field manager that last wrote status.loadBalancer, if not us.
func (p *publisher) otherWriter(ing *networkingv1.Ingress) string {
	name, latest := "", time.Time{}
	for _, mf := range ing.ManagedFields {
		if mf.Manager == p.opts.FieldManager || mf.Subresource != "status" || mf.FieldsV1 == nil ||
			!bytes.Contains(mf.FieldsV1.Raw, []byte(`"f:loadBalancer"`)) {
			continue
		}
		if mf.Time != nil && mf.Time.After(latest) || name == "" {
			name = mf.Manager
			if mf.Time != nil {
				latest = mf.Time.Time
			}
		}
	}
	return name
}

var errNoOwnPod = errors.New("POD_NAME and POD_NAMESPACE are not set and no --publish-service was given")

// ownService returns the proxy's own Service and its load-balancer addresses, or why there
// are none (the Service may still be returned: it exists without an address).
func (p *publisher) ownService(ctx context.Context, in ingress.Input) (types.NamespacedName, *corev1.Service, []networkingv1.IngressLoadBalancerIngress, string) {
	id, err := p.arb.self.resolve(ctx, in.Services)
	if err != nil {
		return id, nil, nil, err.Error()
	}
	var svc *corev1.Service
	for _, s := range in.Services {
		if s.Namespace == id.Namespace && s.Name == id.Name {
			svc = s
			break
		}
	}
	if svc == nil {
		return id, nil, nil, fmt.Sprintf("publish Service %s not found", id)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return id, svc, nil, fmt.Sprintf("publish Service %s is type %s, not LoadBalancer", id, svc.Spec.Type)
	}
	var out []networkingv1.IngressLoadBalancerIngress
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP == "" && lb.Hostname == "" {
			continue
		}
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	if len(out) == 0 {
		return id, svc, nil, fmt.Sprintf("publish Service %s has no load-balancer address yet", id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP+out[i].Hostname < out[j].IP+out[j].Hostname })
	return id, svc, out, ""
}

func sameAddresses(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

func formatAddresses(a []networkingv1.IngressLoadBalancerIngress) string {
	var s []string
	for _, x := range a {
		if x.IP != "" {
			s = append(s, x.IP)
		} else {
			s = append(s, x.Hostname)
		}
	}
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ",")
}
