package gateway

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// BackendTLSPolicy status: the translator (proxy/gatewayapi, backendtls.go) decides, per
// Gateway, the Accepted and ResolvedRefs conditions of every policy that targets one of the
// Gateway's backends; the controller writes them as the policy's status.ancestors entry for
// that Gateway (controllerName metalgate's), leaving other Gateways' and controllers' entries
// alone, and only when they changed.

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies/status,verbs=get;update;patch
// The policies' CA ConfigMaps: watched by metadata only (a change triggers a reconcile), each
// one a policy names read by name:
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// maxAncestors is the API's bound on status.ancestors.
const maxAncestors = 16

// watchBackendTLS adds to b the watches that make a policy's change, or a change of a
// ConfigMap a policy names, reconcile the Gateways it concerns.
func watchBackendTLS(b *builder.Builder, c client.Reader, parents handler.MapFunc, grpc bool) *builder.Builder {
	return b.
		Watches(&gwv1.BackendTLSPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			p, ok := o.(*gwv1.BackendTLSPolicy)
			if !ok {
				return nil
			}
			return policyGateways(ctx, c, parents, grpc, p)
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})). // not on status writes
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			var list gwv1.BackendTLSPolicyList
			if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
				return nil
			}
			var out []ctrl.Request
			for i := range list.Items {
				p := &list.Items[i]
				if slices.ContainsFunc(p.Spec.Validation.CACertificateRefs, func(r gwv1.LocalObjectReference) bool {
					return r.Group == "" && r.Kind == "ConfigMap" && string(r.Name) == o.GetName()
				}) {
					out = appendNew(out, policyGateways(ctx, c, parents, grpc, p)...)
				}
			}
			return out
		}), builder.OnlyMetadata)
}

// policyGateways are the Gateways of the routes whose backends policy p targets, and those
// its status names (an entry that must go when the policy no longer concerns them).
func policyGateways(ctx context.Context, c client.Reader, parents handler.MapFunc, grpc bool, p *gwv1.BackendTLSPolicy) []ctrl.Request {
	var out []ctrl.Request
	for _, ref := range p.Spec.TargetRefs {
		if ref.Group != "" || ref.Kind != "Service" {
			continue
		}
		svc := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: string(ref.Name)}}
		// TLSRoutes pass TLS through: a BackendTLSPolicy does not concern their Gateways.
		out = appendNew(out, gatewaysOfBackend(ctx, c, parents, grpc, false, svc)...)
	}
	for _, a := range p.Status.Ancestors {
		if a.ControllerName != ControllerName {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: string(a.AncestorRef.Name)}
		if a.AncestorRef.Namespace != nil {
			key.Namespace = string(*a.AncestorRef.Namespace)
		}
		out = appendNew(out, ctrl.Request{NamespacedName: key})
	}
	return out
}

// backendTLSInput adds to in the Secret of the Gateway's client certificate for backends,
// every BackendTLSPolicy and the ConfigMaps they name (each read by name from the API
// server, in the policy's namespace: a policy can name no other).
func (r *Reconciler) backendTLSInput(ctx context.Context, in *gatewayapi.Input) error {
	sec, err := r.clientCertificateSecret(ctx, in)
	if err != nil {
		return err
	}
	if sec != nil {
		in.Secrets = append(in.Secrets, sec)
	}
	if !r.BackendTLSPolicies {
		return nil
	}
	var list gwv1.BackendTLSPolicyList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list BackendTLSPolicies: %w", err)
	}
	seen := map[types.NamespacedName]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		in.BackendTLSPolicies = append(in.BackendTLSPolicies, p)
		for _, ref := range p.Spec.Validation.CACertificateRefs {
			name := types.NamespacedName{Namespace: p.Namespace, Name: string(ref.Name)}
			if ref.Group != "" || ref.Kind != "ConfigMap" || seen[name] {
				continue
			}
			seen[name] = true
			var cm corev1.ConfigMap
			err := r.APIReader.Get(ctx, name, &cm)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return fmt.Errorf("get ConfigMap %s (caCertificateRef of BackendTLSPolicy %s/%s): %w", name, p.Namespace, p.Name, err)
			}
			in.ConfigMaps = append(in.ConfigMaps, &cm)
		}
	}
	return nil
}

// clientCertificateCondition sets, in conds, the Gateway's ResolvedRefs condition for its
// spec.tls.backend.clientCertificateRef (True, or False with InvalidClientCertificateRef or
// RefNotPermitted), and removes it when none is set or the Gateway is not accepted.
func clientCertificateCondition(gw *gwv1.Gateway, plan Plan, obs Observed, conds *[]metav1.Condition, now metav1.Time) {
	_, set, _, _ := gatewayapi.ClientCertificateRef(gw, nil)
	if !set || plan.Accepted.Status != metav1.ConditionTrue {
		meta.RemoveStatusCondition(conds, string(gwv1.GatewayConditionResolvedRefs))
		return
	}
	c := cond(gwv1.GatewayConditionResolvedRefs, true, gwv1.GatewayReasonResolvedRefs, "spec.tls.backend.clientCertificateRef resolved")
	if p := obs.BackendClientCertificate; p != nil {
		c = cond(gwv1.GatewayConditionResolvedRefs, false, gwv1.GatewayConditionReason(p.Reason), p.Message)
	}
	setCondition(conds, c, gw.Generation, now)
}

