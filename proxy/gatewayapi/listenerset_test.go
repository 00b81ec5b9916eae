package gatewayapi

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// testSet is ListenerSet ns/name, created age seconds after the test routes' epoch, whose
// parentRef names infra/gw.
func testSet(ns, name string, age int, ls ...gatewayv1.Listener) *gatewayv1.ListenerSet {
	s := &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))},
		Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "gw", Namespace: ptr(gatewayv1.Namespace("infra"))}}}
	for _, l := range ls {
		s.Spec.Listeners = append(s.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	return s
}

// onSet makes parentRef i of r name ListenerSet ns/name (section: its listener, "" any).
func onSet(r *gatewayv1.HTTPRoute, ns, name, section string) *gatewayv1.HTTPRoute {
	pr := gatewayv1.ParentReference{Group: ptr(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr(gatewayv1.Kind("ListenerSet")),
		Namespace: ptr(gatewayv1.Namespace(ns)), Name: gatewayv1.ObjectName(name)}
	if section != "" {
		pr.SectionName = ptr(gatewayv1.SectionName(section))
	}
	r.Spec.ParentRefs = append(r.Spec.ParentRefs, pr)
	return r
}

func allowListeners(from gatewayv1.FromNamespaces) *gatewayv1.AllowedListeners {
	a := &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from}}
	if from == gatewayv1.NamespacesFromSelector {
		a.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	}
	return a
}

// setListenerCond is "status/reason" of condition typ of listener of the ListenerSet ns/name
// in the translation, "not admitted" or "no set".
func setListenerCond(vs []ListenerSetVerdict, set, listener string, typ gatewayv1.ListenerConditionType) string {
	for _, v := range vs {
		if v.Set.Namespace+"/"+v.Set.Name != set {
			continue
		}
		if !v.Admitted() {
			return "not admitted"
		}
		for _, l := range v.Listeners {
			if string(l.Name) == listener {
				if c := meta.FindStatusCondition(l.Conditions, string(typ)); c != nil {
					return string(c.Status) + "/" + c.Reason
				}
			}
		}
		return "no condition"
	}
	return "no set"
}

