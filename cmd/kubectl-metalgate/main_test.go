package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/adminauth"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/dataplane"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"no command", nil, 2, "Usage:"},
		{"unknown", []string{"frob"}, 2, `unknown command "frob"`},
		{"two commands", []string{"pools", "check"}, 2, `unexpected argument "check"`},
		{"backends without an Ingress", []string{"backends"}, 2, "backends: want 1 argument(s), got 0"},
		{"backends with two", []string{"backends", "a/b", "-n", "x", "c"}, 2, `unexpected argument "c"`},
		{"bad kubeconfig", []string{"pools", "--kubeconfig", "/nonexistent"}, 1, "load kubeconfig"},
		{"unknown flag", []string{"pools", "--frob"}, 2, "unknown flag: --frob"},
		{"unknown shorthand", []string{"pools", "-z"}, 2, "unknown shorthand flag: 'z' in -z"},
		{"-n without a value", []string{"allocations", "-n"}, 2, "flag needs an argument: 'n' in -n"},
		{"-n for pools, once metalgate's namespace", []string{"pools", "-n", "metalgate-system"}, 2, "flag -n/--namespace: pools reads no objects of one namespace; metalgate's own namespace is --metalgate-namespace"},
		{"-n for check", []string{"check", "--namespace=metalgate-system"}, 2, "flag -n/--namespace: check"},
		{"-n for migrate", []string{"migrate", "-n", "mg"}, 2, "flag -n/--namespace: migrate"},
		{"-A for pools", []string{"pools", "-A"}, 2, "flag -A/--all-namespaces: pools"},
		{"-A for backends", []string{"backends", "web", "-A"}, 2, "flag -A/--all-namespaces: backends names one object"},
		{"empty -n", []string{"allocations", "-n", ""}, 2, "flag -n/--namespace: empty namespace"},
		{"empty --metalgate-namespace", []string{"pools", "--metalgate-namespace="}, 2, "flag --metalgate-namespace: empty namespace"},
		{"bad --request-timeout", []string{"pools", "--request-timeout", "soon"}, 2, `flag --request-timeout: "soon" is not a duration`},
		{"negative --request-timeout", []string{"pools", "--request-timeout=-1s"}, 2, `flag --request-timeout: "-1s"`},
		{"migrate flag elsewhere", []string{"pools", "--strict"}, 2, "flag --strict is only for migrate"},
		{"unknown -o", []string{"pools", "-o", "xml"}, 2, `flag -o/--output: unknown format "xml"; allowed: json, yaml, wide`},
		{"-o name", []string{"allocations", "--output=name"}, 2, `flag -o/--output: unknown format "name"; allowed: json, yaml, wide`},
		{"-o for check", []string{"check", "-o", "json"}, 2, "flag -o/--output: check prints no listing"},
		{"-o for migrate", []string{"migrate", "-o", "yaml"}, 2, "flag -o/--output: migrate prints no listing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(context.Background(), tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit = %d, want %d (stderr %q)", got, tc.want, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
}

