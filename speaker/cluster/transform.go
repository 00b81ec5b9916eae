package cluster

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// The speaker caches every Service and EndpointSlice of the cluster but reads only a few fields
// of each (config.Build, TakeoverEvents). The cache transforms below keep exactly those, so
// that 10,000 Services and 100,000 endpoints cost megabytes, not the hundreds they cost as
// decoded (managedFields alone were a third of it). A field read by new code must be added
// here too; TestTrimKeepsDecisions compares the World built from full and trimmed objects.
//
// Transforms run on the informer's freshly decoded object, before the cache stores it, once
// per object; they return a new, smaller object and pass anything else (a tombstone) through.

// trimService keeps what the speaker reads of a Service: its identity (the Event reference:
// name, namespace, UID, resourceVersion), spec.type, spec.loadBalancerClass,
// spec.externalTrafficPolicy, status.loadBalancer and the allocated-from-pool annotation.
func trimService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{
		TypeMeta:   svc.TypeMeta,
		ObjectMeta: identity(&svc.ObjectMeta),
		Spec: corev1.ServiceSpec{
			Type:                  svc.Spec.Type,
			LoadBalancerClass:     svc.Spec.LoadBalancerClass,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		},
		Status: corev1.ServiceStatus{LoadBalancer: svc.Status.LoadBalancer},
	}
	if v, ok := svc.Annotations[contract.AnnotationAllocatedFromPool]; ok {
		out.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: v}
	}
	return out, nil
}

// trimEndpointSlice keeps what the speaker reads of an EndpointSlice: its identity, the
// kubernetes.io/service-name label and, of each endpoint, nodeName and conditions (readyNodes:
// which nodes hold a ready endpoint of the Service). Addresses, ports, target references,
// hostnames, zones and hints are dropped, and so are endpoints identical to one already kept
// after trimming: the speaker only asks whether some endpoint on a node is ready, so a slice
// of 100 ready Pods on 3 nodes keeps 3 endpoints.
func trimEndpointSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		TypeMeta:    es.TypeMeta,
		ObjectMeta:  identity(&es.ObjectMeta),
		AddressType: es.AddressType,
	}
	if v, ok := es.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: v}
	}
	type key struct {
		node                        string
		hasNode                     bool
		ready, serving, terminating int8 // -1 nil, 0 false, 1 true
	}
	seen := map[key]bool{}
	for _, ep := range es.Endpoints {
		k := key{ready: tri(ep.Conditions.Ready), serving: tri(ep.Conditions.Serving), terminating: tri(ep.Conditions.Terminating)}
		if ep.NodeName != nil {
			k.node, k.hasNode = *ep.NodeName, true
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{NodeName: ep.NodeName, Conditions: ep.Conditions})
	}
	return out, nil
}

// trimNode keeps what the speaker reads of a Node: its identity, its labels (node selectors,
// the exclude-from-load-balancers label), status.conditions (Ready, NetworkUnavailable) and
// status.addresses (memberlist admission). The image list, capacity, node info, spec and
// annotations are dropped: on a real node the image list alone is kilobytes.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: identity(&n.ObjectMeta),
		Status:     corev1.NodeStatus{Conditions: n.Status.Conditions, Addresses: n.Status.Addresses},
	}
	out.Labels = n.Labels
	return out, nil
}

// identity is the part of an object's metadata that names it and that an Event reference
// takes (name, namespace, UID, resourceVersion), plus its deletion timestamp.
func identity(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp,
	}
}

// tri encodes an optional condition: -1 unset, 0 false, 1 true.
func tri(b *bool) int8 {
	switch {
	case b == nil:
		return -1
	case *b:
		return 1
	default:
		return 0
	}
}
