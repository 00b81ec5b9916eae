package dataplane

import (
	"net"
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// gatewayTable is a Gateway table (Input.Gateway set) for Gateway infra/gw with one HTTP
// listener on port (routes from its own namespace only) and one on otherPort (any namespace):
// HTTPRoute infra/api sends PathPrefix /api with header x-team: a on port to backend "api";
// HTTPRoute other/steal (a namespace the first listener does not admit) claims the same on
// port; HTTPRoute infra/elsewhere serves /else on otherPort only.
func gatewayTable(t *testing.T, port, otherPort int32, backends map[string]string) *table.Table {
	t.Helper()
	same, all := gatewayv1.NamespacesFromSame, gatewayv1.NamespacesFromAll
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{
			{Name: "main", Port: port, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &same}}},
			{Name: "other", Port: otherPort, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}},
		}}}
	in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true}
	route := func(ns, name, section, prefix, svc string, headers ...gatewayv1.HTTPHeaderMatch) {
		m := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(prefix)}, Headers: headers}
		in.HTTPRoutes = append(in.HTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
					Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw", SectionName: ptr(gatewayv1.SectionName(section))}}},
				Rules: []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{m},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}}}}}})
	}
	team := gatewayv1.HTTPHeaderMatch{Name: "X-Team", Value: "a"}
	route("infra", "api", "main", "/api", "api", team)
	route("other", "steal", "main", "/", "api")
	route("infra", "elsewhere", "other", "/else", "api")
	addBackends(t, &in, backends, "infra", "other")
	res := gatewayapi.Translate(in)
	tab, problems := res.Table, res.Problems
	if len(problems) > 0 {
		t.Fatalf("build gateway table: %v", problems)
	}
	if tab.Gateway == nil {
		t.Fatal("a table built with Input.Gateway has no Gateway status")
	}
	return tab
}

// listenerGateway is Gateway infra/gw with one HTTP listener, admitting routes of every
// namespace, on the port of the proxy's address addr.
func listenerGateway(t *testing.T, addr string) *gatewayv1.Gateway {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	all := gatewayv1.NamespacesFromAll
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{{Name: "h", Port: gatewayv1.PortNumber(port),
			Protocol: gatewayv1.HTTPProtocolType, AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}}}}
}

// addBackends adds to in each namespace and, in each, a Service per backend (port 80) whose
// one ready endpoint is the backend's address.
func addBackends(t *testing.T, in *gatewayapi.Input, backends map[string]string, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for name, addr := range backends {
			h, p, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			pn, err := strconv.Atoi(p)
			if err != nil {
				t.Fatal(err)
			}
			in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
			in.Slices = append(in.Slices, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(pn))}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
			})
		}
	}
}

// TestGatewayRouting: with a Gateway table the data plane routes by the port the connection
// arrived on and the whole request (Table.Match), not by Ingress host and path.
func TestGatewayRouting(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		api := echoBackend(t, "api")
		// Start on an Ingress table, learn the proxy's plain port, then swap in the
		// Gateway table whose listener is that port (the TLS port stands for another
		// listener port).
		s, httpAddr, httpsAddr := startProxy(t, opts, buildTable(t))
		port := func(addr string) int32 {
			ap, err := net.ResolveTCPAddr("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			return int32(ap.Port)
		}
		s.Swap(gatewayTable(t, port(httpAddr), port(httpsAddr), map[string]string{"api": hostport(api)}))
		c := &http.Client{}
		for _, tc := range []struct {
			name, path string
			hdr        map[string]string
			want       int
		}{
			// Hostile first: other/steal names the listener, which admits its own
			// namespace only, so its catch-all "/" serves nothing.
			{"route from a namespace the listener does not allow", "/x", nil, http.StatusNotFound},
			{"header match missing", "/api/v1", nil, http.StatusNotFound},
			{"header value differs", "/api/v1", map[string]string{"X-Team": "b"}, http.StatusNotFound},
			{"route of another listener port", "/else", nil, http.StatusNotFound},
			{"prefix by element, not by string", "/apix", map[string]string{"X-Team": "a"}, http.StatusNotFound},
			{"prefix and header match", "/api/v1", map[string]string{"X-Team": "a"}, http.StatusOK},
		} {
			resp, e := get(t, c, "http://"+httpAddr+tc.path, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("%s: GET %s → %d, want %d", tc.name, tc.path, resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusOK && (e.Backend != "api" || e.Path != tc.path) {
				t.Errorf("%s: reached %q with path %q, want api with %q", tc.name, e.Backend, e.Path, tc.path)
			}
		}
		c.CloseIdleConnections()
		if t.Failed() {
			t.Logf("gateway status: %+v", s.current.Load().table.Gateway)
		}
	})
}