// apiServer starts a real kube-apiserver + etcd (internal/testenv) with metalgate's CRDs and
// those of crdDirs (skipping the test without KUBEBUILDER_ASSETS), and returns a kubeconfig for
// it and the plugin's env connected through that kubeconfig.
func apiServer(t *testing.T, crdDirs ...string) (string, *env) {
	t.Helper()
	dirs := []string{testenv.MetalgateCRDs}
	for _, d := range crdDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, abs)
	}
	kubeconfig := testenv.Start(t, testenv.Options{CRDs: dirs}).Kubeconfig
	e, err := newEnv(kubeconfigOptions(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig, e
}

// httpPods is a podProxy that sends each request to a test server standing in for a pod's
// port ("namespace/pod:port"); a pod without one is unreachable, as when the API server
// cannot reach a kubelet.
type httpPods map[string]*httptest.Server

func (h httpPods) Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values, header http.Header) (int, []byte, error) {
	srv := h[fmt.Sprintf("%s/%s:%d", namespace, pod, port)]
	if srv == nil {
		return 0, nil, fmt.Errorf("pod %s/%s port %d: no route to host", namespace, pod, port)
	}
	u := srv.URL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestAgainstAPIServer runs each command against a real API server holding pools, an
// advertisement, Services whose status is written as the controller would, speaker and proxy
// pods (their HTTP answers served by test servers: the speaker's fixed JSON, the proxy's by a
// real data plane with a table built from the same objects), Ingresses and a StatusConflict
// event.
func TestAgainstAPIServer(t *testing.T) {
	kubeconfig, e := apiServer(t)
	c := e.c.(client.Client)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"metalgate-system", "shop", "tenant"} {
		must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	announced := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "announced"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"100.64.0.0/16", "2001:db8:100::/64"}}}
	silent := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "silent"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/28"}}}
	must(c.Create(ctx, announced))
	must(c.Create(ctx, silent))
	announced.Status = v1alpha1.IPAddressPoolStatus{AssignedIPv4: 3, AvailableIPv4: 65533, AvailableIPv6: 1000}
	must(c.Status().Update(ctx, announced))
	must(c.Create(ctx, &v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "l2"},
		Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"announced"}}}))

	// LoadBalancer Services: web and the proxy's own are announced, dark is not, stuck has no
	// address.
	proxyLabels := map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "proxy"}
	lb := func(ns, name, ip string, selector map[string]string) {
		t.Helper()
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: selector,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		must(c.Create(ctx, s))
		if ip == "" {
			return
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		must(c.Status().Update(ctx, s))
		s.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: "announced"}
		must(c.Update(ctx, s))
	}
	lb("default", "web", "100.64.0.0", nil)
	lb("default", "stuck", "", nil)
	lb("default", "dark", "100.64.0.1", nil)
	lb("metalgate-system", "metalgate-proxy", "100.64.0.2", proxyLabels)

	// Pods: no kubelet runs them, so their status is written here as a kubelet would.
	pod := func(ns, name, node string, labels map[string]string, phase corev1.PodPhase, args ...string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "metalgate", Args: args}}}}
		must(c.Create(ctx, p))
		p.Status.Phase = phase
		if phase == corev1.PodRunning {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		must(c.Status().Update(ctx, p))
	}
	speaker := map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "speaker"}
	pod("metalgate-system", "speaker-1", "n1", speaker, corev1.PodRunning, "speaker")
	pod("metalgate-system", "speaker-2", "n2", speaker, corev1.PodRunning, "speaker") // unreachable
	pod("metalgate-system", "speaker-3", "n3", speaker, corev1.PodPending, "speaker")
	pod("metalgate-system", "metalgate-proxy-1", "n2", proxyLabels, corev1.PodRunning, "proxy", "--admin-bind-address=:10254")
	// A tenant's proxy of its own class that is not running.
	pod("tenant", "metalgate-proxy-t", "n3", proxyLabels, corev1.PodPending, "proxy", "--controller-name=example.com/tenant", "--watch-namespace=tenant")

	// Ingresses: web is served and holds the proxy's VIP; rival holds a node IP; lost names a
	// class that does not exist; t is of the tenant's class that no running proxy serves.
	classes := []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}, Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/tenant"}},
	}
	for _, cl := range classes {
		must(c.Create(ctx, cl))
	}
	prefix := networkingv1.PathTypePrefix
	newIngress := func(name, class, ip string) *networkingv1.Ingress {
		t.Helper()
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: name + ".test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
				}}}}}}}}
		if class == "tenant" {
			i.Namespace = "tenant"
		}
		must(c.Create(ctx, i))
		if ip != "" {
			i.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: ip}}
			must(c.Status().Update(ctx, i))
		}
		return i
	}
	web := newIngress("web", "metalgate", "100.64.0.2")
	newIngress("rival", "metalgate", "198.51.100.11")
	newIngress("lost", "nope", "")
	newIngress("t", "tenant", "")
	shopSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	must(c.Create(ctx, shopSvc))
	ready, notReady := true, false
	port := int32(8080)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "shop", discoveryv1.LabelManagedBy: table.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.244.2.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
			{Addresses: []string{"239.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}, // the API server refuses link-local and loopback itself
		}}
	must(c.Create(ctx, slice))
	now := time.Now()
	must(c.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web.conflict"},
		InvolvedObject: corev1.ObjectReference{Kind: "Ingress", APIVersion: "networking.k8s.io/v1", Namespace: "shop", Name: "web", UID: web.UID},
		Reason:         "StatusConflict", Type: corev1.EventTypeWarning, Count: 1, Source: corev1.EventSource{Component: "metalgate-proxy"},
		Message:        `status.loadBalancer of this Ingress is being overwritten by field manager "rival"`,
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now)}))

	// The speaker on n1 announces web and the proxy by layer 2; the proxy serves a table built
	// from the objects above. The speaker's port is guarded as the speaker guards it (host
	// network: loopback is no credential), reviewing tokens with this API server, where the
	// debug reader is installed as config/ ships it; "nobody" may read nothing.
	for _, o := range manifestObjects(t, "../../config/rbac/debug-reader/debug_reader.yaml") {
		must(c.Create(ctx, o))
	}
	must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "nobody"}}))
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	must(err)
	reviewer, err := adminauth.NewKubeReviewer(restCfg, nil)
	must(err)
	speakerGuard, err := adminauth.New(adminauth.Options{HostNetwork: true, Reviewer: reviewer, OpenPaths: []string{}})
	must(err)
	speakerSrv := httptest.NewServer(speakerGuard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != contract.DebugAnnouncementsPath {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(contract.Announcements{Node: "n1", Announcements: []contract.AnnouncementStatus{
			{Service: "default/web", VIP: "100.64.0.0", Mode: contract.ModeLayer2, Where: []string{"eth0"}},
			{Service: "metalgate-system/metalgate-proxy", VIP: "100.64.0.2", Mode: contract.ModeLayer2, Where: []string{"eth0"}},
		}})
	})))
	t.Cleanup(speakerSrv.Close)
	dp, err := dataplane.New(dataplane.Options{Logger: logr.Discard()})
	must(err)
	dbg := dataplane.NewDebug(dp)
	var ings networkingv1.IngressList
	must(c.List(ctx, &ings))
	in := ingress.Input{Classes: classes, Services: []*corev1.Service{shopSvc}, Slices: []*discoveryv1.EndpointSlice{slice}}
	for i := range ings.Items {
		in.Ingresses = append(in.Ingresses, &ings.Items[i])
	}
	tab, _ := ingress.Build(in)
	dbg.Swap(tab)
	proxySrv := httptest.NewServer(dataplane.AdminHandler(prometheus.NewRegistry(), nil, dbg.Route()))
	t.Cleanup(proxySrv.Close)
	pods := httpPods{"metalgate-system/speaker-1:7472": speakerSrv, "metalgate-system/metalgate-proxy-1:10254": proxySrv}
	connect := connectWith(pods)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
		dontWant []string
	}{
		{"pools", []string{"pools"}, 0, []string{"announced  IPv4    3", "announced  IPv6    0", "silent"}, nil},
		{"pools of another metalgate namespace", []string{"pools", "--metalgate-namespace", "elsewhere"}, 0, []string{"POOL"}, []string{"announced", "silent"}},
		{"allocations of one namespace", []string{"allocations", "-n", "default"}, 0, []string{
			"default    web      100.64.0.0  announced  layer2 n1",
		}, []string{"metalgate-system"}},
		{"allocations of every namespace", []string{"-A", "allocations", "-n", "default"}, 0, []string{
			"default           web              100.64.0.0  announced  layer2 n1",
			"metalgate-system  metalgate-proxy  100.64.0.2  announced  layer2 n1",
		}, nil},
		{"pools wide", []string{"pools", "-o", "wide"}, 0, []string{"AVOID-BUGGY-IPS  ADDRESS-SHARING  PRIORITY", "WithinNamespace"}, nil},
		{"allocations wide", []string{"allocations", "-o", "wide", "-n", "default"}, 0, []string{"TRAFFIC-POLICY  PORTS", "IP-FAMILIES"}, nil},
		{"announcers yaml", []string{"announcers", "-o", "yaml"}, 0, []string{"items:\n- mode: layer2\n  nodes:\n  - n1\n  pool: announced\n  service: default/web\n  via:\n  - eth0\n  vip: 100.64.0.0\n", "\nkind: AnnouncerList\n"}, []string{"warning:"}},
		{"announcers of one namespace", []string{"announcers", "--namespace=metalgate-system"}, 0, []string{
			"100.64.0.2  metalgate-system/metalgate-proxy  -        layer2  n1       eth0",
		}, []string{"default/web"}},
		{"allocations", []string{"allocations"}, 0, []string{
			"default           dark             100.64.0.1  announced  -          -",
			"default           stuck            <pending>   -          -",
			"default           web              100.64.0.0  announced  layer2 n1",
			"metalgate-system  metalgate-proxy  100.64.0.2  announced  layer2 n1",
		}, nil},
		{"announcers", []string{"announcers"}, 0, []string{
			"100.64.0.0  default/web                       -        layer2  n1       eth0",
			"100.64.0.2  metalgate-system/metalgate-proxy  -        layer2  n1       eth0",
			"warning: speaker speaker-2 on node n2 did not answer: pod metalgate-system/speaker-2 port 7472: no route to host",
			"warning: speaker speaker-3 on node n3 did not answer: pod is pending",
			"warning: VIP 100.64.0.1 of Service default/dark is announced by no node that answered (2 speaker(s) did not)",
		}, nil},
		{"announcers with a reader that may read nothing", []string{"announcers", "--debug-reader", "nobody"}, 0, []string{
			`warning: speaker speaker-1 on node n1 did not answer: GET /debug/announcements: HTTP 403: Forbidden: user "system:serviceaccount:metalgate-system:nobody" may not get /debug/announcements`,
		}, []string{"100.64.0.0  default/web"}},
		{"backends", []string{"backends", "web", "-n", "shop"}, 0, []string{
			"proxy metalgate-system/metalgate-proxy-1 (node n2): table generation 1, applied",
			"web.test  / (Prefix)  shop/shop:http  10.244.1.5:8080  yes    yes                             0",
			"web.test  / (Prefix)  shop/shop:http  10.244.2.6:8080  no     - (not routed)                  -",
			"web.test  / (Prefix)  shop/shop:http  239.1.2.3:8080   yes    - (refused: multicast address)  -",
		}, []string{"rival.test"}},
		{"backends of an Ingress no proxy serves", []string{"backends", "tenant/t"}, 1, []string{
			"proxy metalgate-system/metalgate-proxy-1: this proxy does not serve Ingress tenant/t",
			"proxy tenant/metalgate-proxy-t did not answer: pod is pending",
		}, nil},
		{"check", []string{"check"}, 1, []string{
			"error: IPAddressPool metalgate-system/silent: no L2Advertisement or BGPAdvertisement selects it",
			"warning: Service default/stuck: no address yet",
			`error: Ingress shop/lost: its class "nope" (spec.ingressClassName) names no IngressClass`,
			"error: Ingress shop/rival: status.loadBalancer holds 198.51.100.11, which is the VIP of no metalgate proxy Service",
			`error: Ingress shop/web: status conflict: 1 StatusConflict event(s), last`,
			"error: IngressClass tenant: no ready metalgate proxy serves its controller example.com/tenant",
			"  hint: ",
		}, []string{"IPAddressPool metalgate-system/announced", "Ingress shop/web: status.loadBalancer", "Ingress tenant/t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append(tc.args, "--kubeconfig", kubeconfig)
			code := runWith(ctx, args, &out, &errOut, connect)
			t.Logf("kubectl metalgate %s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out.String(), errOut.String())
			if code != tc.wantCode {
				t.Errorf("exit = %d, want %d; stderr %q", code, tc.wantCode, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}

	// -o json is one document of the documented shape, decoded here as a script would.
	t.Run("-o json", func(t *testing.T) {
		for _, tc := range []struct {
			args     []string
			wantKind string
			check    func(t *testing.T, items []map[string]any)
		}{
			{[]string{"pools", "-o", "json"}, "PoolList", func(t *testing.T, items []map[string]any) {
				got := map[string]any{}
				for _, it := range items {
					got[it["pool"].(string)+" "+it["family"].(string)] = it["assigned"]
				}
				if got["announced IPv4"] != float64(3) || got["announced IPv6"] != float64(0) || len(items) != 3 {
					t.Errorf("items %v, want announced IPv4 assigned 3, IPv6 0, 3 rows", items)
				}
			}},
			{[]string{"allocations", "--output=json", "-n", "default"}, "AllocationList", func(t *testing.T, items []map[string]any) {
				var web map[string]any
				for _, it := range items {
					if it["namespace"] != "default" {
						t.Errorf("-n default listed %v", it)
					}
					if it["service"] == "web" {
						web = it
					}
				}
				if web == nil || web["address"] != "100.64.0.0" || web["pool"] != "announced" || web["announcer"] != "layer2 n1" {
					t.Errorf("web = %v, want 100.64.0.0 from announced, announced by layer2 n1", web)
				}
			}},
			{[]string{"backends", "web", "-n", "shop", "-o", "json"}, "BackendList", func(t *testing.T, items []map[string]any) {
				if len(items) != 1 || items[0]["proxy"] != "metalgate-system/metalgate-proxy-1" || items[0]["node"] != "n2" || items[0]["generation"] != float64(1) {
					t.Fatalf("items %v, want the one proxy metalgate-system/metalgate-proxy-1 on n2, generation 1", items)
				}
				routes, _ := items[0]["routes"].([]any)
				if len(routes) == 0 || routes[0].(map[string]any)["host"] != "web.test" || routes[0].(map[string]any)["service"] != "shop/shop" {
					t.Errorf("routes %v, want web.test to shop/shop first", routes)
				}
			}},
			{[]string{"announcers", "-o", "json"}, "AnnouncerList", func(t *testing.T, items []map[string]any) {
				if len(items) == 0 || items[0]["vip"] != "100.64.0.0" || items[0]["service"] != "default/web" || items[0]["pool"] != "announced" ||
					fmt.Sprint(items[0]["nodes"]) != "[n1]" || fmt.Sprint(items[0]["via"]) != "[eth0]" {
					t.Errorf("items %v, want 100.64.0.0 of default/web from announced on n1 eth0 first", items)
				}
			}},
		} {
			t.Run(tc.args[0], func(t *testing.T) {
				var out, errOut bytes.Buffer
				if code := runWith(ctx, append(tc.args, "--kubeconfig", kubeconfig), &out, &errOut, connect); code != 0 {
					t.Fatalf("exit %d; stderr %q", code, errOut.String())
				}
				var doc struct {
					Kind  string           `json:"kind"`
					Items []map[string]any `json:"items"`
				}
				dec := json.NewDecoder(&out)
				dec.DisallowUnknownFields()
				if err := dec.Decode(&doc); err != nil {
					t.Fatalf("stdout is not one JSON document of kind and items: %v", err)
				}
				if dec.More() {
					t.Errorf("stdout has more after the document")
				}
				if doc.Kind != tc.wantKind {
					t.Errorf("kind = %q, want %q", doc.Kind, tc.wantKind)
				}
				tc.check(t, doc.Items)
			})
		}
	})

	// Without the debug reader (and with a kubeconfig of client certificates), the plugin has no
	// token to read the speakers with and says what is missing.
	t.Run("announcers without the debug reader", func(t *testing.T) {
		must(c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: "metalgate-debug-reader"}}))
		var out, errOut bytes.Buffer
		if code := runWith(ctx, []string{"announcers", "--kubeconfig", kubeconfig}, &out, &errOut, connect); code != 1 {
			t.Errorf("exit = %d, want 1; stdout %q", code, out.String())
		}
		for _, w := range []string{"needs a bearer token", "ServiceAccount metalgate-system/metalgate-debug-reader not found", "the kubeconfig has no bearer token"} {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("stderr %q lacks %q", errOut.String(), w)
			}
		}
	})
}

