package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

func listenerSet(ns, name, gwNS, gwName string, ls ...gwv1.ListenerEntry) *gwv1.ListenerSet {
	n := gwv1.Namespace(gwNS)
	return &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.ListenerSetSpec{ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gwName), Namespace: &n}, Listeners: ls}}
}

func entry(name string, port int32, host string) gwv1.ListenerEntry {
	e := gwv1.ListenerEntry{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType}
	if host != "" {
		h := gwv1.Hostname(host)
		e.Hostname = &h
	}
	return e
}

func onListenerSet(ns, name, section string) gwv1.ParentReference {
	g, k, n := gwv1.Group(gwv1.GroupName), gwv1.Kind("ListenerSet"), gwv1.Namespace(ns)
	ref := gwv1.ParentReference{Group: &g, Kind: &k, Namespace: &n, Name: gwv1.ObjectName(name)}
	if section != "" {
		s := gwv1.SectionName(section)
		ref.SectionName = &s
	}
	return ref
}

// listenerSetState is "Accepted=<status>/<reason> Programmed=<status>/<reason>" of
// ListenerSet ns/name, then " <listener>: Accepted=… Programmed=… Conflicted=… routes=<n>"
// for the listeners named (conditions observed at its generation, or the mismatch is said).
func listenerSetState(t *testing.T, ns, name string, listeners ...string) string {
	t.Helper()
	var ls gwv1.ListenerSet
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ls); err != nil {
		t.Fatal(err)
	}
	conds := func(cs []metav1.Condition, types ...string) string {
		out := ""
		for _, typ := range types {
			c := findCondition(cs, typ)
			switch {
			case c == nil:
				out += " " + typ + "=none"
			case c.ObservedGeneration != ls.Generation:
				out += fmt.Sprintf(" %s(generation %d of %d)", typ, c.ObservedGeneration, ls.Generation)
			default:
				out += fmt.Sprintf(" %s=%s/%s", typ, c.Status, c.Reason)
			}
		}
		return out
	}
	out := conds(ls.Status.Conditions, "Accepted", "Programmed")[1:]
	for _, l := range listeners {
		i := slices.IndexFunc(ls.Status.Listeners, func(s gwv1.ListenerEntryStatus) bool { return string(s.Name) == l })
		if i < 0 {
			out += " " + l + ": none"
			continue
		}
		s := ls.Status.Listeners[i]
		out += fmt.Sprintf(" %s:%s routes=%d", l, conds(s.Conditions, "Accepted", "Programmed", "Conflicted"), s.AttachedRoutes)
	}
	return out
}

// routeParentFor is metalgate's parent status on HTTPRoute ns/name for parentRef ref, as
// "Accepted=<status>/<reason>", or "".
func routeParentFor(t *testing.T, ns, name string, ref gwv1.ParentReference) string {
	t.Helper()
	var hr gwv1.HTTPRoute
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &hr); err != nil {
		t.Fatal(err)
	}
	for _, p := range hr.Status.Parents {
		if p.ControllerName != gateway.ControllerName || p.ParentRef.Name != ref.Name || p.ParentRef.Kind == nil || *p.ParentRef.Kind != *ref.Kind {
			continue
		}
		if c := findCondition(p.Conditions, "Accepted"); c != nil {
			return fmt.Sprintf("Accepted=%s/%s", c.Status, c.Reason)
		}
	}
	return ""
}

func servicePorts(t *testing.T, ns, name string) []int32 {
	t.Helper()
	var out []int32
	for _, s := range gatewayServices(t, ns, name) {
		for _, p := range s.Spec.Ports {
			out = append(out, p.Port)
		}
	}
	return out
}

