package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// RBAC of `metalgate proxy --gateway`: the markers are in package gatewayrbac, generated into
// a role of its own (config/rbac/gateway-proxy), not into the Ingress proxy's.

// Kinds a Gateway proxy watches besides Services and EndpointSlices.
const (
	KindGateway        = "Gateway"
	KindHTTPRoute      = "HTTPRoute"
	KindGRPCRoute      = "GRPCRoute"
	KindTLSRoute       = "TLSRoute"
	KindListenerSet    = "ListenerSet"
	KindReferenceGrant = "ReferenceGrant"
	KindNamespace      = "Namespace"
	// KindBackendTLSPolicy and KindConfigMap: TLS to backends (backendtls.go).
	KindBackendTLSPolicy = "BackendTLSPolicy"
	KindConfigMap        = "ConfigMap"
)

// gatewayWatched are the kinds of a Gateway proxy: no Ingress or IngressClass.
var gatewayWatched = []watchedKind{
	{KindGateway, &gatewayv1.Gateway{}, func() client.ObjectList { return &gatewayv1.GatewayList{} }},
	{KindHTTPRoute, &gatewayv1.HTTPRoute{}, func() client.ObjectList { return &gatewayv1.HTTPRouteList{} }},
	// Left out when the API server does not serve GRPCRoute (Options.noGRPCRoute).
	{KindGRPCRoute, &gatewayv1.GRPCRoute{}, func() client.ObjectList { return &gatewayv1.GRPCRouteList{} }},
	// Left out when the API server does not serve TLSRoute (Options.noTLSRoute).
	{KindTLSRoute, &gatewayv1.TLSRoute{}, func() client.ObjectList { return &gatewayv1.TLSRouteList{} }},
	// Left out when the API server does not serve ListenerSet (Options.noListenerSet).
	{KindListenerSet, &gatewayv1.ListenerSet{}, func() client.ObjectList { return &gatewayv1.ListenerSetList{} }},
	{KindReferenceGrant, &gatewayv1beta1.ReferenceGrant{}, func() client.ObjectList { return &gatewayv1beta1.ReferenceGrantList{} }},
	{KindNamespace, &corev1.Namespace{}, func() client.ObjectList { return &corev1.NamespaceList{} }},
	{KindService, &corev1.Service{}, func() client.ObjectList { return &corev1.ServiceList{} }},
	{KindEndpointSlice, &discoveryv1.EndpointSlice{}, func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }},
	// The HTTPS listeners' certificateRefs (their data kept only for TLS and Opaque Secrets).
	{KindSecret, &corev1.Secret{}, func() client.ObjectList { return &corev1.SecretList{} }},
	// Left out when the API server does not serve BackendTLSPolicy (Options.noBackendTLSPolicy).
	{KindBackendTLSPolicy, &gatewayv1.BackendTLSPolicy{}, func() client.ObjectList { return &gatewayv1.BackendTLSPolicyList{} }},
	// The CA bundles of spec.tls.frontend and of the BackendTLSPolicies (only the key ca.crt
	// is kept: configMapTransform).
	{KindConfigMap, &corev1.ConfigMap{}, func() client.ObjectList { return &corev1.ConfigMapList{} }},
}

// kinds are the kinds this proxy watches: a Gateway proxy's (without GRPCRoute, TLSRoute,
// ListenerSet or BackendTLSPolicy when the API server does not serve it) or an Ingress
// proxy's.
func (o *Options) kinds() []watchedKind {
	if o.Gateway.Name == "" {
		if o.noReferenceGrant {
			return slices.DeleteFunc(slices.Clone(watched), func(w watchedKind) bool { return w.kind == KindReferenceGrant })
		}
		return watched
	}
	return slices.DeleteFunc(slices.Clone(gatewayWatched), func(w watchedKind) bool {
		return o.noGRPCRoute && w.kind == KindGRPCRoute || o.noTLSRoute && w.kind == KindTLSRoute ||
			o.noListenerSet && w.kind == KindListenerSet || o.noBackendTLSPolicy && w.kind == KindBackendTLSPolicy
	})
}

