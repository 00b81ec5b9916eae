package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/proxy/controlplane"
	"github.com/metalgate/metalgate/proxy/table"
)

// Severities of findings. Either makes check exit 1.
const (
	severityError   = "error"   // something does not work
	severityWarning = "warning" // something probably does not work as meant
)

// conflictWindow is how far back a StatusConflict event counts as recent.
const conflictWindow = time.Hour

// annotationIngressClass is the deprecated class annotation some Ingresses still carry.
const annotationIngressClass = "kubernetes.io/ingress.class"

// annotationDefaultClass marks the cluster's default IngressClass.
const annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"

// finding is one problem check reports.
type finding struct {
	severity string
	object   string // "Kind namespace/name" or "Kind name"
	message  string
	hint     string // what to look at or do next
}

func (f finding) String() string {
	s := fmt.Sprintf("%s: %s: %s", f.severity, f.object, f.message)
	if f.hint != "" {
		s += "\n  hint: " + f.hint
	}
	return s
}

// clusterState is what check reads: metalgate's objects in its namespace, and Services,
// Ingresses, IngressClasses, proxy pods and StatusConflict events everywhere.
type clusterState struct {
	namespace string
	pools     []v1alpha1.IPAddressPool
	l2        []v1alpha1.L2Advertisement
	bgp       []v1alpha1.BGPAdvertisement
	services  []corev1.Service
	ingresses []networkingv1.Ingress
	classes   []networkingv1.IngressClass
	proxies   []proxyPod
	conflicts []corev1.Event // reason StatusConflict
}

// check lists configuration problems and fails when there is any.
func check(ctx context.Context, e *env, out io.Writer) error {
	s, err := readClusterState(ctx, e.c, e.o.namespace)
	if err != nil {
		return err
	}
	fs := findings(s, e.now())
	if len(fs) == 0 {
		fmt.Fprintln(out, "no problems found")
		return nil
	}
	for _, f := range fs {
		fmt.Fprintln(out, f)
	}
	return fmt.Errorf("%d problem(s) found", len(fs))
}

func readClusterState(ctx context.Context, c client.Reader, namespace string) (clusterState, error) {
	s := clusterState{namespace: namespace}
	var pools v1alpha1.IPAddressPoolList
	if err := c.List(ctx, &pools, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list IPAddressPools in %s: %w", namespace, err)
	}
	var l2 v1alpha1.L2AdvertisementList
	if err := c.List(ctx, &l2, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list L2Advertisements in %s: %w", namespace, err)
	}
	var bgp v1alpha1.BGPAdvertisementList
	if err := c.List(ctx, &bgp, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list BGPAdvertisements in %s: %w", namespace, err)
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return s, fmt.Errorf("list Services: %w", err)
	}
	var ings networkingv1.IngressList
	if err := c.List(ctx, &ings); err != nil {
		return s, fmt.Errorf("list Ingresses: %w", err)
	}
	var classes networkingv1.IngressClassList
	if err := c.List(ctx, &classes); err != nil {
		return s, fmt.Errorf("list IngressClasses: %w", err)
	}
	proxies, err := listProxies(ctx, c)
	if err != nil {
		return s, err
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.MatchingFields{"reason": controlplane.ReasonStatusConflict}); err != nil {
		return s, fmt.Errorf("list %s events: %w", controlplane.ReasonStatusConflict, err)
	}
	s.pools, s.l2, s.bgp, s.services, s.ingresses, s.classes, s.proxies, s.conflicts =
		pools.Items, l2.Items, bgp.Items, svcs.Items, ings.Items, classes.Items, proxies, events.Items
	return s, nil
}

// findings computes check's report from a cluster state, sorted by object then message.
func findings(s clusterState, now time.Time) []finding {
	out := poolFindings(s)
	out = append(out, ingressFindings(s, now)...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].object != out[j].object {
			return out[i].object < out[j].object
		}
		return out[i].message < out[j].message
	})
	return out
}