func TestListenerSets(t *testing.T) {
	web := toBackend("", "web")
	extra := testListener("extra", 80, "ls.example.com", gatewayv1.NamespacesFromAll)
	newPort := testListener("new-port", 9090, "", gatewayv1.NamespacesFromSame)
	tcp80 := testListener("tcp80", 80, "", gatewayv1.NamespacesFromAll)
	tcp80.Protocol = gatewayv1.TCPProtocolType
	stealFoo := testListener("steal", 8083, "foo.example.com", gatewayv1.NamespacesFromAll)
	// A route of app on the ListenerSet's listener, and one of infra on the Gateway's.
	setRoute := func(ns, set, section string) *gatewayv1.HTTPRoute {
		return onSet(httpRoute("app", "via-set", 1, nil, nil, toBackend("", "web")), ns, set, section)
	}
	gwFoo := httpRoute("infra", "gw-foo", 0, []parent{onGW("foo")}, nil, web)
	accepted := "True/Accepted"
	type want struct {
		set, listener, accepted, conflicted string // set "ns/name"
	}
	cases := []struct {
		name        string
		from        *gatewayv1.AllowedListeners
		sets        []*gatewayv1.ListenerSet
		routes      []*gatewayv1.HTTPRoute
		listeners   []want
		routeStatus map[string]string // "ns/name" → Accepted of its first parentRef ("none": no status)
		attachedSet int               // ListenerSets admitted with a served listener
		probes      []probe
	}{
		// Hostile first: a ListenerSet the Gateway does not admit never gets traffic.
		{name: "no allowedListeners: ListenerSets are not admitted (default None)",
			sets:      []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, extra)},
			routes:    []*gatewayv1.HTTPRoute{setRoute("infra", "ls", "")},
			listeners: []want{{"infra/ls", "extra", "not admitted", ""}}, routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners"},
			probes: []probe{{80, "ls.example.com", "/", ""}}},
		{name: "from None",
			from: allowListeners(gatewayv1.NamespacesFromNone), sets: []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, extra)},
			routes:    []*gatewayv1.HTTPRoute{setRoute("infra", "ls", "")},
			listeners: []want{{"infra/ls", "extra", "not admitted", ""}}, routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners"},
			probes: []probe{{80, "ls.example.com", "/", ""}}},
		{name: "from Same, ListenerSet of another namespace",
			from: allowListeners(gatewayv1.NamespacesFromSame), sets: []*gatewayv1.ListenerSet{testSet("app", "ls", 0, extra)},
			routes:    []*gatewayv1.HTTPRoute{setRoute("app", "ls", "")},
			listeners: []want{{"app/ls", "extra", "not admitted", ""}}, routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners"},
			probes: []probe{{80, "ls.example.com", "/", ""}}},
		{name: "from Selector, namespace not selected",
			from: allowListeners(gatewayv1.NamespacesFromSelector), sets: []*gatewayv1.ListenerSet{testSet("other", "ls", 0, extra)},
			routes:    []*gatewayv1.HTTPRoute{setRoute("other", "ls", "")},
			listeners: []want{{"other/ls", "extra", "not admitted", ""}}, routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners"},
			probes: []probe{{80, "ls.example.com", "/", ""}}},
		{name: "ListenerSet of another Gateway: not this one's, no status from it",
			from: allowListeners(gatewayv1.NamespacesFromAll), sets: []*gatewayv1.ListenerSet{func() *gatewayv1.ListenerSet {
				s := testSet("infra", "ls", 0, extra)
				s.Spec.ParentRef.Name = "other-gw"
				return s
			}()},
			routes:    []*gatewayv1.HTTPRoute{setRoute("infra", "ls", "")},
			listeners: []want{{"infra/ls", "extra", "no set", ""}}, routeStatus: map[string]string{"app/via-set": "none"},
			probes: []probe{{80, "ls.example.com", "/", ""}}},
		{name: "listener taking a Gateway listener's port and hostname: HostnameConflict, the Gateway keeps its traffic",
			from: allowListeners(gatewayv1.NamespacesFromAll), sets: []*gatewayv1.ListenerSet{testSet("app", "ls", 0, stealFoo)},
			routes:      []*gatewayv1.HTTPRoute{gwFoo, setRoute("app", "ls", "")},
			listeners:   []want{{"app/ls", "steal", "False/HostnameConflict", "True/HostnameConflict"}},
			routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners", "infra/gw-foo": accepted},
			probes:      []probe{{8083, "foo.example.com", "/", "infra/web"}}},
		{name: "TCP listener on a Gateway's HTTP port: ProtocolConflict, not only unsupported",
			from: allowListeners(gatewayv1.NamespacesFromAll), sets: []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, tcp80, extra)},
			routes:      []*gatewayv1.HTTPRoute{setRoute("infra", "ls", "")},
			listeners:   []want{{"infra/ls", "tcp80", "False/ProtocolConflict", "True/ProtocolConflict"}, {"infra/ls", "extra", accepted, "False/NoConflicts"}},
			attachedSet: 1, routeStatus: map[string]string{"app/via-set": accepted},
			probes: []probe{{80, "ls.example.com", "/", "app/web"}}},
		{name: "two ListenerSets on one hostname: the older wins whatever its name",
			from: allowListeners(gatewayv1.NamespacesFromAll),
			sets: []*gatewayv1.ListenerSet{testSet("app", "a-young", 10, extra), testSet("other", "z-old", 5, extra)},
			routes: []*gatewayv1.HTTPRoute{setRoute("app", "a-young", ""),
				onSet(httpRoute("other", "old-route", 2, nil, nil, web), "other", "z-old", "")},
			listeners:   []want{{"app/a-young", "extra", "False/HostnameConflict", "True/HostnameConflict"}, {"other/z-old", "extra", accepted, "False/NoConflicts"}},
			attachedSet: 1, routeStatus: map[string]string{"app/via-set": "False/NotAllowedByListeners", "other/old-route": accepted},
			probes: []probe{{80, "ls.example.com", "/", "other/web"}}},
		{name: "two ListenerSets of one age: namespace/name decides",
			from:        allowListeners(gatewayv1.NamespacesFromAll),
			sets:        []*gatewayv1.ListenerSet{testSet("other", "b", 5, extra), testSet("other", "a", 5, extra)},
			listeners:   []want{{"other/b", "extra", "False/HostnameConflict", "True/HostnameConflict"}, {"other/a", "extra", accepted, "False/NoConflicts"}},
			attachedSet: 1},
		{name: "allowedRoutes Same means the ListenerSet's namespace, not the Gateway's",
			from: allowListeners(gatewayv1.NamespacesFromAll), sets: []*gatewayv1.ListenerSet{testSet("other", "ls", 0, newPort)},
			routes: []*gatewayv1.HTTPRoute{onSet(httpRoute("infra", "gw-ns", 0, nil, nil, web), "other", "ls", ""),
				onSet(httpRoute("other", "set-ns", 0, nil, nil, web), "other", "ls", "")},
			listeners:   []want{{"other/ls", "new-port", accepted, "False/NoConflicts"}},
			routeStatus: map[string]string{"infra/gw-ns": "False/NotAllowedByListeners", "other/set-ns": accepted}, attachedSet: 1,
			probes: []probe{{9090, "x", "/", "other/web"}}},
		{name: "a parentRef naming the Gateway does not attach to the ListenerSet's listeners",
			from: allowListeners(gatewayv1.NamespacesFromAll), sets: []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, extra, newPort)},
			routes:    []*gatewayv1.HTTPRoute{httpRoute("infra", "whole-gw", 0, []parent{{ns: "infra", name: "gw"}}, nil, web)},
			listeners: []want{{"infra/ls", "extra", accepted, "False/NoConflicts"}}, attachedSet: 1,
			routeStatus: map[string]string{"infra/whole-gw": accepted},
			probes:      []probe{{80, "x", "/", "infra/web"}, {80, "ls.example.com", "/", ""}, {9090, "x", "/", ""}}},
		{name: "sectionName selects one listener of the ListenerSet",
			from: allowListeners(gatewayv1.NamespacesFromSelector), sets: []*gatewayv1.ListenerSet{testSet("app", "ls", 0, extra, newPort)},
			routes:      []*gatewayv1.HTTPRoute{setRoute("app", "ls", "new-port")},
			listeners:   []want{{"app/ls", "new-port", accepted, "False/NoConflicts"}},
			routeStatus: map[string]string{"app/via-set": accepted}, attachedSet: 1,
			probes: []probe{{9090, "x", "/", "app/web"}, {80, "ls.example.com", "/", ""}}},
		{name: "sectionName the ListenerSet lacks",
			from: allowListeners(gatewayv1.NamespacesFromSame), sets: []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, extra)},
			routes:      []*gatewayv1.HTTPRoute{setRoute("infra", "ls", "http")},
			routeStatus: map[string]string{"app/via-set": "False/NoMatchingParent"}, attachedSet: 1,
			probes: []probe{{80, "ls.example.com", "/", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewayWorld(tc.routes)
			in.Gateway.Spec.AllowedListeners = tc.from
			in.ListenerSets = tc.sets
			res := Translate(in)
			for _, w := range tc.listeners {
				if got := setListenerCond(res.ListenerSets, w.set, w.listener, gatewayv1.ListenerConditionAccepted); got != w.accepted {
					t.Errorf("%s listener %s: Accepted = %s, want %s", w.set, w.listener, got, w.accepted)
				}
				if w.conflicted == "" {
					continue
				}
				if got := setListenerCond(res.ListenerSets, w.set, w.listener, gatewayv1.ListenerConditionConflicted); got != w.conflicted {
					t.Errorf("%s listener %s: Conflicted = %s, want %s", w.set, w.listener, got, w.conflicted)
				}
			}
			for route, want := range tc.routeStatus {
				ns, name, _ := strings.Cut(route, "/")
				if got := condition(res.Status, types.NamespacedName{Namespace: ns, Name: name}, 0, gatewayv1.RouteConditionAccepted); got != want {
					t.Errorf("route %s: Accepted = %s, want %s", route, got, want)
				}
			}
			served := 0
			for _, v := range res.ListenerSets {
				if v.Admitted() && v.Served() {
					served++
				}
			}
			if served != tc.attachedSet {
				t.Errorf("ListenerSets admitted and served = %d, want %d", served, tc.attachedSet)
			}
			for _, v := range res.ListenerSets {
				if len(v.CertificateProblems) > 0 {
					t.Errorf("ListenerSet %s/%s: certificate problems %v on HTTP listeners", v.Set.Namespace, v.Set.Name, v.CertificateProblems)
				}
			}
			for _, p := range tc.probes {
				p.check(t, res.Table)
			}
		})
	}
}

