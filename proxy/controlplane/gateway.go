package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// RBAC of `metalgate proxy --gateway`: the markers are in package gatewayrbac, generated into
// a role of its own (config/rbac/gateway-proxy), not into the Ingress proxy's.

// Kinds a Gateway proxy watches besides Services and EndpointSlices.
const (
	KindGateway        = "Gateway"
	KindHTTPRoute      = "HTTPRoute"
	KindReferenceGrant = "ReferenceGrant"
	KindNamespace      = "Namespace"
)

// gatewayWatched are the kinds of a Gateway proxy: no Ingress or IngressClass.
var gatewayWatched = []watchedKind{
	{KindGateway, &gatewayv1.Gateway{}, func() client.ObjectList { return &gatewayv1.GatewayList{} }},
	{KindHTTPRoute, &gatewayv1.HTTPRoute{}, func() client.ObjectList { return &gatewayv1.HTTPRouteList{} }},
	{KindReferenceGrant, &gatewayv1beta1.ReferenceGrant{}, func() client.ObjectList { return &gatewayv1beta1.ReferenceGrantList{} }},
	{KindNamespace, &corev1.Namespace{}, func() client.ObjectList { return &corev1.NamespaceList{} }},
	{KindService, &corev1.Service{}, func() client.ObjectList { return &corev1.ServiceList{} }},
	{KindEndpointSlice, &discoveryv1.EndpointSlice{}, func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }},
	// The HTTPS listeners' certificateRefs (their data kept only for TLS and Opaque Secrets).
	{KindSecret, &corev1.Secret{}, func() client.ObjectList { return &corev1.SecretList{} }},
}

// kinds are the kinds this proxy watches: a Gateway proxy's or an Ingress proxy's.
func (o *Options) kinds() []watchedKind {
	if o.Gateway.Name != "" {
		return gatewayWatched
	}
	return watched
}

// gatewaySnapshot is snapshot for a Gateway proxy: its Gateway (nil while it does not exist:
// the table then routes nothing), every HTTPRoute, ReferenceGrant, Namespace, Service and
// EndpointSlice; table.Build keeps the routes whose parentRefs name the Gateway.
func (b *builder) gatewaySnapshot(ctx context.Context) (table.Input, error) {
	in := table.Input{AllowUnmanagedSlices: b.opts.AllowUnmanagedSlices}
	nocopy := client.UnsafeDisableDeepCopy
	gw := &gatewayv1.Gateway{}
	switch err := b.cache.Get(ctx, b.opts.Gateway, gw); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, fmt.Errorf("get Gateway %s: %w", b.opts.Gateway, err)
	default:
		in.Gateway = gw
	}
	var routes gatewayv1.HTTPRouteList
	if err := b.cache.List(ctx, &routes, nocopy); err != nil {
		return in, fmt.Errorf("list HTTPRoutes: %w", err)
	}
	for i := range routes.Items {
		in.HTTPRoutes = append(in.HTTPRoutes, &routes.Items[i])
	}
	var grants gatewayv1beta1.ReferenceGrantList
	if err := b.cache.List(ctx, &grants, nocopy); err != nil {
		return in, fmt.Errorf("list ReferenceGrants: %w", err)
	}
	for i := range grants.Items {
		in.ReferenceGrants = append(in.ReferenceGrants, &grants.Items[i])
	}
	var nss corev1.NamespaceList
	if err := b.cache.List(ctx, &nss, nocopy); err != nil {
		return in, fmt.Errorf("list Namespaces: %w", err)
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	if err := b.listShared(ctx, &in); err != nil {
		return in, err
	}
	return in, nil
}

// reportGateway logs, when they change, the HTTPS listeners of a Gateway table that have no
// certificate (their hosts get no TLS handshake) and those that have one again.
func (b *builder) reportGateway(t *table.Table) {
	if t.Gateway == nil {
		return
	}
	var msgs []string
	for l, p := range t.Gateway.CertificateProblems {
		msgs = append(msgs, l+": "+p)
	}
	sort.Strings(msgs)
	sig := strings.Join(msgs, "\n")
	if sig == b.certProblems {
		return
	}
	b.certProblems = sig
	if len(msgs) == 0 {
		b.opts.Logger.Info("every HTTPS listener of the Gateway has a certificate", "gateway", b.opts.Gateway.String())
		return
	}
	b.opts.Logger.Info("HTTPS listeners without a certificate: their hosts get no TLS handshake", "gateway", b.opts.Gateway.String(), "listeners", msgs)
}
