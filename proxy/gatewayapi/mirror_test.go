package gatewayapi

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestGatewayRequestMirror: a RequestMirror filter becomes a Mirror of the route's Policy,
// its backendRef resolved like a rule's: another namespace only with a ReferenceGrant, an
// unresolved mirror makes ResolvedRefs False (the route still serves, the mirror gets
// nothing); percent and fraction become the sampled share; impossible shares are refused.
func TestGatewayRequestMirror(t *testing.T) {
	mirror := func(ns, name string, port int32, set func(*gatewayv1.HTTPRequestMirrorFilter)) gatewayv1.HTTPRouteFilter {
		f := &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendRef(ns, name, port, -1).BackendObjectReference}
		if set != nil {
			set(f)
		}
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: f}
	}
	rule := func(fs ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPRouteRule {
		r := toBackend("", "web")
		r.Filters = fs
		return r
	}
	type want struct {
		svc      string // "ns/name", "500 ns/name" unresolved
		num, den int
	}
	cases := []struct {
		name           string
		ns             string
		rule           gatewayv1.HTTPRouteRule
		grants         []*gatewayv1beta1.ReferenceGrant
		accepted, refs string
		mirrors        []want
	}{
		// Hostile first.
		{name: "mirror to another namespace without a ReferenceGrant", ns: "app", rule: rule(mirror("other", "web", 80, nil)),
			accepted: "True/Accepted", refs: "False/RefNotPermitted", mirrors: []want{{"500 other/web", 1, 1}}},
		{name: "mirror to a missing Service", ns: "infra", rule: rule(mirror("", "gone", 80, nil)),
			accepted: "True/Accepted", refs: "False/BackendNotFound", mirrors: []want{{"500 infra/gone", 1, 1}}},
		{name: "mirror to a port the Service lacks", ns: "infra", rule: rule(mirror("", "web", 81, nil)),
			accepted: "True/Accepted", refs: "False/BackendNotFound", mirrors: []want{{"500 infra/web", 1, 1}}},
		{name: "mirror of another kind", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.BackendRef.Kind = ptr(gatewayv1.Kind("ConfigMap"))
		})), accepted: "True/Accepted", refs: "False/InvalidKind", mirrors: []want{{"500 infra/web", 1, 1}}},
		{name: "percent over 100", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) { f.Percent = ptr(int32(101)) })),
			accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "fraction over 1", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.Fraction = &gatewayv1.Fraction{Numerator: 3, Denominator: ptr(int32(2))}
		})), accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "fraction with denominator 0", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.Fraction = &gatewayv1.Fraction{Numerator: 0, Denominator: ptr(int32(0))}
		})), accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		{name: "percent and fraction both", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.Percent, f.Fraction = ptr(int32(5)), &gatewayv1.Fraction{Numerator: 1}
		})), accepted: "False/UnsupportedValue", refs: "True/ResolvedRefs"},
		// What is allowed.
		{name: "mirror to another namespace with a ReferenceGrant", ns: "app", rule: rule(mirror("other", "web", 80, nil)),
			grants: []*gatewayv1beta1.ReferenceGrant{grant("other", "app", "web")}, accepted: "True/Accepted", refs: "True/ResolvedRefs",
			mirrors: []want{{"other/web", 1, 1}}},
		{name: "two mirrors, percent and fraction", ns: "app", rule: rule(
			mirror("", "v2", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) { f.Percent = ptr(int32(35)) }),
			mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
				f.Fraction = &gatewayv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}
			})), accepted: "True/Accepted", refs: "True/ResolvedRefs", mirrors: []want{{"app/v2", 35, 100}, {"app/web", 1, 3}}},
		{name: "percent 0", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) { f.Percent = ptr(int32(0)) })),
			accepted: "True/Accepted", refs: "True/ResolvedRefs", mirrors: []want{{"infra/web", 0, 100}}},
		{name: "fraction without a denominator is out of 100", ns: "infra", rule: rule(mirror("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.Fraction = &gatewayv1.Fraction{Numerator: 7}
		})), accepted: "True/Accepted", refs: "True/ResolvedRefs", mirrors: []want{{"infra/web", 7, 100}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hr := httpRoute(tc.ns, "r", 0, []parent{{ns: "infra", name: "gw"}}, nil, tc.rule)
			tab, _ := build(gatewayWorld([]*gatewayv1.HTTPRoute{hr}, tc.grants...))
			id := types.NamespacedName{Namespace: tc.ns, Name: "r"}
			if got := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionAccepted); got != tc.accepted {
				t.Errorf("Accepted = %s, want %s", got, tc.accepted)
			}
			if got := condition(tab.Gateway, id, 0, gatewayv1.RouteConditionResolvedRefs); got != tc.refs {
				t.Errorf("ResolvedRefs = %s, want %s", got, tc.refs)
			}
			r := tab.Match(80, httptest.NewRequest("GET", "http://x/", nil))
			if tc.mirrors == nil {
				if r != nil {
					t.Errorf("a refused route serves")
				}
				return
			}
			if r == nil {
				t.Fatal("no route")
			}
			if r.Backend.Service.String() != tc.ns+"/web" || r.Backend.Unresolved {
				t.Errorf("primary backend %s (unresolved %v), want %s/web", r.Backend.Service, r.Backend.Unresolved, tc.ns)
			}
			ms := r.Options.Policy.Mirrors
			if len(ms) != len(tc.mirrors) {
				t.Fatalf("%d mirrors, want %d", len(ms), len(tc.mirrors))
			}
			for i, w := range tc.mirrors {
				m := ms[i]
				got := m.Backend.Service.String()
				if m.Backend.Unresolved {
					got = "500 " + got
				}
				if got != w.svc || m.Numerator != w.num || m.Denominator != w.den {
					t.Errorf("mirror %d: %s %d/%d, want %s %d/%d", i, got, m.Numerator, m.Denominator, w.svc, w.num, w.den)
				}
				if !m.Backend.Unresolved && !containsBackend(tab.Backends, m.Backend) {
					t.Errorf("mirror %d: its backend is not in Backends (the data plane would have no pool for it)", i)
				}
			}
		})
	}
}

func containsBackend(bs []*table.Backend, be *table.Backend) bool {
	for _, b := range bs {
		if b == be {
			return true
		}
	}
	return false
}
