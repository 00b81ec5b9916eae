package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// Reconciler keeps, for each Gateway of an accepted metalgate GatewayClass, its LoadBalancer
// Service in Namespace and the Gateway's status; it deletes the Services of Gateways that are
// gone or no longer metalgate's, and never writes a Gateway of another controller's class.
type Reconciler struct {
	Client client.Client
	// APIReader reads the allocator's Events, which the manager's cache does not hold.
	APIReader client.Reader
	// Namespace holds the Services and proxy Deployments.
	Namespace string
	// Proxy describes the proxy Deployments; none are made without Proxy.Image.
	Proxy ProxyOptions
	// Deployments reads the proxy Deployments (a cache of Namespace only); required with
	// Proxy.Image.
	Deployments client.Reader
	// GRPCRoutes says the API server serves GRPCRoute: its routes are read and their status
	// written. False (Setup's choice when the CRD is not installed): HTTPRoutes only.
	GRPCRoutes bool
	// TLSRoutes likewise for TLSRoute (standard channel since v1.5).
	TLSRoutes bool
	// ListenerSets likewise for ListenerSet (standard channel since v1.5): they are read, their
	// listeners served and their status written (listenerset.go).
	ListenerSets bool
	// BackendTLSPolicies says the API server serves BackendTLSPolicy v1: policies are read
	// and their status written (backendtls.go).
	BackendTLSPolicies bool

	// asked holds, per Gateway, when its Service last asked the allocator for other static
	// addresses and the answer has not been seen yet (see staticAnswerWait). The zero value
	// is ready to use.
	asked askedAt
}

// askedAt records when each Gateway's static address request changed. Reconciles of one
// Gateway never run at once, but of several do.
type askedAt struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

func (a *askedAt) set(k types.NamespacedName, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[types.NamespacedName]time.Time{}
	}
	a.at[k] = t
}

func (a *askedAt) get(k types.NamespacedName) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[k]
	return t, ok
}

func (a *askedAt) forget(k types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.at, k)
}

// staticAnswerWait bounds how long the status of a new generation waits for the allocator's
// answer to a changed static address request: the assignment (a Service status update) comes
// within milliseconds; a refusal comes as an Event, which triggers nothing, so it is looked for
// every staticAnswerPoll until this much time has passed.
const (
	staticAnswerWait = 3 * time.Second
	staticAnswerPoll = 500 * time.Millisecond
)

var _ reconcile.Reconciler = &Reconciler{}

// pendingRetry is how soon a Gateway without an address, or with an HTTPS listener without a
// usable certificate, is looked at again: the allocator's reason comes as an Event and
// Secrets are read by name, not watched, so neither triggers a reconcile.
const pendingRetry = 5 * time.Second

