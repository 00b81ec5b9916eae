package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/dataplane"
	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// TestBackendsHTTPRouteAgainstAPIServer runs `backends httproute/...`, `backends grpcroute/...`
// and `announcers`
// against a real API server with the Gateway API CRDs: Gateway infra/web has a proxy pod whose
// admin port is a real data plane serving the Gateway table built from the same objects;
// infra/bare has no proxy pod (Programmed=False); infra/far's proxy is unreachable;
// infra/theirs is another controller's. Needs KUBEBUILDER_ASSETS (skips without).
func TestBackendsHTTPRouteAgainstAPIServer(t *testing.T) {
	kubeconfig, e := apiServer(t, "../../config/gateway-api/crds")
	c := e.c.(client.Client)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"metalgate-system", "infra", "app"} {
		must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	// announcers reads the speakers with the debug reader's token (config/rbac/debug-reader).
	for _, o := range manifestObjects(t, "../../config/rbac/debug-reader/debug_reader.yaml") {
		must(c.Create(ctx, o))
	}
	must(c.Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayController}}))
	must(c.Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}}))
	all := gwv1.NamespacesFromAll
	gateway := func(name, class string) *gwv1.Gateway {
		t.Helper()
		g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class),
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}}}}}
		must(c.Create(ctx, g))
		return g
	}
	web := gateway("web", "metalgate")
	bare := gateway("bare", "metalgate")
	bare.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Pending", Message: "proxy Deployment has no ready replica",
		LastTransitionTime: metav1.Now(), ObservedGeneration: bare.Generation}}
	must(c.Status().Update(ctx, bare))
	gateway("far", "metalgate")
	gateway("theirs", "other")

	route := func(name string, parents ...string) {
		t.Helper()
		prefix := gwv1.PathMatchPathPrefix
		hr := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: gwv1.HTTPRouteSpec{
			Hostnames: []gwv1.Hostname{"shop.test"},
			Rules: []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptrTo("/" + name)}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "shop", Port: ptrTo(gwv1.PortNumber(80))}}}}}}}}
		for _, p := range parents {
			hr.Spec.ParentRefs = append(hr.Spec.ParentRefs, gwv1.ParentReference{Namespace: ptrTo(gwv1.Namespace("infra")), Name: gwv1.ObjectName(p)})
		}
		must(c.Create(ctx, hr))
	}
	route("shop", "web", "bare", "far")
	route("orphan")
	route("theirs", "theirs")
	route("lonely", "bare")
	// A GRPCRoute of service pkg.Svc through web, and one through web's listener "grpc", which
	// web lacks.
	grpcRoute := func(name, section string) {
		t.Helper()
		gr := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptrTo(gwv1.Namespace("infra")), Name: "web"}}},
			Hostnames:       []gwv1.Hostname{"rpc.test"},
			Rules: []gwv1.GRPCRouteRule{{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptrTo("pkg.Svc")}}},
				BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "shop", Port: ptrTo(gwv1.PortNumber(80))}}}}}}}}
		if section != "" {
			gr.Spec.ParentRefs[0].SectionName = ptrTo(gwv1.SectionName(section))
		}
		must(c.Create(ctx, gr))
	}
	grpcRoute("rpc", "")
	grpcRoute("rpc-stray", "grpc")

	shop := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "shop"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	must(c.Create(ctx, shop))
	ready := true
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "shop-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "shop", discoveryv1.LabelManagedBy: table.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
	must(c.Create(ctx, slice))

	// The Gateways' proxy pods, labelled as controllers/gateway makes them; status written
	// here as a kubelet would.
	gwProxy := map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "gateway-proxy"}
	for _, gw := range []string{"web", "far"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "gw-" + gw + "-1", Labels: gwProxy},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "proxy", Image: "metalgate", Args: []string{"proxy", "--gateway=infra/" + gw}}}}}
		must(c.Create(ctx, p))
		p.Status.Phase = corev1.PodRunning
		must(c.Status().Update(ctx, p))
	}
	// The Gateway's LoadBalancer Service, announced by a speaker: announcers names the Gateway.
	gwSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "gw-infra-web",
		Annotations: map[string]string{contract.AnnotationGateway: "infra/web"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	must(c.Create(ctx, gwSvc))
	gwSvc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "100.64.0.9"}}
	must(c.Status().Update(ctx, gwSvc))
	speaker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "speaker-1",
		Labels: map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "speaker"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "speaker", Image: "metalgate"}}}}
	must(c.Create(ctx, speaker))
	speaker.Status.Phase = corev1.PodRunning
	must(c.Status().Update(ctx, speaker))
	speakerSrv := jsonServer(t, contract.DebugAnnouncementsPath, contract.Announcements{Node: "n1", Announcements: []contract.AnnouncementStatus{
		{Service: "metalgate-system/gw-infra-web", VIP: "100.64.0.9", Mode: contract.ModeLayer2, Where: []string{"eth0"}}}})

	// infra/web's proxy: a real data plane with the Gateway table of the objects above.
	var routes gwv1.HTTPRouteList
	must(c.List(ctx, &routes))
	in := gatewayapi.Input{Gateway: web, Services: []*corev1.Service{shop}, Slices: []*discoveryv1.EndpointSlice{slice},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "app"}}}}
	for i := range routes.Items {
		in.HTTPRoutes = append(in.HTTPRoutes, &routes.Items[i])
	}
	var grpcRoutes gwv1.GRPCRouteList
	must(c.List(ctx, &grpcRoutes))
	for i := range grpcRoutes.Items {
		in.GRPCRoutes = append(in.GRPCRoutes, &grpcRoutes.Items[i])
	}
	res := gatewayapi.Translate(in)
	tab, problems := res.Table, res.Problems
	if len(problems) > 0 {
		t.Fatalf("build: %v", problems)
	}
	dp, err := dataplane.New(dataplane.Options{Logger: logr.Discard()})
	must(err)
	dbg := dataplane.NewDebug(dp)
	dbg.Swap(tab)
	proxySrv := newServer(t, dataplane.AdminHandler(prometheus.NewRegistry(), nil, dbg.Route()))
	pods := httpPods{"metalgate-system/gw-web-1:10254": proxySrv, "metalgate-system/speaker-1:7472": speakerSrv}
	connect := connectWith(pods)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in stdout
		wantErr  string   // in stderr
	}{
		{"routed by one Gateway of three", []string{"backends", "httproute/shop", "-n", "app"}, 0, []string{
			"Gateway infra/web, proxy metalgate-system/gw-web-1 (node n1): table generation 1, applied",
			"shop.test  /shop (Prefix)  app/shop:80   -       10.244.1.5:8080  yes    yes      0",
			"Gateway infra/bare: no proxy pod (label app.kubernetes.io/component=gateway-proxy, argument --gateway=infra/bare) (Programmed=False, Pending: proxy Deployment has no ready replica)",
			"Gateway infra/far: proxy metalgate-system/gw-far-1 did not answer: pod metalgate-system/gw-far-1 port 10254: no route to host",
		}, ""},
		{"-o json: the answering proxy as an item, the rest on stderr", []string{"backends", "httproute/shop", "-n", "app", "-o", "json"}, 0, []string{
			"{\n  \"kind\": \"BackendList\",\n  \"items\": [\n    {\n      \"gateway\": \"infra/web\",\n      \"proxy\": \"metalgate-system/gw-web-1\",\n      \"node\": \"n1\",\n      \"generation\": 1,",
			`"host": "shop.test"`, `"address": "10.244.1.5:8080"`,
		}, "Gateway infra/far: proxy metalgate-system/gw-far-1 did not answer"},
		{"-o yaml of a route no proxy routes: nothing on stdout", []string{"backends", "httproute/app/lonely", "-o", "yaml"}, 1, nil,
			"no metalgate proxy routes HTTPRoute app/lonely: Gateway infra/bare: no proxy pod"},
		{"namespace/name form", []string{"backends", "httproutes.gateway.networking.k8s.io/app/shop"}, 0, []string{"app/shop:80"}, ""},
		{"no such route", []string{"backends", "httproute/app/missing"}, 1, nil, "HTTPRoute app/missing not found"},
		{"no parentRefs", []string{"backends", "httproute/orphan", "-n", "app"}, 1, nil, "HTTPRoute app/orphan is attached to no Gateway: its spec.parentRefs name none"},
		{"another controller's Gateway", []string{"backends", "httproute/app/theirs"}, 1,
			[]string{"Gateway infra/theirs: not metalgate's: its GatewayClass other has controller example.com/other"},
			"no metalgate proxy routes HTTPRoute app/theirs: Gateway infra/theirs: not metalgate's"},
		{"a Gateway without a proxy pod", []string{"backends", "httproute/app/lonely"}, 1, nil,
			"no metalgate proxy routes HTTPRoute app/lonely: Gateway infra/bare: no proxy pod"},
		{"a GRPCRoute", []string{"backends", "grpcroute/rpc", "-n", "app"}, 0, []string{
			"Gateway infra/web, proxy metalgate-system/gw-web-1 (node n1): table generation 1, applied",
			"rpc.test", "/pkg.Svc", "app/shop:80",
		}, ""},
		{"a GRPCRoute on a listener its Gateway lacks", []string{"backends", "grpcroutes.gateway.networking.k8s.io/app/rpc-stray"}, 1,
			[]string{"no routes: GRPCRoute app/rpc-stray is attached to no listener of Gateway infra/web"},
			"GRPCRoute app/rpc-stray is attached to no Gateway"},
		{"no such GRPCRoute", []string{"backends", "grpcroute/app/missing"}, 1, nil, "GRPCRoute app/missing not found"},
		{"announcers names the Gateway", []string{"announcers"}, 0, []string{
			"100.64.0.9  metalgate-system/gw-infra-web  infra/web  layer2  n1       eth0"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runWith(ctx, append(tc.args, "--kubeconfig", kubeconfig), &out, &errOut, connect)
			t.Logf("kubectl metalgate %s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out.String(), errOut.String())
			if code != tc.wantCode {
				t.Errorf("exit = %d, want %d", code, tc.wantCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q", w)
				}
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr lacks %q", tc.wantErr)
			}
			if strings.Contains(strings.Join(tc.args, " "), "-o ") && (strings.Contains(out.String(), "Gateway ") || (tc.wantCode != 0 && out.Len() > 0)) {
				t.Errorf("stdout has more than the document: %q", out.String())
			}
		})
	}
}

// jsonServer answers GET path with v as JSON, anything else 404.
func jsonServer(t *testing.T, path string, v any) *httptest.Server {
	return newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
}

// newServer starts a test server with h, closed when the test ends.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// connectWith connects as the plugin does, with the pods' ports served by pods.
func connectWith(pods podProxy) func(options) (*env, error) {
	return func(o options) (*env, error) {
		e, err := newEnv(o)
		if err == nil {
			e.pods = pods
		}
		return e, err
	}
}
