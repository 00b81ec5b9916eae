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
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/refcheck"
	"github.com/metalgate/metalgate/proxy/controlplane"
	"github.com/metalgate/metalgate/proxy/ingress"
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
// EndpointSlices, Ingresses, IngressClasses, proxy pods and StatusConflict and
// ForeignStatusWriter events everywhere.
type clusterState struct {
	namespace string
	pools     []v1alpha1.IPAddressPool
	l2        []v1alpha1.L2Advertisement
	bgp       []v1alpha1.BGPAdvertisement
	refs      refcheck.Snapshot // pools, BGPPeers, BFDProfiles and Communities, for refFindings
	services  []corev1.Service
	slices    []discoveryv1.EndpointSlice
	ingresses []networkingv1.Ingress
	classes   []networkingv1.IngressClass
	proxies   []proxyPod
	conflicts []corev1.Event // reason StatusConflict or ForeignStatusWriter
	gateway   gatewayState
}

// check lists configuration problems and fails when there is any.
func check(ctx context.Context, e *env, out io.Writer) error {
	s, err := readClusterState(ctx, e.c, e.o.metalgateNamespace)
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
	var peers v1alpha1.BGPPeerList
	if err := c.List(ctx, &peers, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list BGPPeers in %s: %w", namespace, err)
	}
	var bfds v1alpha1.BFDProfileList
	if err := c.List(ctx, &bfds, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list BFDProfiles in %s: %w", namespace, err)
	}
	var comms v1alpha1.CommunityList
	if err := c.List(ctx, &comms, client.InNamespace(namespace)); err != nil {
		return s, fmt.Errorf("list Communities in %s: %w", namespace, err)
	}
	s.refs = refcheck.Snapshot{Pools: pools.Items, BGPPeers: peers.Items, BFDProfiles: bfds.Items, Communities: comms.Items}
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
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices); err != nil {
		return s, fmt.Errorf("list EndpointSlices: %w", err)
	}
	for _, reason := range []string{contract.ReasonStatusConflict, contract.ReasonForeignWriter} {
		var events corev1.EventList
		if err := c.List(ctx, &events, client.MatchingFields{"reason": reason}); err != nil {
			return s, fmt.Errorf("list %s events: %w", reason, err)
		}
		s.conflicts = append(s.conflicts, events.Items...)
	}
	s.pools, s.l2, s.bgp, s.services, s.slices, s.ingresses, s.classes, s.proxies =
		pools.Items, l2.Items, bgp.Items, svcs.Items, slices.Items, ings.Items, classes.Items, proxies
	if s.gateway, err = readGatewayState(ctx, c); err != nil {
		return s, err
	}
	return s, nil
}

