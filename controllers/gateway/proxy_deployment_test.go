package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// TestProxyArgs: every Gateway proxy accepts h2c (gRPC without TLS); only a GatewayClass
// annotated exactly "true" makes its Gateways' proxies trust hand-written EndpointSlices; the
// Gateway's own annotations never do (its owner is not the cluster operator).
func TestProxyArgs(t *testing.T) {
	base := []string{"proxy", "--gateway=team-a/web", "--h2c"}
	allow := append(append([]string(nil), base...), "--allow-unmanaged-endpointslices")
	for _, tc := range []struct {
		name       string
		classValue *string
		gwValue    *string
		want       []string
	}{
		{name: "annotation on the Gateway only is ignored", gwValue: ptr("true"), want: base},
		{name: "class value True (not exactly true)", classValue: ptr("True"), want: base},
		{name: "class value 1", classValue: ptr("1"), want: base},
		{name: "class value empty", classValue: ptr(""), want: base},
		{name: "class value false", classValue: ptr("false"), want: base},
		{name: "no annotation", want: base},
		{name: "class value true", classValue: ptr("true"), want: allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}}
			if tc.gwValue != nil {
				gw.Annotations = map[string]string{contract.AnnotationAllowUnmanagedEndpointSlices: *tc.gwValue}
			}
			if tc.classValue != nil {
				gc.Annotations = map[string]string{contract.AnnotationAllowUnmanagedEndpointSlices: *tc.classValue}
			}
			got := DesiredDeployment(gw, gc, Plan{}, "metalgate-system", ProxyOptions{Image: "img"}).Spec.Template.Spec.Containers[0].Args
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("proxy args (-want +got):\n%s", diff)
			}
		})
	}
}
