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
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// Route status is computed by the proxy's own translator (proxy/gatewayapi), from the same
// objects the Gateway's proxy reads, so what the status says attached is what the proxy
// routes; the controller writes it because it already writes the Gateway's status, on the
// leader only, and the proxies stay read-only (config/rbac/gateway-proxy).

// routeInput reads what gatewayapi.Translate needs for gw's routes and certificates: every HTTPRoute,
// GRPCRoute and TLSRoute (those two when the API server serves them, Reconciler.GRPCRoutes
// and Reconciler.TLSRoutes), ReferenceGrant,
// Namespace and Service (from the manager's cache, not copied: Build only reads, and the
// routes are copied before a status write), and the Secrets its HTTPS listeners name
// (certificateSecrets). EndpointSlices are not read: they change what is routed, not whether
// a route is attached or its references resolve.
func (r *Reconciler) routeInput(ctx context.Context, gw *gwv1.Gateway, sets []*gwv1.ListenerSet) (gatewayapi.Input, error) {
	in := gatewayapi.Input{Gateway: gw, ListenerSets: sets}
	nocopy := client.UnsafeDisableDeepCopy
	var err error
	rs, err := r.listRoutes(ctx, nocopy)
	if err != nil {
		return in, err
	}
	in.HTTPRoutes, in.GRPCRoutes, in.TLSRoutes = rs.http, rs.grpc, rs.tls
	grants, err := r.referenceGrants(ctx)
	if err != nil {
		return in, err
	}
	in.ReferenceGrants = grants
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss, nocopy); err != nil {
		return in, fmt.Errorf("list Namespaces: %w", err)
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	var svcs corev1.ServiceList
	if err := r.Client.List(ctx, &svcs, nocopy); err != nil {
		return in, fmt.Errorf("list Services: %w", err)
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	if in.Secrets, err = r.certificateSecrets(ctx, gw, grants); err != nil {
		return in, err
	}
	if in.Secrets, err = r.listenerSetSecrets(ctx, gatewayapi.ListenerSets(gw, sets, in.Namespaces, grants), grants, in.Secrets); err != nil {
		return in, err
	}
	if err := r.frontendObjects(ctx, gw, grants, &in); err != nil { // frontend.go
		return in, err
	}
	return in, r.backendTLSInput(ctx, &in)
}

// certificateSecrets reads the Secrets that gw's HTTPS listeners name in certificateRefs
// (core Secrets of the Gateway's namespace, or of another one that a ReferenceGrant opens to
// it), so that gatewayapi.Translate judges them exactly as the proxy does (Gateway.CertificateProblems:
// missing, not kubernetes.io/tls, no valid key pair). Each is read by name from the API
// server, never listed or cached: the controller sees only the Secrets a Gateway names. A
// Secret that is not there is left out (Build reports it missing).
func (r *Reconciler) certificateSecrets(ctx context.Context, gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant) ([]*corev1.Secret, error) {
	seen := map[types.NamespacedName]bool{}
	var out []*corev1.Secret
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gwv1.HTTPSProtocolType || l.TLS == nil {
			continue
		}
		for i, ref := range l.TLS.CertificateRefs {
			name, reason, _ := gatewayapi.CertificateRef(gw.Namespace, i, ref, grants)
			if reason != "" || seen[name] {
				continue
			}
			seen[name] = true
			sec, err := r.certificateSecret(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("%w (certificateRef of listener %s)", err, l.Name)
			}
			if sec != nil {
				out = append(out, sec)
			}
		}
	}
	return out, nil
}

// certificateSecret reads Secret name by name from the API server; nil when it is not there.
func (r *Reconciler) certificateSecret(ctx context.Context, name types.NamespacedName) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, name, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Secret %s: %w", name, err)
	}
	return &sec, nil
}

// routeSet is every route of each kind the controller reads.
type routeSet struct {
	http []*gwv1.HTTPRoute
	grpc []*gwv1.GRPCRoute
	tls  []*gwv1.TLSRoute
}

// objects is every route in one list: HTTPRoutes, then GRPCRoutes, then TLSRoutes.
func (s routeSet) objects() []client.Object {
	out := make([]client.Object, 0, len(s.http)+len(s.grpc)+len(s.tls))
	for _, hr := range s.http {
		out = append(out, hr)
	}
	for _, gr := range s.grpc {
		out = append(out, gr)
	}
	for _, tr := range s.tls {
		out = append(out, tr)
	}
	return out
}