// findings computes check's report from a cluster state, sorted by object then message.
func findings(s clusterState, now time.Time) []finding {
	out := poolFindings(s)
	out = append(out, refFindings(s)...)
	out = append(out, ingressFindings(s, now)...)
	out = append(out, gatewayFindings(s.gateway)...)
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

// refFindings: references of advertisements, BGPPeers, BFDProfiles and Communities that do not
// resolve, as internal/refcheck decides them: the same problems the controller writes into
// each object's Valid condition. A missing pool or peer is a warning (the advertisement still
// announces the others); everything else stops the object from being used and is an error.
func refFindings(s clusterState) []finding {
	var out []finding
	add := func(kind, resource, ns, name string, ps []refcheck.Problem) {
		for _, p := range ps {
			sev := severityError
			if p.Reason == v1alpha1.ReasonPoolNotFound || p.Reason == v1alpha1.ReasonPeerNotFound {
				sev = severityWarning
			}
			out = append(out, finding{sev, kind + " " + ns + "/" + name, p.Reason + ": " + p.String(),
				fmt.Sprintf("kubectl get %s -n %s %s -o yaml (status.conditions, type Valid)", resource, ns, name)})
		}
	}
	for i := range s.l2 {
		a := &s.l2[i]
		add("L2Advertisement", "l2advertisement", a.Namespace, a.Name, refcheck.L2Advertisement(a, s.refs))
	}
	for i := range s.bgp {
		a := &s.bgp[i]
		add("BGPAdvertisement", "bgpadvertisement", a.Namespace, a.Name, refcheck.BGPAdvertisement(a, s.refs))
	}
	for i := range s.refs.BGPPeers {
		p := &s.refs.BGPPeers[i]
		add("BGPPeer", "bgppeer", p.Namespace, p.Name, refcheck.BGPPeer(p, s.refs))
	}
	for i := range s.refs.BFDProfiles {
		p := &s.refs.BFDProfiles[i]
		add("BFDProfile", "bfdprofile", p.Namespace, p.Name, refcheck.BFDProfile(p))
	}
	for i := range s.refs.Communities {
		c := &s.refs.Communities[i]
		add("Community", "community", c.Namespace, c.Name, refcheck.Community(c, s.refs))
	}
	return out
}

// ingressFindings: Ingresses whose class does not exist or that no running metalgate proxy
// serves, metalgate IngressClasses no running proxy serves, Ingress status overwritten by
// another writer (recent StatusConflict and ForeignStatusWriter events) or holding an address
// that is no metalgate proxy's VIP, Ingresses more than one metalgate proxy serves (who
// publishes, who yields and why: the proxies' own arbitration rule).
func ingressFindings(s clusterState, now time.Time) []finding {
	cands, out := proxyCandidates(s)
	cv, classOut := classFindings(s)
	out = append(out, classOut...)
	vips := proxyVIPs(s.proxies, s.services)
	for i := range s.ingresses {
		out = append(out, oneIngressFindings(s, cv, &s.ingresses[i], cands, vips)...)
	}
	out = append(out, conflictFindings(s.conflicts, now)...)
	return out
}

// classView is what the Ingress findings need to know of the IngressClasses.
type classView struct {
	classes  map[string]*networkingv1.IngressClass // by name
	defaults []string                              // the default classes, sorted
	ours     map[string]bool                       // controllers metalgate proxies serve
	unserved map[string]bool                       // metalgate classes without any ready proxy
}

// classFindings: more than one default IngressClass, metalgate IngressClasses no running
// proxy serves.
func classFindings(s clusterState) (classView, []finding) {
	var out []finding
	cv := classView{
		classes:  map[string]*networkingv1.IngressClass{},
		ours:     map[string]bool{ingress.ControllerName: true},
		unserved: map[string]bool{},
	}
	for _, p := range s.proxies {
		cv.ours[p.controller] = true
	}
	for i := range s.classes {
		c := &s.classes[i]
		cv.classes[c.Name] = c
		if c.Annotations[annotationDefaultClass] == "true" {
			cv.defaults = append(cv.defaults, c.Name)
		}
	}
	sort.Strings(cv.defaults)
	if len(cv.defaults) > 1 {
		out = append(out, finding{severityWarning, "IngressClass " + strings.Join(cv.defaults, ", "), "more than one IngressClass is the default: new Ingresses without a class are rejected",
			"remove " + annotationDefaultClass + " from all but one"})
	}
	for _, c := range s.classes {
		if !cv.ours[c.Spec.Controller] || anyReady(s.proxies, c.Spec.Controller) {
			continue
		}
		cv.unserved[c.Name] = true
		out = append(out, finding{severityError, "IngressClass " + c.Name,
			fmt.Sprintf("no ready metalgate proxy serves its controller %s: its Ingresses get no traffic", c.Spec.Controller),
			"kubectl get pods -A -l app.kubernetes.io/component=proxy; deploy one with kubectl apply -k config/proxy (or config/proxy/namespaced)"})
	}
	return cv, out
}

// oneIngressFindings: the Ingress's class (none, missing, served by no ready proxy), who of
// several proxies publishes (arbitrationFindings), and addresses in its status that are no
// metalgate proxy's VIP.
func oneIngressFindings(s clusterState, cv classView, ing *networkingv1.Ingress, cands []controlplane.Candidate, vips map[string]bool) []finding {
	var out []finding
	obj := "Ingress " + ing.Namespace + "/" + ing.Name
	name, how := "", ""
	switch {
	case ing.Spec.IngressClassName != nil:
		name, how = *ing.Spec.IngressClassName, "spec.ingressClassName"
	case ing.Annotations[annotationIngressClass] != "":
		name, how = ing.Annotations[annotationIngressClass], "annotation "+annotationIngressClass
	case len(cv.defaults) == 1:
		name, how = cv.defaults[0], "the default IngressClass"
	default:
		return []finding{{severityWarning, obj, "no class and no default IngressClass: no IngressClass-based controller serves it",
			"set spec.ingressClassName (kubectl get ingressclass)"}}
	}
	class := cv.classes[name]
	if class == nil {
		return []finding{{severityError, obj, fmt.Sprintf("its class %q (%s) names no IngressClass: no controller serves it", name, how),
			"kubectl get ingressclass; set spec.ingressClassName to one of them"}}
	}
	controller := class.Spec.Controller
	if !cv.ours[controller] {
		return nil // another controller's Ingress
	}
	classless := ing.Spec.IngressClassName == nil && ing.Annotations[annotationIngressClass] == ""
	if !cv.unserved[name] && !anyServes(s.proxies, controller, ing.Namespace, classless) {
		msg := fmt.Sprintf("no ready metalgate proxy of class %s serves namespace %s", name, ing.Namespace)
		if classless {
			msg = fmt.Sprintf("it has no class and no ready metalgate proxy takes Ingresses without a class (--watch-ingress-without-class) in namespace %s", ing.Namespace)
		}
		out = append(out, finding{severityError, obj, msg,
			"the proxies' --watch-namespace flags: kubectl get pods -A -l app.kubernetes.io/component=proxy -o yaml"})
	}
	out = append(out, arbitrationFindings(ing, controller, classless, cands, vips)...)
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.IP != "" && !vips[canonicalIP(lb.IP)] {
			out = append(out, finding{severityError, obj,
				fmt.Sprintf("status.loadBalancer holds %s, which is the VIP of no metalgate proxy Service (a node IP written by another controller?)", lb.IP),
				fmt.Sprintf("kubectl get ingress -n %s %s -o yaml --show-managed-fields shows who wrote it", ing.Namespace, ing.Name)})
		}
	}
	return out
}