// poolFindings: no pool, overlapping or invalid pools, pools nothing announces, Services
// without an address or with one in no pool.
func poolFindings(s clusterState) []finding {
	var out []finding
	if len(s.pools) == 0 {
		out = append(out, finding{severityError, "Namespace " + s.namespace, "no IPAddressPool: no Service can get an address",
			"create one (config/samples/ipaddresspool-default.yaml), or pass -n with metalgate's namespace"})
	}
	for _, p := range s.pools {
		obj := "IPAddressPool " + p.Namespace + "/" + p.Name
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionOverlap); c != nil && c.Status == "True" {
			out = append(out, finding{severityError, obj, c.Reason + ": " + c.Message, "make the pools' address ranges disjoint"})
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionValid); c != nil && c.Status == "False" {
			out = append(out, finding{severityError, obj, c.Reason + ": " + c.Message, fmt.Sprintf("kubectl describe ipaddresspool -n %s %s", p.Namespace, p.Name)})
		}
		if !advertised(&p, s.l2, s.bgp) {
			out = append(out, finding{severityError, obj, "no L2Advertisement or BGPAdvertisement selects it: its addresses are assigned but not announced",
				"add it to an advertisement's spec.ipAddressPools (or match spec.ipAddressPoolSelectors)"})
		}
	}
	for _, svc := range sortedLoadBalancers(s.services) {
		obj := "Service " + svc.Namespace + "/" + svc.Name
		if len(ingressIPs(&svc)) == 0 && svc.Spec.LoadBalancerClass == nil {
			out = append(out, finding{severityWarning, obj, "no address yet", fmt.Sprintf("kubectl describe service -n %s %s shows why", svc.Namespace, svc.Name)})
		}
		for _, ip := range ingressIPs(&svc) {
			if a, err := netip.ParseAddr(ip); err == nil && !inAnyPool(a, s.pools) {
				out = append(out, finding{severityWarning, obj, fmt.Sprintf("address %s is in no pool", ip), "another load balancer assigned it, or its pool was deleted"})
			}
		}
	}
	return out
}

// ingressFindings: Ingresses whose class does not exist or that no running metalgate proxy
// serves, metalgate IngressClasses no running proxy serves, Ingress status overwritten by
// another writer (recent StatusConflict events) or holding an address that is no metalgate
// proxy's VIP.
func ingressFindings(s clusterState, now time.Time) []finding {
	var out []finding
	classes := map[string]*networkingv1.IngressClass{}
	var defaults []string
	ours := map[string]bool{table.ControllerName: true} // controllers metalgate proxies serve
	for _, p := range s.proxies {
		ours[p.controller] = true
	}
	for i := range s.classes {
		c := &s.classes[i]
		classes[c.Name] = c
		if c.Annotations[annotationDefaultClass] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	sort.Strings(defaults)
	if len(defaults) > 1 {
		out = append(out, finding{severityWarning, "IngressClass " + strings.Join(defaults, ", "), "more than one IngressClass is the default: new Ingresses without a class are rejected",
			"remove " + annotationDefaultClass + " from all but one"})
	}
	ready := func(controller, namespace string, classless bool) bool {
		for _, p := range s.proxies {
			if p.ready() && p.serves(controller, namespace) && (!classless || p.classless) {
				return true
			}
		}
		return false
	}
	unserved := map[string]bool{} // metalgate classes without any ready proxy
	for _, c := range s.classes {
		if !ours[c.Spec.Controller] || anyReady(s.proxies, c.Spec.Controller) {
			continue
		}
		unserved[c.Name] = true
		out = append(out, finding{severityError, "IngressClass " + c.Name,
			fmt.Sprintf("no ready metalgate proxy serves its controller %s: its Ingresses get no traffic", c.Spec.Controller),
			"kubectl get pods -A -l app.kubernetes.io/component=proxy; deploy one with kubectl apply -k config/proxy (or config/proxy/namespaced)"})
	}
	vips := proxyVIPs(s.proxies, s.services)
	for _, ing := range s.ingresses {
		obj := "Ingress " + ing.Namespace + "/" + ing.Name
		name, how := "", ""
		switch {
		case ing.Spec.IngressClassName != nil:
			name, how = *ing.Spec.IngressClassName, "spec.ingressClassName"
		case ing.Annotations[annotationIngressClass] != "":
			name, how = ing.Annotations[annotationIngressClass], "annotation "+annotationIngressClass
		case len(defaults) == 1:
			name, how = defaults[0], "the default IngressClass"
		default:
			out = append(out, finding{severityWarning, obj, "no class and no default IngressClass: no IngressClass-based controller serves it",
				"set spec.ingressClassName (kubectl get ingressclass)"})
			continue
		}
		class := classes[name]
		if class == nil {
			out = append(out, finding{severityError, obj, fmt.Sprintf("its class %q (%s) names no IngressClass: no controller serves it", name, how),
				"kubectl get ingressclass; set spec.ingressClassName to one of them"})
			continue
		}
		controller := class.Spec.Controller
		if !ours[controller] {
			continue // another controller's Ingress
		}
		classless := ing.Spec.IngressClassName == nil && ing.Annotations[annotationIngressClass] == ""
		if !unserved[name] && !ready(controller, ing.Namespace, classless) {
			msg := fmt.Sprintf("no ready metalgate proxy of class %s serves namespace %s", name, ing.Namespace)
			if classless {
				msg = fmt.Sprintf("it has no class and no ready metalgate proxy takes Ingresses without a class (--watch-ingress-without-class) in namespace %s", ing.Namespace)
			}
			out = append(out, finding{severityError, obj, msg,
				"the proxies' --watch-namespace flags: kubectl get pods -A -l app.kubernetes.io/component=proxy -o yaml"})
		}
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			if lb.IP != "" && !vips[canonicalIP(lb.IP)] {
				out = append(out, finding{severityError, obj,
					fmt.Sprintf("status.loadBalancer holds %s, which is the VIP of no metalgate proxy Service (a node IP written by another controller?)", lb.IP),
					fmt.Sprintf("kubectl get ingress -n %s %s -o yaml --show-managed-fields shows who wrote it", ing.Namespace, ing.Name)})
			}
		}
	}
	out = append(out, conflictFindings(s.conflicts, now)...)
	return out
}