// Reconcile brings one Gateway's Service and status in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var gw gwv1.Gateway
	if err := r.Client.Get(ctx, req.NamespacedName, &gw); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.cleanup(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("get Gateway: %w", err)
	}
	var gc gwv1.GatewayClass
	if err := r.Client.Get(ctx, types.NamespacedName{Name: string(gw.Spec.GatewayClassName)}, &gc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.cleanup(ctx, req.NamespacedName) // not known to be ours
		}
		return ctrl.Result{}, fmt.Errorf("get GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	if gc.Spec.ControllerName != ControllerName {
		return ctrl.Result{}, r.cleanup(ctx, req.NamespacedName)
	}
	if !gw.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.cleanup(ctx, req.NamespacedName) // going: nothing attaches to it any more
	}
	grants, err := r.referenceGrants(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	sets, nss, err := r.listenerSetInput(ctx) // listenerset.go
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := PlanGateway(&gw, grants)
	if ca := ClassAccepted(&gc); ca.Status != metav1.ConditionTrue {
		plan.Accepted = cond(gwv1.GatewayConditionAccepted, false, gwv1.GatewayReasonInvalid,
			fmt.Sprintf("GatewayClass %s is not accepted: %s", gc.Name, ca.Message))
	}
	verdicts := gatewayapi.ListenerSets(&gw, sets, nss, grants)
	addListenerSetPorts(&plan, verdicts)
	var obs Observed
	if plan.WantsService() {
		var err error
		if obs, err = r.ensureService(ctx, &gw, plan); err != nil {
			return ctrl.Result{}, err
		}
		if r.Proxy.Image != "" {
			if obs.ProxyProblem, err = r.ensureDeployment(ctx, &gw, &gc, plan); err != nil {
				return ctrl.Result{}, err
			}
		}
	} else if err := r.cleanup(ctx, req.NamespacedName); err != nil {
		return ctrl.Result{}, err
	}
	var routes *table.GatewayStatus
	var candidates []client.Object // HTTPRoutes, GRPCRoutes and TLSRoutes
	if plan.Accepted.Status == metav1.ConditionTrue {
		var err error
		if routes, candidates, verdicts, err = r.routeStatus(ctx, &gw, sets); err != nil {
			return ctrl.Result{}, err
		}
		obs.AttachedRoutes = routes.AttachedRoutes
		obs.CertificateProblems = routes.CertificateProblems
		obs.FrontendProblems = routes.FrontendProblems
		obs.BackendClientCertificate = routes.BackendClientCertificate
	} else if err := r.forgetRoutes(ctx, req.NamespacedName); err != nil {
		return ctrl.Result{}, err // a Gateway that is not accepted has no routes
	}
	if err := r.writeRouteStatuses(ctx, newParentOwner(req.NamespacedName, sets), routes, candidates); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writePolicyStatuses(ctx, req.NamespacedName, routes); err != nil {
		return ctrl.Result{}, err
	}
	if r.awaitingAnswer(req.NamespacedName, plan, obs, time.Now()) {
		return ctrl.Result{RequeueAfter: staticAnswerPoll}, nil
	}
	st := Status(&gw, plan, obs, gw.Status, metav1.Now())
	if r.ListenerSets {
		st.AttachedListenerSets = ptr(AttachedListenerSets(verdicts))
		programmed := meta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionProgrammed))
		if err := r.writeListenerSetStatuses(ctx, verdicts, plan.Accepted.Status == metav1.ConditionTrue, *programmed); err != nil {
			return ctrl.Result{}, err
		}
	}
	var res ctrl.Result
	if plan.WantsService() && len(st.Addresses) == 0 || len(obs.CertificateProblems) > 0 || len(obs.FrontendProblems) > 0 || obs.BackendClientCertificate != nil {
		// Neither the allocator's Events nor the Secrets and CA ConfigMaps (read by name, not
		// watched) trigger a reconcile: one created or fixed later is seen at the next look.
		res.RequeueAfter = pendingRetry
	}
	// A proxy that becomes available is seen by the Deployment watch; no retry for it.
	if equality.Semantic.DeepEqual(st, gw.Status) {
		return res, nil
	}
	gw.Status = st
	if err := r.Client.Status().Update(ctx, &gw); err != nil {
		return ctrl.Result{}, fmt.Errorf("update Gateway status: %w", err)
	}
	return res, nil
}

// awaitingAnswer says whether the status of gw's generation should wait for the allocator:
// its static addresses were just asked for (obs.AddressRequested now, or recorded less than
// staticAnswerWait ago) and the Service does not hold them yet. Otherwise the status would say
// "not assigned" for an address assigned a moment later, and a reader that looks once after
// the conditions reach the generation (the conformance test GatewayStaticAddresses does) would
// take that as the answer. Our own update of the Service brings the Gateway back here at once,
// before the allocator has answered; the assignment brings it back again.
func (r *Reconciler) awaitingAnswer(gw types.NamespacedName, plan Plan, obs Observed, now time.Time) bool {
	if obs.AddressRequested {
		r.asked.set(gw, now)
	}
	at, ok := r.asked.get(gw)
	if !ok {
		return false
	}
	if !plan.WantsService() || len(plan.StaticIPs) == 0 || matches(plan.StaticIPs, obs.VIPs) || now.Sub(at) >= staticAnswerWait {
		r.asked.forget(gw)
		return false
	}
	return true
}

// DesiredService is the LoadBalancer Service that gives gw its address: in namespace, named
// by ServiceName, selecting the Gateway's proxy pods, one TCP port per listener port; the
// requested addresses and pool go into the annotations the allocator reads. No node ports:
// the VIP is announced by the speakers, nothing reaches it through a node's port.
func DesiredService(gw *gwv1.Gateway, plan Plan, namespace string) *corev1.Service {
	ann := map[string]string{contract.AnnotationGateway: gw.Namespace + "/" + gw.Name}
	if len(plan.StaticIPs) > 0 {
		ips := make([]string, len(plan.StaticIPs))
		for i, ip := range plan.StaticIPs {
			ips[i] = ip.String()
		}
		ann[contract.AnnotationLoadBalancerIPs] = strings.Join(ips, ",")
	}
	if pool := gw.Annotations[contract.AnnotationAddressPool]; pool != "" {
		ann[contract.AnnotationAddressPool] = pool
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServiceName(gw.Namespace, gw.Name),
			Labels: Labels(gw.Namespace, gw.Name), Annotations: ann},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			Selector:                      Labels(gw.Namespace, gw.Name),
			Ports:                         plan.Ports,
			AllocateLoadBalancerNodePorts: ptr(false),
		},
	}
	if len(plan.StaticIPs) == 2 {
		svc.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
	}
	return svc
}

