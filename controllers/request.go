package controllers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
)

// serviceKey is the allocator key of a Service.
func serviceKey(namespace, name string) string { return namespace + "/" + name }

// buildRequest translates a Service (and the labels of its namespace) into an allocator request.
// It fails only on input the user must fix: unparsable requested addresses.
func buildRequest(svc *corev1.Service, nsLabels map[string]string) (allocator.Request, error) {
	req := allocator.Request{
		Key:             serviceKey(svc.Namespace, svc.Name),
		Namespace:       svc.Namespace,
		NamespaceLabels: nsLabels,
		ServiceLabels:   svc.Labels,
		Pool:            annotationValue(svc, contract.AnnotationAddressPool),
		SharingKey:      annotationValue(svc, contract.AnnotationAllowSharedIP),
		BackendKey:      backendKey(svc),
	}
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		req.Ports = append(req.Ports, allocator.Port{Protocol: proto, Port: p.Port})
	}
	switch {
	case svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack:
		req.Policy = allocator.SingleStack
	case *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack:
		req.Policy = allocator.PreferDualStack
	default:
		req.Policy = allocator.RequireDualStack
	}
	for _, f := range svc.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			req.Families = append(req.Families, allocator.IPv6)
		} else {
			req.Families = append(req.Families, allocator.IPv4)
		}
	}
	addrs, field, err := requestedAddresses(svc)
	if err != nil {
		return req, fmt.Errorf("%s: %w", field, err)
	}
	req.Addresses = addrs
	if len(addrs) > 0 && len(svc.Spec.IPFamilies) == 0 {
		// A Service without ipFamilies (the API server fills them in) follows what it asks for.
		for _, a := range addrs {
			req.Families = append(req.Families, familyOf(a))
		}
	}
	return req, nil
}

// requestedAddresses reads metalgate.io/loadBalancerIPs (or a MetalLB alias), else
// spec.loadBalancerIP. It returns the field it read so an error can name it.
func requestedAddresses(svc *corev1.Service) ([]netip.Addr, string, error) {
	field, raw := "", ""
	if key, v, ok := annotation(svc, contract.AnnotationLoadBalancerIPs); ok {
		field, raw = "metadata.annotations["+key+"]", v
	} else if svc.Spec.LoadBalancerIP != "" {
		field, raw = "spec.loadBalancerIP", svc.Spec.LoadBalancerIP
	}
	if strings.TrimSpace(raw) == "" {
		return nil, field, nil
	}
	var out []netip.Addr
	seen := map[allocator.Family]bool{}
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, field, fmt.Errorf("%q is not an IP address", s)
		}
		a = a.Unmap()
		f := familyOf(a)
		if seen[f] {
			return nil, field, fmt.Errorf("more than one IPv%d address requested (at most one per family)", f)
		}
		seen[f] = true
		out = append(out, a)
	}
	return out, field, nil
}

// annotation returns the first of contract.AnnotationKeys(name) present on svc, with its value.
func annotation(svc *corev1.Service, name string) (key, value string, ok bool) {
	for _, k := range contract.AnnotationKeys(name) {
		if v, ok := svc.Annotations[k]; ok {
			return k, v, true
		}
	}
	return "", "", false
}

// annotationValue is the trimmed value annotation reads ("" when none is present).
func annotationValue(svc *corev1.Service, name string) string {
	_, v, _ := annotation(svc, name)
	return strings.TrimSpace(v)
}

// AnnotationConflicts describes the request annotations that are ignored although they say
// something else than the one read (metalgate.io wins, then metallb.io, then
// metallb.universe.tf), one sentence each; none when the names present agree.
func AnnotationConflicts(svc *corev1.Service) []string {
	var out []string
	for _, name := range []string{contract.AnnotationLoadBalancerIPs, contract.AnnotationAddressPool, contract.AnnotationAllowSharedIP} {
		key, v, ok := annotation(svc, name)
		if !ok {
			continue
		}
		for _, k := range contract.AnnotationKeys(name) {
			other, set := svc.Annotations[k]
			if !set || k == key || sameAnnotationValue(name, v, other) {
				continue
			}
			out = append(out, fmt.Sprintf("annotation %s=%q is ignored: %s=%q takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)", k, other, key, v))
		}
	}
	return out
}

// sameAnnotationValue compares two values of annotation name: address lists as sets.
func sameAnnotationValue(name, a, b string) bool {
	if name != contract.AnnotationLoadBalancerIPs {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	set := func(s string) string {
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		slices.Sort(parts)
		return strings.Join(parts, ",")
	}
	return set(a) == set(b)
}

func familyOf(a netip.Addr) allocator.Family {
	if a.Unmap().Is4() {
		return allocator.IPv4
	}
	return allocator.IPv6
}

// backendKey identifies a Service's endpoints when externalTrafficPolicy is Local: Services that
// share an address must then have the same pods behind them, or traffic for one would be
// attracted to nodes that only have the other's endpoints.
func backendKey(svc *corev1.Service) string {
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return ""
	}
	// labels.Set.String sorts the keys, so equal selectors give equal keys.
	return "selector:" + labels.Set(svc.Spec.Selector).String()
}

// statusAddresses are the addresses in a Service's status, in order, skipping hostnames.
func statusAddresses(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
