package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// allNamespaces is the value of contract.AnnotationProxyWatchNamespaces for a proxy that
// watches every namespace.
const allNamespaces = "*"

// announcement is what this proxy puts on its publish Service: the label and annotations.
func (o *Options) announcement() (map[string]string, map[string]string) {
	ns := allNamespaces
	if len(o.WatchNamespaces) > 0 {
		ns = strings.Join(o.WatchNamespaces, ",")
	}
	return map[string]string{contract.LabelProxy: "true"}, map[string]string{
		contract.AnnotationProxyController:      o.Controller,
		contract.AnnotationProxyWatchNamespaces: ns,
		contract.AnnotationProxyWithoutClass:    fmt.Sprint(o.WatchDefaultClass),
		contract.AnnotationProxyFieldManager:    o.FieldManager,
	}
}

// announced reports whether svc already carries this proxy's announcement.
func (o *Options) announced(svc *corev1.Service) bool {
	l, a := o.announcement()
	for k, v := range l {
		if svc.Labels[k] != v {
			return false
		}
	}
	for k, v := range a {
		if svc.Annotations[k] != v {
			return false
		}
	}
	return true
}

// CandidateFromService reads the announcement of a proxy on its publish Service. ok is false
// when svc announces no proxy (no contract.AnnotationProxyController); err names the annotation and
// why when the announcement is malformed (then the Service counts as no proxy). Serving is
// left false: it depends on the Service's endpoints over time (presence).
func CandidateFromService(svc *corev1.Service) (c Candidate, ok bool, err error) {
	ctrl, ok := svc.Annotations[contract.AnnotationProxyController]
	if !ok {
		return Candidate{}, false, nil
	}
	id := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	bad := func(key, why string) error {
		return fmt.Errorf("proxy announcement on Service %s: annotation %s=%q: %s", id, key, svc.Annotations[key], why)
	}
	if ctrl == "" {
		return Candidate{}, false, bad(contract.AnnotationProxyController, "empty; want the IngressClass controller the proxy serves")
	}
	c = Candidate{Service: id, Created: svc.CreationTimestamp.Time, Controller: ctrl, Addresses: serviceAddresses(svc)}
	switch v := svc.Annotations[contract.AnnotationProxyWatchNamespaces]; v {
	case allNamespaces:
	case "":
		return Candidate{}, false, bad(contract.AnnotationProxyWatchNamespaces, `missing or empty; want "*" or a comma-separated list of namespaces`)
	default:
		for _, ns := range strings.Split(v, ",") {
			ns = strings.TrimSpace(ns)
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return Candidate{}, false, bad(contract.AnnotationProxyWatchNamespaces, fmt.Sprintf("%q is not a namespace name: %s", ns, strings.Join(errs, "; ")))
			}
			c.Namespaces = append(c.Namespaces, ns)
		}
	}
	switch v := svc.Annotations[contract.AnnotationProxyWithoutClass]; v {
	case "true":
		c.WithoutClass = true
	case "false":
	default:
		return Candidate{}, false, bad(contract.AnnotationProxyWithoutClass, `want "true" or "false"`)
	}
	if c.FieldManager = svc.Annotations[contract.AnnotationProxyFieldManager]; c.FieldManager == "" {
		return Candidate{}, false, bad(contract.AnnotationProxyFieldManager, "missing or empty; want the field manager of the proxy's status writes")
	}
	return c, true, nil
}

// serviceAddresses returns the load-balancer addresses of a type LoadBalancer Service, sorted.
func serviceAddresses(svc *corev1.Service) []string {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []string
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		switch {
		case lb.IP != "":
			out = append(out, lb.IP)
		case lb.Hostname != "":
			out = append(out, lb.Hostname)
		}
	}
	sort.Strings(out)
	return out
}

// ReadyServices returns the Services that have at least one ready endpoint (a nil Ready
// condition counts as ready, as the API defines it) in the given EndpointSlices.
func ReadyServices(slices []*discoveryv1.EndpointSlice) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, s := range slices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out[types.NamespacedName{Namespace: s.Namespace, Name: name}] = true
				break
			}
		}
	}
	return out
}

// presence decides whether a proxy's publish Service counts as serving: it has a ready
// endpoint, or had one (or was first seen) less than goneAfter ago. The grace keeps a
// restarting proxy its Ingresses: a rollout or a crash of one pod must not move the status.
type presence struct {
	goneAfter time.Duration
	now       func() time.Time
	mu        sync.Mutex
	lastReady map[types.NamespacedName]time.Time
}

func newPresence(goneAfter time.Duration, now func() time.Time) *presence {
	return &presence{goneAfter: goneAfter, now: now, lastReady: map[types.NamespacedName]time.Time{}}
}