// listRoutes lists every HTTPRoute and, when the API server serves them, every GRPCRoute
// and TLSRoute.
func (r *Reconciler) listRoutes(ctx context.Context, opts ...client.ListOption) (routeSet, error) {
	var s routeSet
	var hrs gwv1.HTTPRouteList
	if err := r.Client.List(ctx, &hrs, opts...); err != nil {
		return s, fmt.Errorf("list HTTPRoutes: %w", err)
	}
	for i := range hrs.Items {
		s.http = append(s.http, &hrs.Items[i])
	}
	if r.GRPCRoutes {
		var grs gwv1.GRPCRouteList
		if err := r.Client.List(ctx, &grs, opts...); err != nil {
			return s, fmt.Errorf("list GRPCRoutes: %w", err)
		}
		for i := range grs.Items {
			s.grpc = append(s.grpc, &grs.Items[i])
		}
	}
	if r.TLSRoutes {
		var trs gwv1.TLSRouteList
		if err := r.Client.List(ctx, &trs, opts...); err != nil {
			return s, fmt.Errorf("list TLSRoutes: %w", err)
		}
		for i := range trs.Items {
			s.tls = append(s.tls, &trs.Items[i])
		}
	}
	return s, nil
}

// routeStatus builds gw's table and returns its status part, the routes it read (the
// HTTPRoutes, then the GRPCRoutes, then the TLSRoutes) and the verdicts on the ListenerSets
// of sets that name gw, with their listeners' attached routes.
func (r *Reconciler) routeStatus(ctx context.Context, gw *gwv1.Gateway, sets []*gwv1.ListenerSet) (*table.GatewayStatus, []client.Object, []gatewayapi.ListenerSetVerdict, error) {
	in, err := r.routeInput(ctx, gw, sets)
	if err != nil {
		return nil, nil, nil, err
	}
	res := gatewayapi.Translate(in) // a route's Problems are in its status too
	return res.Status, routeSet{in.HTTPRoutes, in.GRPCRoutes, in.TLSRoutes}.objects(), res.ListenerSets, nil
}

// routeParts are what the controller reads and writes alike in an HTTPRoute, a GRPCRoute and
// a TLSRoute: the kinds share CommonRouteSpec (parentRefs) and RouteStatus (status.parents).
type routeParts struct {
	kind   string // table.KindHTTPRoute, table.KindGRPCRoute or table.KindTLSRoute
	spec   *gwv1.CommonRouteSpec
	status *gwv1.RouteStatus
}

// partsOf are o's routeParts, pointing into o; ok is false for any other kind than
// HTTPRoute, GRPCRoute and TLSRoute.
func partsOf(o client.Object) (p routeParts, ok bool) {
	switch rt := o.(type) {
	case *gwv1.HTTPRoute:
		return routeParts{table.KindHTTPRoute, &rt.Spec.CommonRouteSpec, &rt.Status.RouteStatus}, true
	case *gwv1.GRPCRoute:
		return routeParts{table.KindGRPCRoute, &rt.Spec.CommonRouteSpec, &rt.Status.RouteStatus}, true
	case *gwv1.TLSRoute:
		return routeParts{table.KindTLSRoute, &rt.Spec.CommonRouteSpec, &rt.Status.RouteStatus}, true
	}
	return routeParts{}, false
}

// routeKey names one route of one kind in table.GatewayStatus.Routes.
type routeKey struct {
	kind  string
	route types.NamespacedName
}

