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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/proxy/table"
)

// Event reasons of the status publisher.
const (
	ReasonNoAddress      = "NoLoadBalancerAddress"
	ReasonStatusConflict = "StatusConflict"
)

// publisher writes the proxy's own Service addresses into the status of the Ingresses it
// owns. It runs on the leader only. The rules:
//
//   - The addresses are exactly those in the own Service's status.loadBalancer.ingress. When
//     the Service has none or does not exist, nothing is written (a Warning event says why)
//     and what this proxy wrote before is cleared — never a node IP, never a ClusterIP.
//   - Only Ingresses it owns are written. What it wrote is known from managedFields: its
//     field manager owns status.loadBalancer. It clears only that, e.g. when an Ingress
//     changes class.
//   - When another writer overwrites the value it wrote twice within ConflictWindow, it stops
//     rewriting in a loop: each further rewrite waits BackoffBase, doubling up to BackoffMax,
//     and every conflict is a Warning event naming the other field manager (on the Ingress
//     and its IngressClass) and a count in metalgate_proxy_status_conflicts_total.
var timeNow = time.Now

type publisher struct {
	opts      Options
	client    client.Client // reads from the cache, writes to the API server
	reader    client.Reader // the API server, for the own Pod
	snapshots chan table.Input
	kick      chan struct{}
	states    map[types.NamespacedName]*statusState
	own       types.NamespacedName // resolved own Service
	lastWhy   string
	now       func() time.Time
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
}

func (p *publisher) NeedLeaderElection() bool { return true }

func (p *publisher) Start(ctx context.Context) error {
	log := p.opts.Logger.WithName("status")
	var in table.Input
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

// sync brings every Ingress's status in line; it returns when it next needs to run for a
// backoff to expire (zero: no need).
func (p *publisher) sync(ctx context.Context, log logr.Logger, in table.Input) time.Time {
	addrs, why := p.ownAddresses(ctx, in)
	if m := p.opts.Metrics; m != nil {
		if why != "" {
			m.AddressMissing.Set(1)
		} else {
			m.AddressMissing.Set(0)
		}
	}
	if why != "" && why != p.lastWhy {
		log.Info("not writing Ingress status", "reason", why)
	}
	p.lastWhy = why
	ours, defaultIsOurs := table.Classes(in.Classes, p.opts.Controller)
	classes := map[string]*networkingv1.IngressClass{}
	for _, c := range in.Classes {
		classes[c.Name] = c
	}
	var next time.Time
	seen := map[types.NamespacedName]bool{}
	for _, ing := range in.Ingresses {
		id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		seen[id] = true
		st := p.states[id]
		if st == nil {
			st = &statusState{}
			p.states[id] = st
		}
		if st.basedOn != "" && st.basedOn == ing.ResourceVersion {
			continue // our write is not in the cache yet
		}
		st.basedOn = ""
		cur := ing.Status.LoadBalancer.Ingress
		mine := p.ownsStatus(ing)
		if !table.Owns(ing, ours, defaultIsOurs, p.opts.WatchDefaultClass) {
			if mine && len(cur) > 0 {
				p.write(ctx, log, ing, nil, "cleared")
			}
			delete(p.states, id)
			continue
		}
		var want []networkingv1.IngressLoadBalancerIngress
		if why != "" {
			if st.noAddrWhy != why && p.opts.Recorder != nil {
				p.opts.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, ReasonNoAddress, "PublishStatus", "%s; not writing status.loadBalancer (never a node or cluster IP)", why)
			}
			st.noAddrWhy = why
			if !mine || len(cur) == 0 {
				continue // nothing of ours to clear
			}
		} else {
			st.noAddrWhy = ""
			want = addrs
		}
		if sameAddresses(cur, want) {
			continue
		}
		now := p.now()
		if st.wrote != nil && !mine && sameAddresses(st.wrote, want) {
			// We wrote this value and someone replaced it.
			cutoff := now.Add(-p.opts.ConflictWindow)
			kept := st.overwrites[:0]
			for _, t := range st.overwrites {
				if t.After(cutoff) {
					kept = append(kept, t)
				}
			}
			st.overwrites = append(kept, now)
			if len(st.overwrites) >= 2 {
				if st.backoff == 0 {
					st.backoff = p.opts.BackoffBase
				} else {
					st.backoff = min(st.backoff*2, p.opts.BackoffMax)
				}
				st.notBefore = now.Add(st.backoff)
				p.conflict(log, ing, classes, cur, st.backoff)
			}
			st.wrote = nil // counted; the next rewrite sets it again
		}
		if now.Before(st.notBefore) {
			if next.IsZero() || st.notBefore.Before(next) {
				next = st.notBefore
			}
			continue
		}
		if p.write(ctx, log, ing, want, "ok") {
			st.wrote, st.basedOn = want, ing.ResourceVersion
		}
	}
	for id := range p.states {
		if !seen[id] {
			delete(p.states, id)
		}
	}
	return next
}

