package gateway

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestMergePolicyAncestors: metalgate writes only its own entry for the Gateway it
// reconciles in a BackendTLSPolicy's status.ancestors. Hostile cases first: another
// controller's entry for the same Gateway, and another Gateway's entry, are kept untouched;
// the list never grows past the API's 16.
func TestMergePolicyAncestors(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	gw := types.NamespacedName{Namespace: "infra", Name: "web"}
	entry := func(controller gwv1.GatewayController, ns, name string, conds ...metav1.Condition) gwv1.PolicyAncestorStatus {
		n := gwv1.Namespace(ns)
		return gwv1.PolicyAncestorStatus{AncestorRef: gwv1.ParentReference{Namespace: &n, Name: gwv1.ObjectName(name)}, ControllerName: controller, Conditions: conds}
	}
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1, LastTransitionTime: t0}
	conflicted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "Conflicted", ObservedGeneration: 1}
	theirs := entry("example.com/other", "infra", "web", accepted)
	otherGW := entry(ControllerName, "infra", "api", accepted)
	many := make([]gwv1.PolicyAncestorStatus, 0, maxAncestors)
	for i := range maxAncestors {
		many = append(many, entry("example.com/other", "infra", "gw"+string(rune('a'+i))))
	}
	for _, tc := range []struct {
		name  string
		prev  []gwv1.PolicyAncestorStatus
		conds []metav1.Condition
		named bool
		check func(t *testing.T, got []gwv1.PolicyAncestorStatus)
	}{
		{name: "another controller's entry and another Gateway's are kept when ours goes",
			prev: []gwv1.PolicyAncestorStatus{theirs, otherGW, entry(ControllerName, "infra", "web", accepted)}, named: false,
			check: func(t *testing.T, got []gwv1.PolicyAncestorStatus) {
				if len(got) != 2 || got[0].ControllerName != "example.com/other" || got[1].AncestorRef.Name != "api" {
					t.Errorf("got %+v, want the other controller's and Gateway api's entries only", got)
				}
			}},
		{name: "ours stays where it was: two Gateways writing one policy do not reorder it without end",
			prev: []gwv1.PolicyAncestorStatus{entry(ControllerName, "infra", "web", accepted), otherGW}, conds: []metav1.Condition{accepted}, named: true,
			check: func(t *testing.T, got []gwv1.PolicyAncestorStatus) {
				if len(got) != 2 || got[0].AncestorRef.Name != "web" || got[1].AncestorRef.Name != "api" {
					t.Errorf("got %+v, want web's entry first, as it was", got)
				}
				// Both Gateways' writers, in turn, with nothing new: a fixed point.
				api := types.NamespacedName{Namespace: "infra", Name: "api"}
				l := MergePolicyAncestors(MergePolicyAncestors(nil, gw, []metav1.Condition{accepted}, true, t0), api, []metav1.Condition{accepted}, true, t0)
				for _, g := range []types.NamespacedName{gw, api, gw} {
					if again := MergePolicyAncestors(l, g, []metav1.Condition{accepted}, true, t1); !equality.Semantic.DeepEqual(again, l) {
						t.Fatalf("%s's merge changed %+v to %+v", g, l, again)
					}
				}
			}},
		{name: "a full list is not grown",
			prev: many, conds: []metav1.Condition{accepted}, named: true,
			check: func(t *testing.T, got []gwv1.PolicyAncestorStatus) {
				if len(got) != maxAncestors {
					t.Errorf("%d entries, want %d", len(got), maxAncestors)
				}
			}},
		{name: "ours is added after the others, with the Gateway's group, kind and namespace",
			prev: []gwv1.PolicyAncestorStatus{theirs}, conds: []metav1.Condition{accepted}, named: true,
			check: func(t *testing.T, got []gwv1.PolicyAncestorStatus) {
				if len(got) != 2 || got[0].ControllerName != "example.com/other" {
					t.Fatalf("got %+v", got)
				}
				r := got[1].AncestorRef
				if got[1].ControllerName != ControllerName || r.Group == nil || *r.Group != gwv1.GroupName || r.Kind == nil || *r.Kind != "Gateway" ||
					r.Namespace == nil || *r.Namespace != "infra" || r.Name != "web" {
					t.Errorf("our entry %+v", got[1])
				}
			}},
		{name: "an unchanged condition keeps its time, a changed one gets now",
			prev: []gwv1.PolicyAncestorStatus{entry(ControllerName, "infra", "web", accepted)}, conds: []metav1.Condition{accepted}, named: true,
			check: func(t *testing.T, got []gwv1.PolicyAncestorStatus) {
				if len(got) != 1 || !got[0].Conditions[0].LastTransitionTime.Equal(&t0) {
					t.Errorf("got %+v, want the time kept", got)
				}
				again := MergePolicyAncestors(got, gw, []metav1.Condition{conflicted}, true, t1)
				if c := again[0].Conditions[0]; c.Reason != "Conflicted" || !c.LastTransitionTime.Equal(&t1) {
					t.Errorf("after a change: %+v, want Conflicted at t1", c)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, MergePolicyAncestors(tc.prev, gw, tc.conds, tc.named, t1))
		})
	}
}

// TestClientCertificateCondition: the Gateway's ResolvedRefs condition for its backend client
// certificate: False with the translator's reason, True when resolved, and none (an old one
// removed) when no clientCertificateRef is set.
func TestClientCertificateCondition(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	accepted := Plan{Accepted: metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue}}
	withRef := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Spec: gwv1.GatewaySpec{TLS: &gwv1.GatewayTLSConfig{
		Backend: &gwv1.GatewayBackendTLS{ClientCertificateRef: &gwv1.SecretObjectReference{Name: "c"}}}}}
	stale := []metav1.Condition{{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "RefNotPermitted"}}
	for _, tc := range []struct {
		name string
		gw   *gwv1.Gateway
		obs  Observed
		want string // "" no condition; else status/reason
	}{
		{name: "a problem", gw: withRef, obs: Observed{BackendClientCertificate: &table.RefProblem{Reason: "RefNotPermitted", Message: "m"}}, want: "False/RefNotPermitted"},
		{name: "resolved", gw: withRef, want: "True/ResolvedRefs"},
		{name: "none set: an old condition goes", gw: &gwv1.Gateway{}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := slices.Clone(stale)
			clientCertificateCondition(tc.gw, accepted, tc.obs, &conds, now)
			c := meta.FindStatusCondition(conds, "ResolvedRefs")
			switch {
			case tc.want == "" && c != nil:
				t.Errorf("condition %+v, want none", c)
			case tc.want != "" && (c == nil || string(c.Status)+"/"+c.Reason != tc.want || c.ObservedGeneration != 4):
				t.Errorf("condition %+v, want %s at generation 4", c, tc.want)
			}
		})
	}
}