// checkGRPCRoute sets o.noGRPCRoute when o is a Gateway proxy's and the API server (asked
// through m) does not serve GRPCRoute: an install of Gateway API before v1.1, whose standard
// channel lacked it. The proxy then serves HTTPRoutes alone, as the Gateway controller does
// on such a cluster (controllers/gateway.Setup), instead of failing readiness on a watch
// that cannot start; a GRPCRoute CRD installed later is read after a restart. TLSRoute
// (standard channel since v1.5) likewise sets o.noTLSRoute: TLS Passthrough listeners then
// take no routes.
func (o *Options) checkGRPCRoute(m meta.RESTMapper) error {
	if o.Gateway.Name == "" {
		return o.checkReferenceGrant(m)
	}
	for _, k := range []struct {
		kind, msg string
		missing   *bool
	}{
		{KindGRPCRoute, "GRPCRoute is not installed: this Gateway proxy serves HTTPRoutes only", &o.noGRPCRoute},
		{KindTLSRoute, "TLSRoute is not installed: this Gateway proxy's TLS Passthrough listeners take no routes", &o.noTLSRoute},
		{KindListenerSet, "ListenerSet is not installed: this Gateway proxy serves the Gateway's own listeners only", &o.noListenerSet},
	} {
		_, err := m.RESTMapping(schema.GroupKind{Group: gatewayv1.GroupName, Kind: k.kind}, gatewayv1.GroupVersion.Version)
		switch {
		case meta.IsNoMatchError(err):
			*k.missing = true
			o.Logger.Info(k.msg, "gateway", o.Gateway.String())
		case err != nil:
			return fmt.Errorf("look up %s in the API server: %w", k.kind, err)
		}
	}
	return o.checkBackendTLSPolicy(m)
}

// checkReferenceGrant sets o.noReferenceGrant when the API server (asked through m) does not
// serve ReferenceGrant: a cluster without Gateway API. An Ingress proxy then does without
// (an auth-url to another namespace's Service stays refused) instead of failing readiness on
// a watch that cannot start; a CRD installed later is read after a restart.
func (o *Options) checkReferenceGrant(m meta.RESTMapper) error {
	_, err := m.RESTMapping(schema.GroupKind{Group: gatewayv1beta1.GroupName, Kind: KindReferenceGrant}, gatewayv1beta1.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(err):
		o.noReferenceGrant = true
		o.Logger.Info("ReferenceGrant is not installed: auth-url to another namespace's Service stays refused")
	case err != nil:
		return fmt.Errorf("look up ReferenceGrant in the API server: %w", err)
	}
	return nil
}

// gatewaySnapshot is snapshot for a Gateway proxy: its Gateway (nil while it does not exist:
// the table then routes nothing), every HTTPRoute, GRPCRoute and TLSRoute (unless not served),
// ReferenceGrant, Namespace, Service and EndpointSlice; gatewayapi.Translate keeps the routes whose
// parentRefs name the Gateway.
func (b *builder) gatewaySnapshot(ctx context.Context) (gatewayapi.Input, error) {
	in := gatewayapi.Input{AllowUnmanagedSlices: b.opts.AllowUnmanagedSlices}
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
	if !b.opts.noGRPCRoute {
		var grpc gatewayv1.GRPCRouteList
		if err := b.cache.List(ctx, &grpc, nocopy); err != nil {
			return in, fmt.Errorf("list GRPCRoutes: %w", err)
		}
		for i := range grpc.Items {
			in.GRPCRoutes = append(in.GRPCRoutes, &grpc.Items[i])
		}
	}
	if !b.opts.noTLSRoute {
		var tlsr gatewayv1.TLSRouteList
		if err := b.cache.List(ctx, &tlsr, nocopy); err != nil {
			return in, fmt.Errorf("list TLSRoutes: %w", err)
		}
		for i := range tlsr.Items {
			in.TLSRoutes = append(in.TLSRoutes, &tlsr.Items[i])
		}
	}
	if !b.opts.noListenerSet {
		var sets gatewayv1.ListenerSetList
		if err := b.cache.List(ctx, &sets, nocopy); err != nil {
			return in, fmt.Errorf("list ListenerSets: %w", err)
		}
		for i := range sets.Items {
			in.ListenerSets = append(in.ListenerSets, &sets.Items[i])
		}
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
	var err error
	if in.Services, in.Slices, in.Secrets, err = b.listShared(ctx); err != nil {
		return in, err
	}
	if in.BackendTLSPolicies, err = b.backendTLSPolicies(ctx); err != nil {
		return in, err
	}
	in.ConfigMaps, err = b.listConfigMaps(ctx) // gatewayclientcert.go: CA bundles of both
	return in, err
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