func anyReady(proxies []proxyPod, controller string) bool {
	for _, p := range proxies {
		if p.ready() && p.controller == controller {
			return true
		}
	}
	return false
}

// conflictFindings reports each Ingress with a StatusConflict Warning event seen within
// conflictWindow: another writer keeps replacing the address a proxy wrote.
func conflictFindings(events []corev1.Event, now time.Time) []finding {
	type latest struct {
		at    time.Time
		count int32
		msg   string
	}
	by := map[string]*latest{}
	for _, ev := range events {
		if ev.Reason != controlplane.ReasonStatusConflict || ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "Ingress" {
			continue
		}
		at := eventTime(&ev)
		if now.Sub(at) > conflictWindow {
			continue
		}
		k := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
		count := max(ev.Count, 1)
		if ev.Series != nil {
			count = max(count, ev.Series.Count)
		}
		l := by[k]
		if l == nil {
			l = &latest{}
			by[k] = l
		}
		l.count += count
		if at.After(l.at) {
			l.at, l.msg = at, ev.Message
		}
	}
	var out []finding
	for k, l := range by {
		out = append(out, finding{severityError, "Ingress " + k,
			fmt.Sprintf("status conflict: %d %s event(s), last %s ago: %s", l.count, controlplane.ReasonStatusConflict, now.Sub(l.at).Round(time.Second), l.msg),
			"two controllers claim its IngressClass (another ingress controller, or two metalgate proxies watching one namespace); keep one"})
	}
	return out
}

// eventTime is when an event was last seen, whichever API wrote it.
func eventTime(ev *corev1.Event) time.Time {
	t := ev.LastTimestamp.Time
	if ev.Series != nil && ev.Series.LastObservedTime.After(t) {
		t = ev.Series.LastObservedTime.Time
	}
	if ev.EventTime.After(t) {
		t = ev.EventTime.Time
	}
	if t.IsZero() {
		t = ev.CreationTimestamp.Time
	}
	return t
}
