package ingress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeInput(t *testing.T) {
	const doc = `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: metalgate}
spec: {controller: metalgate.io/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: metalgate
  rules:
  - host: web.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.0.0.1], conditions: {ready: true}}
- {addresses: [127.0.0.1], conditions: {ready: true}}
- {addresses: [169.254.169.254], conditions: {ready: true}}
`
	in, err := DecodeInput(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	// The file is the operator's own: its unlabelled slice and loopback endpoint are taken
	// (hack/bench-proxy.sh runs its backend on 127.0.0.1); other special addresses are not.
	tab, problems := Build(in)
	var got []string
	for _, p := range problems {
		got = append(got, p.Reason+": "+p.Message)
	}
	if diff := cmp.Diff([]string{`RefusedEndpoint: Service default/web port 80: 1 of 3 endpoint addresses refused: EndpointSlice default/web-1 endpoints[2].addresses[0] "169.254.169.254": link-local address`}, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.0.0.1:8080", "127.0.0.1:8080"}, tab.Lookup("web.test", "/x").Backend.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if _, err := DecodeInput(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("a ConfigMap: error %v, want one naming the kind", err)
	}
}
