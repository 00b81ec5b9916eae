package refgrant

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// TestAllows: a grant opens its own namespace only, to the group, kind and namespace it
// names in from, for the kind (and name, when it names one) in to; every part that differs
// refuses.
func TestAllows(t *testing.T) {
	grant := func(ns, fromGroup, fromKind, fromNS, toGroup, toKind string, name *string) *gatewayv1beta1.ReferenceGrant {
		g := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
		g.Spec.From = []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(fromGroup), Kind: gatewayv1beta1.Kind(fromKind), Namespace: gatewayv1beta1.Namespace(fromNS)}}
		to := gatewayv1beta1.ReferenceGrantTo{Group: gatewayv1beta1.Group(toGroup), Kind: gatewayv1beta1.Kind(toKind)}
		if name != nil {
			n := gatewayv1beta1.ObjectName(*name)
			to.Name = &n
		}
		g.Spec.To = []gatewayv1beta1.ReferenceGrantTo{to}
		return g
	}
	str := func(s string) *string { return &s }
	ing := From{Group: "networking.k8s.io", Kind: "Ingress", Namespace: "app"}
	target := types.NamespacedName{Namespace: "auth", Name: "oauth2-proxy"}
	for _, tc := range []struct {
		name  string
		grant *gatewayv1beta1.ReferenceGrant
		want  bool
	}{
		{"grant in another namespace than the target's", grant("app", "networking.k8s.io", "Ingress", "app", "", "Service", nil), false},
		{"from another namespace", grant("auth", "networking.k8s.io", "Ingress", "other", "", "Service", nil), false},
		{"from another kind", grant("auth", "networking.k8s.io", "NetworkPolicy", "app", "", "Service", nil), false},
		{"from another group", grant("auth", "gateway.networking.k8s.io", "Ingress", "app", "", "Service", nil), false},
		{"to another kind", grant("auth", "networking.k8s.io", "Ingress", "app", "", "Secret", nil), false},
		{"to another group", grant("auth", "networking.k8s.io", "Ingress", "app", "apps", "Service", nil), false},
		{"to another name", grant("auth", "networking.k8s.io", "Ingress", "app", "", "Service", str("other")), false},
		{"to the name", grant("auth", "networking.k8s.io", "Ingress", "app", "", "Service", str("oauth2-proxy")), true},
		{"to every Service", grant("auth", "networking.k8s.io", "Ingress", "app", "", "Service", nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Allows([]*gatewayv1beta1.ReferenceGrant{tc.grant}, ing, "Service", target); got != tc.want {
				t.Errorf("Allows = %v, want %v", got, tc.want)
			}
		})
	}
	if Allows(nil, ing, "Service", target) {
		t.Error("no grant allows")
	}
}