// managedAnnotations are the annotations this controller sets or removes on its Services.
var managedAnnotations = []string{contract.AnnotationGateway, contract.AnnotationLoadBalancerIPs, contract.AnnotationAddressPool}

// ensureService creates or updates gw's Service and reports what it sees of it.
func (r *Reconciler) ensureService(ctx context.Context, gw *gwv1.Gateway, plan Plan) (Observed, error) {
	want := DesiredService(gw, plan, r.Namespace)
	obs := Observed{Service: want.Namespace + "/" + want.Name}
	var have corev1.Service
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return obs, fmt.Errorf("create Service %s: %w", obs.Service, err)
		}
		ctrl.LoggerFrom(ctx).Info("created Service for Gateway", "service", obs.Service)
		obs.AddressRequested = true
		return obs, nil
	case err != nil:
		return obs, fmt.Errorf("get Service %s: %w", obs.Service, err)
	}
	if owner := have.Annotations[contract.AnnotationGateway]; owner != want.Annotations[contract.AnnotationGateway] {
		obs.Problem = fmt.Sprintf("Service %s exists and belongs to %q, not to this Gateway", obs.Service, owner)
		return obs, nil
	}
	updated := have.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		updated.Labels[k] = v
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for _, k := range managedAnnotations {
		if v, ok := want.Annotations[k]; ok {
			updated.Annotations[k] = v
		} else {
			delete(updated.Annotations, k)
		}
	}
	updated.Spec.Selector = want.Spec.Selector
	updated.Spec.Ports = want.Spec.Ports
	if !equality.Semantic.DeepEqual(updated.ObjectMeta, have.ObjectMeta) || !equality.Semantic.DeepEqual(updated.Spec, have.Spec) {
		if err := r.Client.Update(ctx, updated); err != nil {
			return obs, fmt.Errorf("update Service %s: %w", obs.Service, err)
		}
		for _, k := range []string{contract.AnnotationLoadBalancerIPs, contract.AnnotationAddressPool} {
			obs.AddressRequested = obs.AddressRequested || updated.Annotations[k] != have.Annotations[k]
		}
	}
	for _, in := range have.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			obs.VIPs = append(obs.VIPs, ip)
		}
	}
	if len(obs.VIPs) == 0 {
		problem, err := r.lastWarning(ctx, &have)
		if err != nil {
			return obs, err
		}
		obs.Problem = problem
	}
	return obs, nil
}

// lastWarning is the note of the newest Warning Event on svc (the allocator explains there
// why it gave no address), or "".
func (r *Reconciler) lastWarning(ctx context.Context, svc *corev1.Service) (string, error) {
	var list corev1.EventList
	sel := fields.SelectorFromSet(fields.Set{"involvedObject.kind": "Service", "involvedObject.name": svc.Name,
		"involvedObject.uid": string(svc.UID), "type": corev1.EventTypeWarning})
	if err := r.APIReader.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return "", fmt.Errorf("list Events of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if len(list.Items) == 0 {
		return "", nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return eventTime(&list.Items[i]).Before(eventTime(&list.Items[j])) })
	return list.Items[len(list.Items)-1].Message, nil
}

func eventTime(e *corev1.Event) time.Time {
	var series time.Time
	if e.Series != nil {
		series = e.Series.LastObservedTime.Time
	}
	for _, t := range []time.Time{series, e.EventTime.Time, e.LastTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// cleanup deletes the Services (and proxy Deployments) made for Gateway key, found by their
// annotation, and metalgate's parent statuses for it on HTTPRoutes, GRPCRoutes and TLSRoutes.
func (r *Reconciler) cleanup(ctx context.Context, key types.NamespacedName) error {
	r.asked.forget(key)
	if err := r.forgetRoutes(ctx, key); err != nil {
		return err
	}
	if err := r.writePolicyStatuses(ctx, key, nil); err != nil {
		return err
	}
	if r.Proxy.Image != "" {
		if err := r.cleanupDeployments(ctx, key); err != nil {
			return err
		}
	}
	var list corev1.ServiceList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{contract.LabelGatewayNamespace: key.Namespace}); err != nil {
		return fmt.Errorf("list Services of Gateway %s: %w", key, err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Annotations[contract.AnnotationGateway] != key.String() {
			continue
		}
		err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Service %s/%s of Gateway %s: %w", s.Namespace, s.Name, key, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted Service of Gateway", "service", s.Namespace+"/"+s.Name)
	}
	return nil
}
