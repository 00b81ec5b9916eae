package dataplane

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/gatewayapi"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// debugInput is what TestDebugBackends builds its table from: Ingress shop/web routes a.test/
// to Service web (one ready endpoint that blocks, one not ready, one terminating) and
// a.test/api (Exact) to Service api (one ready endpoint where nothing listens); shop/other
// routes b.test to web too; other/foreign is of another controller's class.
func debugInput(blocking, closed string) proxyingress.Input {
	bp := func(b bool) *bool { return &b }
	pt := func(p networkingv1.PathType) *networkingv1.PathType { return &p }
	class := func(c string) *string { return &c }
	path := func(p string, t networkingv1.PathType, svc string, port networkingv1.ServiceBackendPort) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: pt(t),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: port}}}
	}
	rule := func(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
	}
	ingress := func(ns, name, cls string, created int64, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
			Spec: networkingv1.IngressSpec{IngressClassName: class(cls), Rules: rules}}
	}
	slice := func(svc, port string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		n, _ := strconv.Atoi(port)
		p := int32(n)
		var name *string
		if svc == "web" {
			name = class("http")
		}
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: name, Port: &p}}, Endpoints: eps}
	}
	ep := func(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: bp(ready), Serving: bp(serving), Terminating: bp(terminating)}}
	}
	bh, bport, _ := net.SplitHostPort(blocking)
	ch, cport, _ := net.SplitHostPort(closed)
	return proxyingress.Input{AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true,
		Classes: []*networkingv1.IngressClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "mg"}, Spec: networkingv1.IngressClassSpec{Controller: proxyingress.ControllerName}},
			{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}},
		},
		Ingresses: []*networkingv1.Ingress{
			ingress("shop", "web", "mg", 1, rule("a.test",
				path("/", networkingv1.PathTypePrefix, "web", networkingv1.ServiceBackendPort{Name: "http"}),
				path("/api", networkingv1.PathTypeExact, "api", networkingv1.ServiceBackendPort{Number: 80}))),
			ingress("shop", "other", "mg", 2, rule("b.test", path("/", networkingv1.PathTypePrefix, "web", networkingv1.ServiceBackendPort{Name: "http"}))),
			ingress("other", "foreign", "nginx", 3, rule("c.test", path("/", networkingv1.PathTypePrefix, "web", networkingv1.ServiceBackendPort{Name: "http"}))),
		},
		Services: []*corev1.Service{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		Slices: []*discoveryv1.EndpointSlice{
			slice("web", bport, ep(bh, true, true, false), ep("127.0.0.2", false, false, false), ep("127.0.0.3", false, true, true),
				ep("169.254.169.254", true, true, false)),
			slice("api", cport, ep(ch, true, true, false)),
		},
	}
}