// anyServes reports whether a ready proxy serves controller's Ingresses in namespace (and,
// for an Ingress without a class, takes those).
func anyServes(proxies []proxyPod, controller, namespace string, classless bool) bool {
	for _, p := range proxies {
		if p.ready() && p.serves(controller, namespace) && (!classless || p.classless) {
			return true
		}
	}
	return false
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
// conflictWindow (another writer keeps replacing the address a proxy wrote), and each with a
// ForeignStatusWriter one (a proxy stopped writing it, and who the other writer is).
func conflictFindings(events []corev1.Event, now time.Time) []finding {
	type latest struct {
		at     time.Time
		count  int32
		msg    string
		reason string
	}
	by := map[string]*latest{}
	for _, ev := range events {
		if ev.Reason != contract.ReasonStatusConflict && ev.Reason != contract.ReasonForeignWriter ||
			ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "Ingress" {
			continue
		}
		at := eventTime(&ev)
		if now.Sub(at) > conflictWindow {
			continue
		}
		k := ev.Reason + " " + ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
		count := max(ev.Count, 1)
		if ev.Series != nil {
			count = max(count, ev.Series.Count)
		}
		l := by[k]
		if l == nil {
			l = &latest{reason: ev.Reason}
			by[k] = l
		}
		l.count += count
		if at.After(l.at) {
			l.at, l.msg = at, ev.Message
		}
	}
	var out []finding
	for k, l := range by {
		_, ing, _ := strings.Cut(k, " ")
		if l.reason == contract.ReasonForeignWriter {
			out = append(out, finding{severityError, "Ingress " + ing,
				fmt.Sprintf("a metalgate proxy stopped writing its status (%s, %s ago): %s", l.reason, now.Sub(l.at).Round(time.Second), l.msg),
				fmt.Sprintf("another controller claims its IngressClass: keep one, or say which writes the status with annotation %s (docs/proxy.md, \"Two proxies, one class\")", contract.AnnotationStatusOwner)})
			continue
		}
		out = append(out, finding{severityError, "Ingress " + ing,
			fmt.Sprintf("status conflict: %d %s event(s), last %s ago: %s", l.count, contract.ReasonStatusConflict, now.Sub(l.at).Round(time.Second), l.msg),
			"two controllers claim its IngressClass (another ingress controller, or two metalgate proxies watching one namespace); keep one"})
	}
	return out
}

// proxyCandidates reads every metalgate proxy announced on a Service, as the proxies read
// each other (proxy/controlplane), serving when its Service has a ready endpoint now. The
// findings are malformed announcements, and Services through which a running proxy
// publishes without announcing itself while another proxy serves its controller: the
// others cannot yield to it.
func proxyCandidates(s clusterState) ([]controlplane.Candidate, []finding) {
	slices := make([]*discoveryv1.EndpointSlice, len(s.slices))
	for i := range s.slices {
		slices[i] = &s.slices[i]
	}
	ready := controlplane.ReadyServices(slices)
	var cands []controlplane.Candidate
	var out []finding
	announced := map[string]bool{}
	for i := range s.services {
		svc := &s.services[i]
		c, ok, err := controlplane.CandidateFromService(svc)
		if err != nil {
			out = append(out, finding{severityWarning, "Service " + svc.Namespace + "/" + svc.Name, err.Error(),
				"the proxy's leader writes these annotations itself; remove hand-written ones (docs/proxy.md, \"Two proxies, one class\")"})
		}
		if !ok {
			continue
		}
		c.Serving = ready[c.Service]
		cands = append(cands, c)
		announced[c.Service.String()] = true
	}
	// Publish Service of each running proxy: --publish-service, else the one selecting it;
	// only existing ones (a missing one is the proxy's NoLoadBalancerAddress, not this).
	exists := map[string]bool{}
	for _, svc := range s.services {
		exists[svc.Namespace+"/"+svc.Name] = true
	}
	publishers := map[string][]proxyPod{}
	for _, p := range s.proxies {
		if !p.ready() {
			continue
		}
		if svc := publishService(p, s.services); exists[svc] {
			publishers[svc] = append(publishers[svc], p)
		}
	}
	for svc, pods := range publishers {
		if announced[svc] {
			continue
		}
		others := false
		for other, ps := range publishers {
			others = others || other != svc && ps[0].controller == pods[0].controller
		}
		for _, c := range cands {
			others = others || c.Service.String() != svc && c.Controller == pods[0].controller
		}
		if !others {
			continue
		}
		ns, _, _ := strings.Cut(svc, "/")
		out = append(out, finding{severityWarning, "Service " + svc,
			fmt.Sprintf("metalgate proxy %s publishes this Service's address but the Service does not announce it (label %s): the other metalgate proxies of controller %s cannot yield to it, and the status of Ingresses both serve may change back and forth",
				pods[0], contract.LabelProxy, pods[0].controller),
			fmt.Sprintf("its leader writes the announcement and needs patch on this Service (config/proxy grants it for metalgate-proxy only); kubectl get events -n %s --field-selector reason=%s", ns, contract.ReasonAnnounceFailed)})
	}
	return cands, out
}

// publishService is the namespace/name of the Service whose address the proxy publishes:
// --publish-service, else the Service in its namespace whose selector matches its pod (type
// LoadBalancer first, then by name), as the proxy finds it.
func publishService(p proxyPod, services []corev1.Service) string {
	if p.publish != "" {
		return p.publish
	}
	var best *corev1.Service
	for i := range services {
		s := &services[i]
		if s.Namespace != p.pod.Namespace || len(s.Spec.Selector) == 0 ||
			!labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.pod.Labels)) {
			continue
		}
		lb := s.Spec.Type == corev1.ServiceTypeLoadBalancer
		if best == nil || lb && best.Spec.Type != corev1.ServiceTypeLoadBalancer ||
			lb == (best.Spec.Type == corev1.ServiceTypeLoadBalancer) && s.Name < best.Name {
			best = s
		}
	}
	if best == nil {
		return ""
	}
	return best.Namespace + "/" + best.Name
}