// writeRouteStatuses writes, on every route (HTTPRoute, GRPCRoute or TLSRoute) that names the
// Gateway of owner (or one of its ListenerSets) or holds a parent status of metalgate's for
// it, the parent statuses st computed (none for a route that no longer names it), leaving
// every other parent's entry as it is.
func (r *Reconciler) writeRouteStatuses(ctx context.Context, owner parentOwner, st *table.GatewayStatus, routes []client.Object) error {
	want := map[routeKey][]gwv1.RouteParentStatus{}
	if st != nil {
		for _, rs := range st.Routes {
			want[routeKey{rs.Kind, rs.Route}] = rs.Parents
		}
	}
	now := metav1.Now()
	for _, o := range routes {
		p, ok := partsOf(o)
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		ours, named := want[routeKey{p.kind, key}]
		if !named && !slices.ContainsFunc(p.status.Parents, func(ps gwv1.RouteParentStatus) bool { return owner.isOurs(ps, key.Namespace) }) {
			continue
		}
		next := mergeRouteParents(p.status.Parents, owner, key.Namespace, ours, now)
		if equality.Semantic.DeepEqual(next, p.status.Parents) {
			continue
		}
		updated, ok := o.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("copy %s %s: not a client.Object", p.kind, key)
		}
		up, _ := partsOf(updated)
		up.status.Parents = next
		if err := r.Client.Status().Update(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("update status of %s %s: %w", p.kind, key, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("wrote route status", "kind", p.kind, "route", key.String(), "parents", len(ours))
	}
	return nil
}

// forgetRoutes removes metalgate's parent statuses for Gateway gw (deleted, or no longer
// metalgate's) from every HTTPRoute, GRPCRoute and TLSRoute.
func (r *Reconciler) forgetRoutes(ctx context.Context, gw types.NamespacedName) error {
	rs, err := r.listRoutes(ctx)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	sets, _, err := r.listenerSetInput(ctx)
	if err != nil {
		return err
	}
	return r.writeRouteStatuses(ctx, newParentOwner(gw, sets), nil, rs.objects())
}

// parentOwner is a Gateway and the ListenerSets that name it: the parents whose route
// statuses the Gateway's reconcile writes. A ListenerSet that does not exist (known lacks
// it) is anyone's: its Gateway is not known any more, and metalgate's status for it is stale.
type parentOwner struct {
	gw    types.NamespacedName
	sets  []types.NamespacedName
	known []types.NamespacedName
}

// newParentOwner is Gateway gw with the ListenerSets of sets (all that exist) that name it.
func newParentOwner(gw types.NamespacedName, sets []*gwv1.ListenerSet) parentOwner {
	o := parentOwner{gw: gw}
	for _, ls := range sets {
		key := types.NamespacedName{Namespace: ls.Namespace, Name: ls.Name}
		o.known = append(o.known, key)
		if gatewayapi.NamesGateway(ls, gw) {
			o.sets = append(o.sets, key)
		}
	}
	return o
}

// isOurs says whether p is metalgate's parent status for the Gateway or one of its
// ListenerSets (a parentRef of a route in namespace routeNS).
func (o parentOwner) isOurs(p gwv1.RouteParentStatus, routeNS string) bool {
	if p.ControllerName != ControllerName {
		return false
	}
	if key, ok := gatewayapi.IsListenerSetRef(p.ParentRef, routeNS); ok {
		return slices.Contains(o.sets, key) || !slices.Contains(o.known, key)
	}
	return refNames(p.ParentRef, o.gw, routeNS)
}

// refNames says whether parentRef ref of a route in namespace routeNS names Gateway gw.
func refNames(ref gwv1.ParentReference, gw types.NamespacedName, routeNS string) bool {
	if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name
}

// MergeRouteParents is a route's status.parents with metalgate's entries for Gateway gw
// replaced by ours (in their order), every other entry (other Gateways, other controllers)
// kept in place. A condition that did not change keeps its lastTransitionTime; a new or
// changed one gets now.
func MergeRouteParents(prev []gwv1.RouteParentStatus, gw types.NamespacedName, routeNS string, ours []gwv1.RouteParentStatus, now metav1.Time) []gwv1.RouteParentStatus {
	return mergeRouteParents(prev, parentOwner{gw: gw}, routeNS, ours, now)
}

// mergeRouteParents is MergeRouteParents for the Gateway and ListenerSets of owner.
func mergeRouteParents(prev []gwv1.RouteParentStatus, owner parentOwner, routeNS string, ours []gwv1.RouteParentStatus, now metav1.Time) []gwv1.RouteParentStatus {
	out := []gwv1.RouteParentStatus{} // status.parents is required: [] when none, never null
	var old []gwv1.RouteParentStatus
	for _, p := range prev {
		if owner.isOurs(p, routeNS) {
			old = append(old, p)
			continue
		}
		out = append(out, p)
	}
	for _, p := range ours {
		p = *p.DeepCopy()
		var before []metav1.Condition
		if i := slices.IndexFunc(old, func(o gwv1.RouteParentStatus) bool { return equality.Semantic.DeepEqual(o.ParentRef, p.ParentRef) }); i >= 0 {
			before = old[i].Conditions
		}
		conds := slices.Clone(before)
		for _, c := range p.Conditions {
			c.LastTransitionTime = now
			meta.SetStatusCondition(&conds, c)
		}
		// Only the conditions metalgate computes now: one it no longer sets goes.
		conds = slices.DeleteFunc(conds, func(c metav1.Condition) bool {
			return !slices.ContainsFunc(p.Conditions, func(n metav1.Condition) bool { return n.Type == c.Type })
		})
		p.Conditions = conds
		out = append(out, p)
	}
	return out
}

// referenceGrants lists every ReferenceGrant from the cache, without copies (read only).
func (r *Reconciler) referenceGrants(ctx context.Context) ([]*gwv1beta1.ReferenceGrant, error) {
	var grants gwv1beta1.ReferenceGrantList
	if err := r.Client.List(ctx, &grants, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReferenceGrants: %w", err)
	}
	out := make([]*gwv1beta1.ReferenceGrant, 0, len(grants.Items))
	for i := range grants.Items {
		out = append(out, &grants.Items[i])
	}
	return out, nil
}