// serving records whether id has a ready endpoint now and reports whether it counts as
// serving, and when that ends if nothing changes (zero: not by time — it is ready, or gone).
func (p *presence) serving(id types.NamespacedName, ready bool) (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	last, seen := p.lastReady[id]
	if ready || !seen {
		p.lastReady[id], last = now, now
	}
	end := last.Add(p.goneAfter)
	if ready || !now.Before(end) {
		return ready, time.Time{}
	}
	return true, end
}

// retain forgets the Services not in keep.
func (p *presence) retain(keep map[types.NamespacedName]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.lastReady {
		if !keep[id] {
			delete(p.lastReady, id)
		}
	}
}

// arbiter turns a snapshot into arbitration candidates. The builder (every replica, for
// Options.YieldTraffic) and the publisher (leader) share it, so both see the same presence.
type arbiter struct {
	opts     Options
	presence *presence
	self     *selfResolver
	mu       sync.Mutex
	bad      map[string]bool // malformed announcements already logged
}

// candidates returns every proxy announced in the snapshot's Services plus this proxy, read
// from its Options (its own announcement may not be in the cache yet) and own Service (nil:
// none, so no address). Services in the namespaces of override replace the snapshot's there
// (the publisher's live read). expires is when the first of them stops counting as serving
// if nothing changes: the caller decides again then (zero: no such time).
func (a *arbiter) candidates(in ingress.Input, own types.NamespacedName, ownSvc *corev1.Service, override map[string][]*corev1.Service) (out []Candidate, expires time.Time) {
	ready := ReadyServices(in.Slices)
	keep := map[types.NamespacedName]bool{}
	serving := func(id types.NamespacedName) bool {
		ok, end := a.presence.serving(id, ready[id])
		if !end.IsZero() && (expires.IsZero() || end.Before(expires)) {
			expires = end
		}
		return ok
	}
	add := func(svc *corev1.Service) {
		id := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if id == own {
			return
		}
		c, ok, err := CandidateFromService(svc)
		if err != nil {
			a.mu.Lock()
			if !a.bad[err.Error()] {
				a.bad[err.Error()] = true
				a.opts.Logger.Info("ignoring a malformed proxy announcement", "error", err.Error())
			}
			a.mu.Unlock()
		}
		if !ok {
			return
		}
		keep[id] = true
		c.Serving = serving(id)
		out = append(out, c)
	}
	for _, svc := range in.Services {
		if _, replaced := override[svc.Namespace]; !replaced {
			add(svc)
		}
	}
	for _, svcs := range override {
		for _, svc := range svcs {
			add(svc)
		}
	}
	self := Candidate{Service: own, Controller: a.opts.Controller, WithoutClass: a.opts.WatchDefaultClass, FieldManager: a.opts.FieldManager}
	if len(a.opts.WatchNamespaces) > 0 {
		self.Namespaces = slices.Clone(a.opts.WatchNamespaces)
	}
	if ownSvc != nil {
		self.Created = ownSvc.CreationTimestamp.Time
		self.Addresses = serviceAddresses(ownSvc)
		keep[own] = true
		self.Serving = serving(own)
	}
	if override == nil {
		a.presence.retain(keep)
	}
	return append(out, self), expires
}

// subject returns the arbitration subject of an Ingress this proxy owns: the controller of
// its class is this proxy's.
func (a *arbiter) subject(ing *networkingv1.Ingress) Subject {
	return Subject{Namespace: ing.Namespace, Controller: a.opts.Controller, Classless: Classless(ing)}
}

// Classless reports whether an Ingress names no class, by field or by the old annotation.
func Classless(ing *networkingv1.Ingress) bool {
	_, annotated := ing.Annotations[annotationIngressClass]
	return ing.Spec.IngressClassName == nil && !annotated
}

// annotationIngressClass is the deprecated class annotation (ingress.Owns reads it too).
const annotationIngressClass = "kubernetes.io/ingress.class"

// selfResolver finds the proxy's publish Service: Options.PublishService, else the Service in
// the own Pod's namespace whose selector matches the Pod's labels (type LoadBalancer first,
// then by name). Found once, then remembered.
type selfResolver struct {
	opts   Options
	reader client.Reader // the API server, for the own Pod
	mu     sync.Mutex
	id     types.NamespacedName
}

func (r *selfResolver) resolve(ctx context.Context, services []*corev1.Service) (types.NamespacedName, error) {
	if r.opts.PublishService.Name != "" {
		return r.opts.PublishService, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id.Name != "" {
		return r.id, nil
	}
	if r.opts.PodName == "" || r.opts.PodNamespace == "" {
		return types.NamespacedName{}, errNoOwnPod
	}
	var pod corev1.Pod
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.opts.PodNamespace, Name: r.opts.PodName}, &pod); err != nil {
		return types.NamespacedName{}, fmt.Errorf("get own Pod %s/%s: %w", r.opts.PodNamespace, r.opts.PodName, err)
	}
	var best *corev1.Service
	for _, s := range services {
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
	r.id = types.NamespacedName{Namespace: best.Namespace, Name: best.Name}
	return r.id, nil
}
