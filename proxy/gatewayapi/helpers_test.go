package gatewayapi

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// build is Translate's table and Problems.
func build(in Input) (*table.Table, []table.Problem) {
	r := Translate(in)
	return r.Table, r.Problems
}

func ptr[T any](v T) *T { return &v }

func slice(svcName, name string, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svcName,
			discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr(e.ready), Serving: ptr(e.serving), Terminating: ptr(e.terminate)}})
	}
	return s
}

type ep struct {
	ip                        string
	ready, serving, terminate bool
}
