package ingress

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// DecodeInput reads Ingresses, IngressClasses, Services, EndpointSlices and Secrets from a
// multi-document YAML or JSON stream (as `kubectl get -o yaml` or hand-written manifests),
// for running the data plane without an API server (benchmarks, debugging). Other kinds are
// an error.
//
// The file is the operator's own, not a tenant's: its EndpointSlices are hand-written, and
// benchmarks run their backends on 127.0.0.1. So the Input allows unmanaged slices and
// loopback endpoints (AllowUnmanagedSlices, AllowLoopbackEndpoints); every other address
// check still applies.
func DecodeInput(r io.Reader) (Input, error) {
	in := Input{AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		return in, err
	}
	dec := serializer.NewCodecFactory(sch).UniversalDeserializer()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return in, nil
		}
		if err != nil {
			return in, fmt.Errorf("read document %d: %w", i, err)
		}
		if len(trimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return in, fmt.Errorf("decode document %d: %w", i, err)
		}
		switch o := obj.(type) {
		case *networkingv1.Ingress:
			in.Ingresses = append(in.Ingresses, o)
		case *networkingv1.IngressClass:
			in.Classes = append(in.Classes, o)
		case *corev1.Service:
			in.Services = append(in.Services, o)
		case *discoveryv1.EndpointSlice:
			in.Slices = append(in.Slices, o)
		case *corev1.Secret:
			in.Secrets = append(in.Secrets, o)
		default:
			return in, fmt.Errorf("document %d: kind %s is not used by the proxy", i, gvk.Kind)
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}