// clientCertificateSecret reads the Secret of gw's spec.tls.backend.clientCertificateRef
// by name, when the Gateway may name it (its namespace, or a ReferenceGrant); nil when there
// is none to read or it does not exist.
func (r *Reconciler) clientCertificateSecret(ctx context.Context, in *gatewayapi.Input) (*corev1.Secret, error) {
	name, set, reason, _ := gatewayapi.ClientCertificateRef(in.Gateway, in.ReferenceGrants)
	if !set || reason != "" {
		return nil, nil
	}
	var sec corev1.Secret
	switch err := r.APIReader.Get(ctx, name, &sec); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Secret %s (spec.tls.backend.clientCertificateRef): %w", name, err)
	}
	return &sec, nil
}

// writePolicyStatuses writes, on every BackendTLSPolicy that st names or whose status holds
// metalgate's entry for Gateway gw, the ancestor entry st computed for gw (none when st does
// not name it, or st is nil: the Gateway is gone or not accepted).
func (r *Reconciler) writePolicyStatuses(ctx context.Context, gw types.NamespacedName, st *table.GatewayStatus) error {
	if !r.BackendTLSPolicies {
		return nil
	}
	want := map[types.NamespacedName][]metav1.Condition{}
	if st != nil {
		for _, ps := range st.BackendTLSPolicies {
			want[ps.Policy] = ps.Conditions
		}
	}
	var list gwv1.BackendTLSPolicyList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list BackendTLSPolicies: %w", err)
	}
	now := metav1.Now()
	for i := range list.Items {
		p := &list.Items[i]
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		conds, named := want[key]
		if !named && !slices.ContainsFunc(p.Status.Ancestors, func(a gwv1.PolicyAncestorStatus) bool { return isOurAncestor(a, gw) }) {
			continue
		}
		next := MergePolicyAncestors(p.Status.Ancestors, gw, conds, named, now)
		if equality.Semantic.DeepEqual(next, p.Status.Ancestors) {
			continue
		}
		p.Status.Ancestors = next
		if err := r.Client.Status().Update(ctx, p); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("update status of BackendTLSPolicy %s: %w", key, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("wrote BackendTLSPolicy status", "policy", key.String(), "named", named)
	}
	return nil
}

// isOurAncestor says whether a is metalgate's ancestor entry for Gateway gw.
func isOurAncestor(a gwv1.PolicyAncestorStatus, gw types.NamespacedName) bool {
	return a.ControllerName == ControllerName && refNames(a.AncestorRef, gw, gw.Namespace)
}

// MergePolicyAncestors is a policy's status.ancestors with metalgate's entry for Gateway gw
// replaced in place by one holding conds (added at the end when there was none; removed when
// !named), every other entry kept in place. Keeping the order matters: two Gateways writing
// their entries into one policy would otherwise each move its own to the end, and rewrite the
// policy after each other without end. A condition that did not change keeps its
// lastTransitionTime. The list stays within the API's 16 entries: a new entry that does not
// fit is not added.
func MergePolicyAncestors(prev []gwv1.PolicyAncestorStatus, gw types.NamespacedName, conds []metav1.Condition, named bool, now metav1.Time) []gwv1.PolicyAncestorStatus {
	out := []gwv1.PolicyAncestorStatus{}
	at := -1 // where our entry was
	var before []metav1.Condition
	for _, a := range prev {
		if isOurAncestor(a, gw) {
			if at < 0 {
				at, before = len(out), a.Conditions
			}
			continue
		}
		out = append(out, *a.DeepCopy())
	}
	if !named || at < 0 && len(out) >= maxAncestors {
		return out
	}
	next := slices.Clone(before)
	for _, c := range conds {
		c.LastTransitionTime = now
		meta.SetStatusCondition(&next, c)
	}
	next = slices.DeleteFunc(next, func(c metav1.Condition) bool {
		return !slices.ContainsFunc(conds, func(n metav1.Condition) bool { return n.Type == c.Type })
	})
	group, kind, ns := gwv1.Group(gwv1.GroupName), gwv1.Kind("Gateway"), gwv1.Namespace(gw.Namespace)
	ours := gwv1.PolicyAncestorStatus{
		AncestorRef:    gwv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwv1.ObjectName(gw.Name)},
		ControllerName: ControllerName,
		Conditions:     next,
	}
	if at < 0 {
		return append(out, ours)
	}
	return slices.Insert(out, at, ours)
}