// manifestObjects reads the objects of a multi-document YAML file.
func manifestObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestKubeFlags: the standard kubectl flags reach the REST config the plugin connects with, and
// -n, -A and --metalgate-namespace land where each command reads them.
func TestKubeFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
- name: b
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: a
  context: {cluster: a, user: alice, namespace: shop}
- name: b
  context: {cluster: b, user: bob}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	commands := map[string]command{"allocations": {namespaces: namespaceFilter}, "backends": {nargs: 1, namespaces: namespaceOne}}
	tests := []struct {
		name                        string
		args                        []string
		wantHost, wantToken, wantAs string
		wantGroups                  []string
		wantTimeout                 time.Duration
		wantInsecure                bool
		wantContextNS               string
		wantObjectNS, wantMetalgate string
	}{
		{name: "kubeconfig alone", args: []string{"allocations"},
			wantHost: "https://127.0.0.1:1", wantToken: "alice-token", wantContextNS: "shop", wantMetalgate: "metalgate-system"},
		{name: "--context", args: []string{"allocations", "--context", "b"},
			wantHost: "https://127.0.0.1:2", wantToken: "bob-token", wantContextNS: "default", wantMetalgate: "metalgate-system"},
		{name: "--cluster and --user", args: []string{"--cluster=b", "--user=bob", "allocations"},
			wantHost: "https://127.0.0.1:2", wantToken: "bob-token", wantContextNS: "shop", wantMetalgate: "metalgate-system"},
		{name: "--server, --token, --as, --as-group, --request-timeout, --insecure-skip-tls-verify",
			args:     []string{"allocations", "--server", "https://[::1]:6443", "--token", "t0k", "--as", "carol", "--as-group", "ops", "--as-group", "dev", "--request-timeout", "7s", "--insecure-skip-tls-verify"},
			wantHost: "https://[::1]:6443", wantToken: "t0k", wantAs: "carol", wantGroups: []string{"ops", "dev"}, wantTimeout: 7 * time.Second, wantInsecure: true,
			wantContextNS: "shop", wantMetalgate: "metalgate-system"},
		{name: "-n is the objects' namespace", args: []string{"allocations", "-n", "web", "--metalgate-namespace", "mg"},
			wantHost: "https://127.0.0.1:1", wantToken: "alice-token", wantContextNS: "web", wantObjectNS: "web", wantMetalgate: "mg"},
		{name: "-A wins over -n", args: []string{"-A", "allocations", "-n", "web"},
			wantHost: "https://127.0.0.1:1", wantToken: "alice-token", wantContextNS: "web", wantObjectNS: "", wantMetalgate: "metalgate-system"},
		{name: "request timeout in seconds", args: []string{"backends", "x", "--request-timeout", "30"},
			wantHost: "https://127.0.0.1:1", wantToken: "alice-token", wantTimeout: 30 * time.Second, wantContextNS: "shop", wantMetalgate: "metalgate-system"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var errOut bytes.Buffer
			o, _, _, code := parseCommandLine(append(tc.args, "--kubeconfig", kubeconfig), commands, io.Discard, &errOut)
			if code != -1 {
				t.Fatalf("parse: exit %d, stderr %q", code, errOut.String())
			}
			cfg, err := o.kube.ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || cfg.BearerToken != tc.wantToken || cfg.Impersonate.UserName != tc.wantAs ||
				!slices.Equal(cfg.Impersonate.Groups, tc.wantGroups) || cfg.Timeout != tc.wantTimeout || cfg.Insecure != tc.wantInsecure {
				t.Errorf("REST config: host %q token %q as %q groups %q timeout %v insecure %t; want %q %q %q %q %v %t",
					cfg.Host, cfg.BearerToken, cfg.Impersonate.UserName, cfg.Impersonate.Groups, cfg.Timeout, cfg.Insecure,
					tc.wantHost, tc.wantToken, tc.wantAs, tc.wantGroups, tc.wantTimeout, tc.wantInsecure)
			}
			ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
			if err != nil || ns != tc.wantContextNS {
				t.Errorf("context namespace = %q, %v; want %q", ns, err, tc.wantContextNS)
			}
			if got := o.objectNamespace(); got != tc.wantObjectNS {
				t.Errorf("objects' namespace = %q, want %q", got, tc.wantObjectNS)
			}
			if o.metalgateNamespace != tc.wantMetalgate {
				t.Errorf("metalgate namespace = %q, want %q", o.metalgateNamespace, tc.wantMetalgate)
			}
		})
	}
}