// TestListenerSetCertificateGrant: a ListenerSet's HTTPS listener may use a Secret of another
// namespace only with a ReferenceGrant from ListenerSets; the Gateway's grant is not
// inherited.
func TestListenerSetCertificateGrant(t *testing.T) {
	https := gatewayv1.Listener{Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr(gatewayv1.Hostname("ls.example.com")),
		TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert", Namespace: ptr(gatewayv1.Namespace("certs"))}}}}
	secretGrant := func(kind string) *gatewayv1beta1.ReferenceGrant {
		return &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "g-" + kind},
			Spec: gatewayv1beta1.ReferenceGrantSpec{
				From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: gatewayv1.Kind(kind), Namespace: "infra"}},
				To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret"}}}}
	}
	for _, tc := range []struct {
		name         string
		grants       []*gatewayv1beta1.ReferenceGrant
		wantResolved string
		wantServed   bool
	}{
		{"no grant", nil, "False/RefNotPermitted", false},
		{"the Gateway's grant is not inherited", []*gatewayv1beta1.ReferenceGrant{secretGrant("Gateway")}, "False/RefNotPermitted", false},
		{"a grant from ListenerSets", []*gatewayv1beta1.ReferenceGrant{secretGrant("ListenerSet")}, "True/ResolvedRefs", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewayWorld(nil, tc.grants...)
			in.Gateway.Spec.AllowedListeners = allowListeners(gatewayv1.NamespacesFromSame)
			in.ListenerSets = []*gatewayv1.ListenerSet{testSet("infra", "ls", 0, https)}
			res := Translate(in)
			if got := setListenerCond(res.ListenerSets, "infra/ls", "tls", gatewayv1.ListenerConditionResolvedRefs); got != tc.wantResolved {
				t.Errorf("ResolvedRefs = %s, want %s", got, tc.wantResolved)
			}
			if got := res.ListenerSets[0].Served(); got != tc.wantServed {
				t.Errorf("Served() = %v, want %v", got, tc.wantServed)
			}
		})
	}
}
