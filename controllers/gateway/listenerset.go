package gateway

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// ListenerSets: which ListenerSets a Gateway admits, how their listeners merge with its own
// and conflict, is gatewayapi.ListenerSets' to judge (the proxy serves the same verdict);
// this file reads them, adds the ports of their served listeners to the Gateway's Service
// and proxy, and writes their status and the Gateway's status.attachedListenerSets.

// listenerSetInput lists the ListenerSets (when the API server serves them) and the
// Namespaces their admission by selector reads.
func (r *Reconciler) listenerSetInput(ctx context.Context) ([]*gwv1.ListenerSet, []*corev1.Namespace, error) {
	if !r.ListenerSets {
		return nil, nil, nil
	}
	var list gwv1.ListenerSetList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list ListenerSets: %w", err)
	}
	sets := make([]*gwv1.ListenerSet, 0, len(list.Items))
	for i := range list.Items {
		sets = append(sets, &list.Items[i])
	}
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list Namespaces: %w", err)
	}
	out := make([]*corev1.Namespace, 0, len(nss.Items))
	for i := range nss.Items {
		out = append(out, &nss.Items[i])
	}
	return sets, out, nil
}

// addListenerSetPorts adds to plan's Service ports those of the served listeners of the
// admitted ListenerSets (a Gateway that is not accepted gets none).
func addListenerSetPorts(p *Plan, vs []gatewayapi.ListenerSetVerdict) {
	if p.Accepted.Status != metav1.ConditionTrue {
		return
	}
	have := map[int32]bool{}
	for _, sp := range p.Ports {
		have[sp.Port] = true
	}
	for _, port := range gatewayapi.ListenerSetPorts(vs) {
		if have[int32(port)] {
			continue
		}
		have[int32(port)] = true
		p.Ports = append(p.Ports, corev1.ServicePort{Name: fmt.Sprintf("port-%d", port), Protocol: corev1.ProtocolTCP,
			Port: int32(port), TargetPort: intstr.FromInt32(int32(port))})
	}
	sort.Slice(p.Ports, func(i, j int) bool { return p.Ports[i].Port < p.Ports[j].Port })
}

// listenerSetSecrets reads the Secrets the HTTPS listeners of the admitted ListenerSets name
// (each as a ListenerSet's certificateRef, ReferenceGrants from ListenerSets), as
// certificateSecrets does for the Gateway's; have are those already read.
func (r *Reconciler) listenerSetSecrets(ctx context.Context, vs []gatewayapi.ListenerSetVerdict, grants []*gwv1beta1.ReferenceGrant, have []*corev1.Secret) ([]*corev1.Secret, error) {
	seen := map[types.NamespacedName]bool{}
	for _, s := range have {
		seen[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = true
	}
	out := have
	for _, v := range vs {
		for j, e := range v.Set.Spec.Listeners {
			if !v.Admitted() || !v.OK[j] || e.Protocol != gwv1.HTTPSProtocolType || e.TLS == nil {
				continue
			}
			for i, ref := range e.TLS.CertificateRefs {
				name, reason, _ := gatewayapi.ListenerSetCertificateRef(v.Set.Namespace, i, ref, grants)
				if reason != "" || seen[name] {
					continue
				}
				seen[name] = true
				sec, err := r.certificateSecret(ctx, name)
				if err != nil {
					return nil, fmt.Errorf("%w (certificateRef of listener %s of ListenerSet %s/%s)", err, e.Name, v.Set.Namespace, v.Set.Name)
				}
				if sec != nil {
					out = append(out, sec)
				}
			}
		}
	}
	return out, nil
}

// AttachedListenerSets is the Gateway's status.attachedListenerSets: the ListenerSets it
// admits that have a listener served (Accepted=True).
func AttachedListenerSets(vs []gatewayapi.ListenerSetVerdict) int32 {
	var n int32
	for _, v := range vs {
		if v.Admitted() && v.Served() {
			n++
		}
	}
	return n
}

// ListenerSetStatus is the status of the ListenerSet of verdict v, given whether its Gateway
// is accepted and programmed (gwProgrammed: the Gateway's Programmed condition), keeping the
// transition times of the conditions in prev that did not change. Cases:
//   - Gateway not accepted: Accepted=False ParentNotAccepted, Programmed=False;
//   - not admitted by spec.allowedListeners: Accepted=False and Programmed=False NotAllowed;
//   - no listener served: Accepted=False and Programmed=False ListenersNotValid;
//   - some not served: Accepted=True ListenersNotValid; all: Accepted=True Accepted;
//   - Programmed=True once the Gateway is, else False (Pending, the Gateway's reason).
//
// Each listener: its verdict's conditions, Programmed=True when served, has a certificate
// and the Gateway is programmed; a conflicted listener's Programmed has its conflict reason.
func ListenerSetStatus(v gatewayapi.ListenerSetVerdict, gwAccepted bool, gwProgrammed metav1.Condition, prev gwv1.ListenerSetStatus, now metav1.Time) gwv1.ListenerSetStatus {
	gen := v.Set.Generation
	st := gwv1.ListenerSetStatus{Conditions: slices.Clone(prev.Conditions)}
	set := func(c metav1.Condition) { setCondition(&st.Conditions, c, gen, now) }
	gwName := fmt.Sprintf("Gateway %s/%s", v.Set.Namespace, v.Set.Spec.ParentRef.Name)
	if v.Set.Spec.ParentRef.Namespace != nil {
		gwName = fmt.Sprintf("Gateway %s/%s", *v.Set.Spec.ParentRef.Namespace, v.Set.Spec.ParentRef.Name)
	}
	switch {
	case !gwAccepted:
		set(cond(gwv1.ListenerSetConditionAccepted, false, gwv1.ListenerSetReasonParentNotAccepted, gwName+" is not accepted"))
		set(cond(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonParentNotAccepted, gwName+" is not accepted"))
		return st
	case !v.Admitted():
		set(cond(gwv1.ListenerSetConditionAccepted, false, gwv1.ListenerSetReasonNotAllowed, v.NotAllowed))
		set(cond(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonNotAllowed, v.NotAllowed))
		return st
	}
	var bad []string
	for j, ok := range v.OK {
		if !ok {
			bad = append(bad, string(v.Set.Spec.Listeners[j].Name))
		}
	}
	programmed := cond(gwv1.ListenerSetConditionProgrammed, true, gwv1.ListenerSetReasonProgrammed, "listeners programmed on "+gwName)
	switch {
	case !v.Served():
		msg := fmt.Sprintf("no listener can be served (see their conditions): %v", bad)
		set(cond(gwv1.ListenerSetConditionAccepted, false, gwv1.ListenerSetReasonListenersNotValid, msg))
		programmed = cond(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonListenersNotValid, msg)
	case len(bad) > 0:
		set(cond(gwv1.ListenerSetConditionAccepted, true, gwv1.ListenerSetReasonListenersNotValid,
			fmt.Sprintf("listeners not valid (see their conditions): %v", bad)))
	default:
		set(cond(gwv1.ListenerSetConditionAccepted, true, gwv1.ListenerSetReasonAccepted, "ListenerSet accepted by "+gwName))
	}
	if v.Served() && gwProgrammed.Status != metav1.ConditionTrue {
		programmed = cond(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonPending, "waiting for "+gwName+": "+gwProgrammed.Message)
	}
	set(programmed)
	for j, l := range v.Listeners {
		ls := gwv1.ListenerEntryStatus{Name: l.Name, SupportedKinds: l.SupportedKinds, AttachedRoutes: v.AttachedRoutes[string(l.Name)]}
		if k := slices.IndexFunc(prev.Listeners, func(p gwv1.ListenerEntryStatus) bool { return p.Name == l.Name }); k >= 0 {
			ls.Conditions = slices.Clone(prev.Listeners[k].Conditions)
		}
		var accepted metav1.Condition
		for _, c := range l.Conditions {
			setCondition(&ls.Conditions, c, gen, now)
			if c.Type == string(gwv1.ListenerConditionAccepted) {
				accepted = c
			}
		}
		certProblem, noCert := v.CertificateProblems[string(l.Name)]
		lp := cond(gwv1.ListenerConditionProgrammed, true, gwv1.ListenerReasonProgrammed, "listener programmed")
		switch {
		case !v.OK[j] && accepted.Status == metav1.ConditionFalse:
			lp = cond(gwv1.ListenerConditionProgrammed, false, accepted.Reason, accepted.Message)
		case !v.OK[j]:
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonInvalid, "listener not valid (see its conditions)")
		case noCert:
			setCondition(&ls.Conditions, cond(gwv1.ListenerConditionResolvedRefs, false, gwv1.ListenerReasonInvalidCertificateRef,
				"no usable certificate: "+certProblem), gen, now)
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonInvalid, "no usable certificate: "+certProblem)
		case gwProgrammed.Status != metav1.ConditionTrue:
			lp = cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonPending, "waiting for "+gwName+": "+gwProgrammed.Message)
		}
		setCondition(&ls.Conditions, lp, gen, now)
		st.Listeners = append(st.Listeners, ls)
	}
	return st
}