// arbitrationFindings: when more than one metalgate proxy serves the Ingress, which one
// publishes its status by the proxies' rule and why each other one yields; and a status that
// holds another proxy's VIP than the winner's (a hand-over in progress, or a winner that
// cannot write).
func arbitrationFindings(ing *networkingv1.Ingress, controller string, classless bool, cands []controlplane.Candidate, vips map[string]bool) []finding {
	obj := "Ingress " + ing.Namespace + "/" + ing.Name
	if owner := ing.Annotations[contract.AnnotationStatusOwner]; owner != "" {
		return nil // the user chose the writer
	}
	d := controlplane.Arbitrate(cands, controlplane.Subject{Namespace: ing.Namespace, Controller: controller, Classless: classless})
	if len(d.Serving) < 2 || d.Winner == nil {
		return nil
	}
	w := *d.Winner
	var yields []string
	for _, c := range d.Serving[1:] {
		yields = append(yields, fmt.Sprintf("%s yields: %s", c, controlplane.Why(w, c, ing.Namespace)))
	}
	out := []finding{{severityWarning, obj,
		fmt.Sprintf("%d metalgate proxies serve it: %s publishes its status (%s); %s", len(d.Serving), w, strings.Join(w.Addresses, ","), strings.Join(yields, "; ")),
		fmt.Sprintf("a cluster-wide proxy as a fallback is fine: the status stays put and the others still route it (docs/proxy.md, \"Two proxies, one class\"); otherwise narrow their --watch-namespace or remove them, or pick the writer with annotation %s", contract.AnnotationStatusOwner)}}
	var have []string
	others := true
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		a := lb.IP
		if a == "" {
			a = lb.Hostname
		} else {
			others = others && vips[canonicalIP(a)]
		}
		have = append(have, a)
	}
	sort.Strings(have)
	if len(have) > 0 && others && strings.Join(have, ",") != strings.Join(w.Addresses, ",") {
		out = append(out, finding{severityWarning, obj,
			fmt.Sprintf("status.loadBalancer holds %s, but by the arbitration rule %s publishes it (%s)", strings.Join(have, ","), w, strings.Join(w.Addresses, ",")),
			fmt.Sprintf("a hand-over in progress, or %s cannot write it: kubectl get events -n %s --field-selector involvedObject.name=%s", w, ing.Namespace, ing.Name)})
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