// TestListenerSetStatus: the controller admits ListenerSets per the Gateway's
// spec.allowedListeners and writes their status. Hostile first: a ListenerSet of a namespace
// the Gateway does not admit is NotAllowed and its port is not opened on the Gateway's
// Service; a listener that takes the Gateway's own port and hostname is Conflicted and not
// Programmed; a route attached through the admitted ListenerSet is Accepted and counted on
// its listener; the Gateway counts the ListenerSets attached; a Service made after a route
// attached only through the ListenerSet resolves that route's backend. Admitting every namespace
// (allowedListeners All) then opens the other ListenerSet's port; deleting a ListenerSet takes
// metalgate's route status for it away.
func TestListenerSetStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ctx := context.Background()
	ns, other := namespace(t), namespace(t)
	gatewayClass(t, "gc-listenersets", gateway.ControllerName)
	pool(t, "gw-listenersets", "100.64.53.0/30")
	same := gwv1.NamespacesFromSame
	newGateway(t, ns, "web", "gc-listenersets", poolAnnotation("gw-listenersets"), listener("http", gwv1.HTTPProtocolType, 80),
		func(g *gwv1.Gateway) {
			g.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &same}}
		})
	backendService(t, ns, "app")
	create(t, listenerSet(ns, "mine", ns, "web", entry("extra", 8080, "a.example.com"), entry("clash", 80, "")))
	create(t, listenerSet(other, "intruder", ns, "web", entry("side", 9090, "")))
	mineRef := onListenerSet(ns, "mine", "extra")
	create(t, httpRoute(ns, "via-set", []gwv1.ParentReference{mineRef}, "app"))

	wait := 30 * time.Second
	eventually(t, wait, func() string {
		want := "Accepted=True/ListenersNotValid Programmed=True/Programmed" +
			" extra: Accepted=True/Accepted Programmed=True/Programmed Conflicted=False/NoConflicts routes=1" +
			" clash: Accepted=False/HostnameConflict Programmed=False/HostnameConflict Conflicted=True/HostnameConflict routes=0"
		if got := listenerSetState(t, ns, "mine", "extra", "clash"); got != want {
			return fmt.Sprintf("ListenerSet mine:\n got %s\nwant %s", got, want)
		}
		if got, want := listenerSetState(t, other, "intruder"), "Accepted=False/NotAllowed Programmed=False/NotAllowed"; got != want {
			return fmt.Sprintf("ListenerSet intruder: %s, want %s", got, want)
		}
		if got := routeParentFor(t, ns, "via-set", mineRef); got != "Accepted=True/Accepted" {
			return fmt.Sprintf("route via-set, parent ListenerSet mine: %q", got)
		}
		if g := getGateway(t, ns, "web"); g.Status.AttachedListenerSets == nil || *g.Status.AttachedListenerSets != 1 {
			return fmt.Sprintf("Gateway attachedListenerSets %v, want 1", g.Status.AttachedListenerSets)
		}
		if got := servicePorts(t, ns, "web"); !slices.Equal(got, []int32{80, 8080}) {
			return fmt.Sprintf("Service ports %v, want [80 8080] (the Gateway's and the admitted ListenerSet's; not the intruder's 9090)", got)
		}
		return ""
	})

	// A route attached only through the ListenerSet, to a Service made later: the Service's
	// creation reaches the ListenerSet's Gateway, which resolves the route's backend.
	create(t, httpRoute(ns, "late", []gwv1.ParentReference{mineRef}, "later"))
	eventually(t, wait, func() string {
		if got := ourRouteParent(t, &gwv1.HTTPRoute{}, ns, "late", ns, "mine"); got != "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound" {
			return fmt.Sprintf("route late, parent ListenerSet mine, before its Service: %q", got)
		}
		return ""
	})
	backendService(t, ns, "later")
	eventually(t, wait, func() string {
		if got := ourRouteParent(t, &gwv1.HTTPRoute{}, ns, "late", ns, "mine"); got != "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs" {
			return fmt.Sprintf("route late, parent ListenerSet mine, after its Service was made: %q", got)
		}
		return ""
	})

	all := gwv1.NamespacesFromAll
	if err := updateGateway(t, ns, "web", func(g *gwv1.Gateway) { g.Spec.AllowedListeners.Namespaces.From = &all }); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if got, want := listenerSetState(t, other, "intruder", "side"), "Accepted=True/Accepted Programmed=True/Programmed side: Accepted=True/Accepted Programmed=True/Programmed Conflicted=False/NoConflicts routes=0"; got != want {
			return fmt.Sprintf("ListenerSet of the other namespace once all are admitted: %s, want %s", got, want)
		}
		if got := servicePorts(t, ns, "web"); !slices.Equal(got, []int32{80, 8080, 9090}) {
			return fmt.Sprintf("Service ports %v, want [80 8080 9090]", got)
		}
		if g := getGateway(t, ns, "web"); g.Status.AttachedListenerSets == nil || *g.Status.AttachedListenerSets != 2 {
			return fmt.Sprintf("Gateway attachedListenerSets %v, want 2", g.Status.AttachedListenerSets)
		}
		return ""
	})

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return k8sClient.Delete(ctx, listenerSet(ns, "mine", ns, "web"))
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if got := routeParentFor(t, ns, "via-set", mineRef); got != "" {
			return fmt.Sprintf("route via-set keeps metalgate's status for the deleted ListenerSet: %q", got)
		}
		if got := servicePorts(t, ns, "web"); !slices.Equal(got, []int32{80, 9090}) {
			return fmt.Sprintf("Service ports %v, want [80 9090] once ListenerSet mine is gone", got)
		}
		return ""
	})
}