// writeListenerSetStatuses writes the status of each ListenerSet of vs that changed.
func (r *Reconciler) writeListenerSetStatuses(ctx context.Context, vs []gatewayapi.ListenerSetVerdict, gwAccepted bool, gwProgrammed metav1.Condition) error {
	now := metav1.Now()
	for _, v := range vs {
		st := ListenerSetStatus(v, gwAccepted, gwProgrammed, v.Set.Status, now)
		if equality.Semantic.DeepEqual(st, v.Set.Status) {
			continue
		}
		updated := v.Set.DeepCopy()
		updated.Status = st
		if err := r.Client.Status().Update(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("update status of ListenerSet %s/%s: %w", v.Set.Namespace, v.Set.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("wrote ListenerSet status", "listenerSet", v.Set.Namespace+"/"+v.Set.Name)
	}
	return nil
}

// listenerSetGateway maps a ListenerSet to the Gateway its parentRef names.
func listenerSetGateway(_ context.Context, o client.Object) []ctrl.Request {
	ls, ok := o.(*gwv1.ListenerSet)
	if !ok {
		return nil
	}
	ref := ls.Spec.ParentRef
	key := types.NamespacedName{Namespace: ls.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		key.Namespace = string(*ref.Namespace)
	}
	return []ctrl.Request{{NamespacedName: key}}
}

// routeListenerSetGateways are the Gateways of the ListenerSets a route names in its
// parentRefs, or holds a parent status of metalgate's for, as the cache c knows them.
func routeListenerSetGateways(ctx context.Context, c client.Reader, o client.Object) []ctrl.Request {
	p, ok := partsOf(o)
	if !ok {
		return nil
	}
	var out []ctrl.Request
	add := func(ref gwv1.ParentReference) {
		key, ok := gatewayapi.IsListenerSetRef(ref, o.GetNamespace())
		if !ok {
			return
		}
		var ls gwv1.ListenerSet
		if err := c.Get(ctx, key, &ls); err != nil {
			return
		}
		out = appendNew(out, listenerSetGateway(ctx, &ls)...)
	}
	for _, ref := range p.spec.ParentRefs {
		add(ref)
	}
	for _, ps := range p.status.Parents {
		if ps.ControllerName == ControllerName {
			add(ps.ParentRef)
		}
	}
	return out
}