// TestDebugBackends builds a table from objects, serves real requests through the data plane
// (one held open at its backend, one to an endpoint where nothing listens, which ejects it)
// and reads /debug/backends from the admin handler.
func TestDebugBackends(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	blocking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(blocking.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens here: connections are refused

	s, err := New(Options{Retries: -1, FailureThreshold: 1, EjectFor: time.Hour, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDebug(s)
	get, adminURL := debugBackends(t, d)
	if code, body := get("?ingress=shop/web"); code != http.StatusServiceUnavailable {
		t.Errorf("before the first table: %d %q, want 503", code, body)
	}

	tab, problems := proxyingress.Build(debugInput(blocking.Listener.Addr().String(), closed))
	for _, p := range problems {
		if p.Reason != table.ReasonRefusedEndpoint { // the link-local address, refused on purpose
			t.Fatalf("build: %v", p)
		}
	}
	d.Swap(tab)
	d.Swap(tab) // the second install is generation 2
	proxy := httptest.NewServer(s)
	t.Cleanup(proxy.Close)
	send := func(host, path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, proxy.URL+path, nil)
		req.Host = host
		return http.DefaultClient.Do(req)
	}
	resp, err := send("a.test", "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("request to the closed endpoint: %d, want 502", resp.StatusCode)
	}
	held := make(chan error, 1)
	go func() {
		resp, err := send("a.test", "/shop")
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	<-entered // the request is at the backend: in flight
	defer func() {
		close(release)
		if err := <-held; err != nil {
			t.Errorf("held request: %v", err)
		}
	}()

	code, body := get("?ingress=shop/web")
	if code != http.StatusOK {
		t.Fatalf("shop/web: %d %s", code, body)
	}
	var got contract.Backends
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if got.Applied.IsZero() || time.Since(got.Applied) > time.Minute {
		t.Errorf("applied = %v, want about now", got.Applied)
	}
	got.Applied = time.Time{}
	want := contract.Backends{Ingress: "shop/web", Generation: 2, Routes: []contract.BackendRoute{
		{Host: "a.test", Path: "/", PathType: "Prefix", Service: "shop/web", Port: "http", Protocol: "http", Balance: "round-robin",
			Endpoints: []contract.BackendEndpoint{
				{Address: blocking.Listener.Addr().String(), Ready: true, Serving: true, Routed: true, Healthy: true, InFlight: 1},
				{Address: "127.0.0.2:" + portOf(blocking.Listener.Addr().String())},
				{Address: "127.0.0.3:" + portOf(blocking.Listener.Addr().String()), Serving: true, Terminating: true},
				{Address: "169.254.169.254:" + portOf(blocking.Listener.Addr().String()), Ready: true, Serving: true,
					Refused: "link-local address"},
			}},
		{Host: "a.test", Path: "/api", PathType: "Exact", Service: "shop/api", Port: "80", Protocol: "http", Balance: "round-robin",
			Endpoints: []contract.BackendEndpoint{{Address: closed, Ready: true, Serving: true, Routed: true, Healthy: false}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shop/web (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, query string
		code        int
		body        string
	}{
		{"other Ingress of ours", "?ingress=shop/other", http.StatusOK, `"host": "b.test"`},
		{"another controller's class", "?ingress=other/foreign", http.StatusNotFound, "does not serve Ingress other/foreign"},
		{"no such Ingress", "?ingress=shop/nope", http.StatusNotFound, "does not serve Ingress shop/nope"},
		{"no parameter", "", http.StatusBadRequest, "want ?ingress=<namespace>/<name>"},
		{"no namespace", "?ingress=web", http.StatusBadRequest, "want ?ingress="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.query)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tc.query, code, body, tc.code, tc.body)
			}
		})
	}
	if resp, err := http.Post(adminURL+contract.DebugBackendsPath+"?ingress=shop/web", "text/plain", nil); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}

func portOf(hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		panic(fmt.Sprintf("split %q: %v", hostport, err))
	}
	return p
}

// TestDebugBackendsHTTPRoute reads /debug/backends?httproute= from a Gateway proxy's table
// (gatewayTable): the routes of an attached HTTPRoute with their endpoints, none for a route
// whose parentRef names the Gateway but which no listener admits, 404 for what the Gateway
// does not serve and for Ingresses; and, in a second table, a weighted split with an
// unresolved backendRef.
func TestDebugBackendsHTTPRoute(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(backend.Close)
	addr := backend.Listener.Addr().String()
	s, err := New(Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDebug(s)
	get, _ := debugBackends(t, d)
	decode := func(query string) contract.Backends {
		t.Helper()
		code, body := get(query)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", query, code, body)
		}
		var got contract.Backends
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		got.Applied = time.Time{}
		return got
	}
	if code, body := get("?httproute=infra/api"); code != http.StatusServiceUnavailable {
		t.Errorf("before the first table: %d %q, want 503", code, body)
	}
	d.Swap(gatewayTable(t, 8080, 8081, map[string]string{"api": addr}))

	ready := []contract.BackendEndpoint{{Address: addr, Ready: true, Serving: true, Routed: true, Healthy: true}}
	want := contract.Backends{HTTPRoute: "infra/api", Generation: 1, Routes: []contract.BackendRoute{
		{Path: "/api", PathType: "Prefix", Service: "infra/api", Port: "80", Protocol: "http", Balance: "round-robin", Endpoints: ready}}}
	if diff := cmp.Diff(want, decode("?httproute=infra/api")); diff != "" {
		t.Errorf("infra/api (-want +got):\n%s", diff)
	}
	wantNone := contract.Backends{HTTPRoute: "other/steal", Generation: 1, Routes: []contract.BackendRoute{}}
	if diff := cmp.Diff(wantNone, decode("?httproute=other/steal")); diff != "" {
		t.Errorf("other/steal, not admitted (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name, query string
		code        int
		body        string
	}{
		{"a route of another Gateway", "?httproute=infra/nope", http.StatusNotFound, "does not serve HTTPRoute infra/nope (no parentRef of it names this proxy's Gateway"},
		{"an Ingress asked of a Gateway proxy", "?ingress=infra/api", http.StatusNotFound, "does not serve Ingress infra/api (it is a Gateway's proxy)"},
		{"both parameters", "?ingress=infra/api&httproute=infra/api", http.StatusBadRequest, "want ?ingress=<namespace>/<name>, ?httproute=<namespace>/<name> or ?grpcroute="},
		{"no namespace", "?httproute=api", http.StatusBadRequest, "want ?ingress="},
		{"empty", "?httproute=", http.StatusBadRequest, "want ?ingress="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.query)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tc.query, code, body, tc.code, tc.body)
			}
		})
	}

	// A weighted split, 3:1, whose second backendRef names no Service.
	in := gatewayapi.Input{Gateway: &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{{Name: "main", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}}}},
		AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true,
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}}}
	ref := func(svc string, w int32) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{Weight: ptr(w),
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}
	}
	in.HTTPRoutes = []*gatewayv1.HTTPRoute{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "split"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
		Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{ref("api", 3), ref("gone", 1)}}}}}}
	in.Services = []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}}
	h, p, _ := net.SplitHostPort(addr)
	pn, _ := strconv.Atoi(p)
	in.Slices = []*discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(pn))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}}}
	res := gatewayapi.Translate(in)
	tab, _ := res.Table, res.Problems // the unresolved ref is a problem on purpose
	d.Swap(tab)
	wantSplit := contract.Backends{HTTPRoute: "infra/split", Generation: 2, Routes: []contract.BackendRoute{
		{Path: "/", PathType: "Prefix", Service: "infra/api", Port: "80", Protocol: "http", Balance: "round-robin", Weight: 75, Endpoints: ready},
		{Path: "/", PathType: "Prefix", Weight: 25, Unresolved: true, Endpoints: []contract.BackendEndpoint{}},
	}}
	if diff := cmp.Diff(wantSplit, decode("?httproute=infra/split")); diff != "" {
		t.Errorf("infra/split (-want +got):\n%s", diff)
	}
}

// debugBackends serves d on an admin handler and returns a getter of its backends endpoint
// (the status and body of GET /debug/backends with query) and the handler's URL.
func debugBackends(t *testing.T, d *Debug) (get func(query string) (int, string), url string) {
	t.Helper()
	admin := httptest.NewServer(AdminHandler(prometheus.NewRegistry(), nil, d.Route()))
	t.Cleanup(admin.Close)
	return func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(admin.URL + contract.DebugBackendsPath + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}, admin.URL
}