// conflict reports another writer of an owned Ingress's status.
func (p *publisher) conflict(log logr.Logger, ing *networkingv1.Ingress, classes map[string]*networkingv1.IngressClass, theirs []networkingv1.IngressLoadBalancerIngress, backoff time.Duration) {
	other := p.otherWriter(ing)
	if other == "" {
		other = "an unknown writer"
	} else {
		other = fmt.Sprintf("field manager %q", other)
	}
	msg := fmt.Sprintf("status.loadBalancer of this Ingress is being overwritten by %s (to %s); another controller may claim the same IngressClass. Backing off %s before rewriting",
		other, formatAddresses(theirs), backoff)
	log.Info("ingress status conflict", "ingress", ing.Namespace+"/"+ing.Name, "otherWriter", other, "backoff", backoff)
	if p.opts.Metrics != nil {
		p.opts.Metrics.StatusConflicts.Inc()
	}
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, ReasonStatusConflict, "PublishStatus", "%s", msg)
	// The class is cluster-scoped: its Events go to the default namespace, where a proxy
	// scoped to its own namespaces may not write (config/proxy/namespaced), so only a
	// cluster-wide proxy reports there.
	if ing.Spec.IngressClassName != nil && len(p.opts.WatchNamespaces) == 0 {
		if c := classes[*ing.Spec.IngressClassName]; c != nil {
			p.opts.Recorder.Eventf(c, ing, corev1.EventTypeWarning, ReasonStatusConflict, "PublishStatus",
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

// ownAddresses returns the load-balancer addresses of the proxy's own Service, or why there
// are none.
func (p *publisher) ownAddresses(ctx context.Context, in table.Input) ([]networkingv1.IngressLoadBalancerIngress, string) {
	id := p.opts.PublishService
	if id.Name == "" {
		var err error
		if id, err = p.findOwnService(ctx, in); err != nil {
			return nil, err.Error()
		}
	}
	var svc *corev1.Service
	for _, s := range in.Services {
		if s.Namespace == id.Namespace && s.Name == id.Name {
			svc = s
			break
		}
	}
	if svc == nil {
		return nil, fmt.Sprintf("publish Service %s not found", id)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, fmt.Sprintf("publish Service %s is type %s, not LoadBalancer", id, svc.Spec.Type)
	}
	var out []networkingv1.IngressLoadBalancerIngress
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP == "" && lb.Hostname == "" {
			continue
		}
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	if len(out) == 0 {
		return nil, fmt.Sprintf("publish Service %s has no load-balancer address yet", id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP+out[i].Hostname < out[j].IP+out[j].Hostname })
	return out, ""
}

// findOwnService finds the Service that selects this proxy's Pod: type LoadBalancer first,
// then by name.
func (p *publisher) findOwnService(ctx context.Context, in table.Input) (types.NamespacedName, error) {
	if p.own.Name != "" {
		return p.own, nil
	}
	if p.opts.PodName == "" || p.opts.PodNamespace == "" {
		return types.NamespacedName{}, errNoOwnPod
	}
	var pod corev1.Pod
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: p.opts.PodNamespace, Name: p.opts.PodName}, &pod); err != nil {
		return types.NamespacedName{}, fmt.Errorf("get own Pod %s/%s: %w", p.opts.PodNamespace, p.opts.PodName, err)
	}
	var best *corev1.Service
	for _, s := range in.Services {
		if s.Namespace != pod.Namespace || len(s.Spec.Selector) == 0 {
			continue
		}
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		lb := s.Spec.Type == corev1.ServiceTypeLoadBalancer
		if best == nil || lb && best.Spec.Type != corev1.ServiceTypeLoadBalancer ||
			lb == (best.Spec.Type == corev1.ServiceTypeLoadBalancer) && s.Name < best.Name {
			best = s
		}
	}
	if best == nil {
		return types.NamespacedName{}, fmt.Errorf("no Service in %s selects own Pod %s", pod.Namespace, pod.Name)
	}
	p.own = types.NamespacedName{Namespace: best.Namespace, Name: best.Name}
	return p.own, nil
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
