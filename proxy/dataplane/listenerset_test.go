package dataplane

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// listenerSetTable is a table for Gateway infra/gw (listener "main" for gw.example.com on the
// port of the proxy's address addr, ListenerSets of its own namespace admitted) with three
// ListenerSets on that port: infra/extra (ls.example.com, admitted), other/intruder
// (evil.example.com, of a namespace the Gateway does not admit) and infra/stealer (younger
// than the Gateway's listener, for gw.example.com: HostnameConflict). Each has a route to
// its own backend: gw, ls, evil (the intruder's and the stealer's).
func listenerSetTable(t *testing.T, addr string, backends map[string]string) *table.Table {
	t.Helper()
	gw := listenerGateway(t, addr)
	port := gw.Spec.Listeners[0].Port
	gw.Spec.Listeners[0].Hostname = ptr(gatewayv1.Hostname("gw.example.com"))
	same := gatewayv1.NamespacesFromSame
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &same}}
	in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	all := gatewayv1.NamespacesFromAll
	set := func(ns, name, host string, age int) {
		in.ListenerSets = append(in.ListenerSets, &gatewayv1.ListenerSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))},
			Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "gw", Namespace: ptr(gatewayv1.Namespace("infra"))},
				Listeners: []gatewayv1.ListenerEntry{{Name: "l", Port: port, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptr(gatewayv1.Hostname(host)),
					AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}}}})
	}
	set("infra", "extra", "ls.example.com", 0)
	set("other", "intruder", "evil.example.com", 0)
	set("infra", "stealer", "gw.example.com", 1)
	route := func(ns, name, svc string, parent gatewayv1.ParentReference) {
		in.HTTPRoutes = append(in.HTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}}}}}})
	}
	onSet := func(ns, name string) gatewayv1.ParentReference {
		return gatewayv1.ParentReference{Group: ptr(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr(gatewayv1.Kind("ListenerSet")),
			Namespace: ptr(gatewayv1.Namespace(ns)), Name: gatewayv1.ObjectName(name)}
	}
	route("infra", "gw-route", "gw", gatewayv1.ParentReference{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"})
	route("infra", "ls-route", "ls", onSet("infra", "extra"))
	route("other", "evil-route", "evil", onSet("other", "intruder"))
	route("infra", "steal-route", "evil", onSet("infra", "stealer"))
	addBackends(t, &in, backends, "infra", "other")
	res := gatewayapi.Translate(in)
	if len(res.Problems) > 0 {
		t.Fatalf("build gateway table: %v", res.Problems)
	}
	return res.Table
}

// TestGatewayListenerSetRouting: a ListenerSet's listener is served like the Gateway's own,
// on both forwarding paths; a ListenerSet the Gateway does not admit, and a listener that
// conflicts with the Gateway's, never get a request.
func TestGatewayListenerSetRouting(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		backends := map[string]string{}
		for _, name := range []string{"gw", "ls", "evil"} {
			backends[name] = hostport(echoBackend(t, name))
		}
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		s.Swap(listenerSetTable(t, httpAddr, backends))
		c := &http.Client{}
		for _, tc := range []struct {
			name, host string
			want       int
			backend    string
		}{
			// Hostile first.
			{"ListenerSet of a namespace the Gateway does not admit", "evil.example.com", http.StatusNotFound, ""},
			{"ListenerSet listener on the Gateway listener's hostname", "gw.example.com", http.StatusOK, "gw"},
			{"hostname no listener has", "other.example.com", http.StatusNotFound, ""},
			{"admitted ListenerSet", "ls.example.com", http.StatusOK, "ls"},
		} {
			resp, e := get(t, c, "http://"+httpAddr+"/x", map[string]string{"Host": tc.host})
			if resp.StatusCode != tc.want || e.Backend != tc.backend {
				t.Errorf("%s: GET %s → %d from %q, want %d from %q", tc.name, tc.host, resp.StatusCode, e.Backend, tc.want, tc.backend)
			}
		}
		c.CloseIdleConnections()
	})
}
