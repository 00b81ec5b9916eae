package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/refcheck"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
)

func lbService(ns, name string, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// gatewayService is the LoadBalancer Service metalgate makes for Gateway gw (namespace/name).
func gatewayService(ns, name, gw string, ips ...string) corev1.Service {
	s := lbService(ns, name, ips...)
	s.Annotations = map[string]string{contract.AnnotationGateway: gw}
	return s
}

func testPool(name string, addrs ...v1alpha1.AddressRange) v1alpha1.IPAddressPool {
	return v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metalgate-system", Name: name}, Spec: v1alpha1.IPAddressPoolSpec{Addresses: addrs}}
}

func TestAnnouncerView(t *testing.T) {
	l2 := func(svc, vip string, ifaces ...string) contract.AnnouncementStatus {
		return contract.AnnouncementStatus{Service: svc, VIP: vip, Mode: contract.ModeLayer2, Where: ifaces}
	}
	bgp := func(svc, vip string, peers ...string) contract.AnnouncementStatus {
		return contract.AnnouncementStatus{Service: svc, VIP: vip, Mode: contract.ModeBGP, Where: peers}
	}
	node := func(name string, anns ...contract.AnnouncementStatus) speakerAnswer {
		return speakerAnswer{pod: "speaker-" + name, node: name, got: &contract.Announcements{Node: name, Announcements: anns}}
	}
	pools := []v1alpha1.IPAddressPool{testPool("p", "100.64.0.0/16", "2001:db8:100::/64")}
	tests := []struct {
		name         string
		answers      []speakerAnswer
		services     []corev1.Service
		wantRows     []announcerRow
		wantWarnings []string
	}{
		{
			name:     "one layer-2 owner, BGP from every node, IPv6 sorted after IPv4",
			answers:  []speakerAnswer{node("n1", l2("a/web", "100.64.0.10", "eth0"), bgp("a/api", "2001:db8:100::1", "router")), node("n2", bgp("a/api", "2001:db8:100::1", "router", "backup")), node("n3")},
			services: []corev1.Service{lbService("a", "web", "100.64.0.10"), lbService("a", "api", "2001:db8:100:0::1")},
			wantRows: []announcerRow{
				{vip: "100.64.0.10", service: "a/web", mode: contract.ModeLayer2, nodes: []string{"n1"}, via: []string{"eth0"}},
				{vip: "2001:db8:100::1", service: "a/api", mode: contract.ModeBGP, nodes: []string{"n1", "n2"}, via: []string{"backup", "router"}},
			},
		},
		{
			name:         "layer-2 VIP answered by two nodes",
			answers:      []speakerAnswer{node("n2", l2("a/web", "100.64.0.10", "eth1")), node("n1", l2("a/web", "100.64.0.10", "eth0"))},
			services:     []corev1.Service{lbService("a", "web", "100.64.0.10")},
			wantRows:     []announcerRow{{vip: "100.64.0.10", service: "a/web", mode: contract.ModeLayer2, nodes: []string{"n1", "n2"}, via: []string{"eth0", "eth1"}}},
			wantWarnings: []string{"VIP 100.64.0.10 (a/web) is announced by layer 2 from 2 nodes at once (n1, n2): clients flap between them; do the speakers reach each other (memberlist port 7946)?"},
		},
		{
			name: "a Gateway's Service: its rows and warnings name the Gateway",
			answers: []speakerAnswer{node("n1", l2("metalgate-system/gw-infra-web-1a2b", "100.64.0.20", "eth0"), l2("a/web", "100.64.0.10", "eth0")),
				node("n2", l2("metalgate-system/gw-infra-web-1a2b", "100.64.0.20", "eth1"))},
			services: []corev1.Service{gatewayService("metalgate-system", "gw-infra-web-1a2b", "infra/web", "100.64.0.20"), lbService("a", "web", "100.64.0.10"),
				gatewayService("metalgate-system", "gw-infra-dark-3c4d", "infra/dark", "100.64.0.21")},
			wantRows: []announcerRow{
				{vip: "100.64.0.10", service: "a/web", mode: contract.ModeLayer2, nodes: []string{"n1"}, via: []string{"eth0"}},
				{vip: "100.64.0.20", service: "metalgate-system/gw-infra-web-1a2b", gateway: "infra/web", mode: contract.ModeLayer2, nodes: []string{"n1", "n2"}, via: []string{"eth0", "eth1"}},
			},
			wantWarnings: []string{
				"VIP 100.64.0.20 (metalgate-system/gw-infra-web-1a2b (Gateway infra/web)) is announced by layer 2 from 2 nodes at once (n1, n2): clients flap between them; do the speakers reach each other (memberlist port 7946)?",
				"VIP 100.64.0.21 of Service metalgate-system/gw-infra-dark-3c4d (Gateway infra/dark) is announced by no node; kubectl metalgate check, and the Service's events, say why",
			},
		},
		{
			name:     "a VIP nobody announces, a foreign address ignored, a silent speaker",
			answers:  []speakerAnswer{node("n1"), {pod: "speaker-n2", node: "n2", err: errors.New("connection refused")}},
			services: []corev1.Service{lbService("a", "web", "100.64.0.10"), lbService("a", "other-lb", "203.0.113.7"), lbService("a", "pending")},
			wantWarnings: []string{
				"speaker speaker-n2 on node n2 did not answer: connection refused",
				"VIP 100.64.0.10 of Service a/web is announced by no node that answered (1 speaker(s) did not); kubectl metalgate check, and the Service's events, say why",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, warnings := announcerView(tc.answers, tc.services, pools)
			if diff := cmp.Diff(tc.wantRows, rows, cmp.AllowUnexported(announcerRow{})); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteAnnouncersAndAnnouncerOf(t *testing.T) {
	rows := []announcerRow{
		{vip: "100.64.0.10", service: "a/web", mode: contract.ModeLayer2, nodes: []string{"n1"}, via: []string{"eth0"}},
		{vip: "100.64.0.11", service: "a/api", mode: contract.ModeBGP, nodes: []string{"n1", "n2", "n3", "n4", "n5"}, via: []string{"router"}},
		{vip: "100.64.0.12", service: "a/x", mode: contract.ModeBGP, nodes: []string{"n1"}},
		{vip: "100.64.0.13", service: "metalgate-system/gw-infra-web-1a2b", gateway: "infra/web", mode: contract.ModeLayer2, nodes: []string{"n2"}, via: []string{"eth0"}},
	}
	var out bytes.Buffer
	if err := writeAnnouncers(&out, io.Discard, outputTable, announcerItems(rows, nil), []string{"something"}); err != nil {
		t.Fatal(err)
	}
	want := `VIP          SERVICE                             GATEWAY    MODE    NODE(S)         INTERFACE/PEERS
100.64.0.10  a/web                               -          layer2  n1              eth0
100.64.0.11  a/api                               -          bgp     n1,n2,n3,n4,n5  router
100.64.0.12  a/x                                 -          bgp     n1              -
100.64.0.13  metalgate-system/gw-infra-web-1a2b  infra/web  layer2  n2              eth0
warning: something
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	wantOf := map[string]string{"100.64.0.10": "layer2 n1", "100.64.0.11": "bgp 5 nodes", "100.64.0.12": "bgp n1", "100.64.0.13": "layer2 n2"}
	if diff := cmp.Diff(wantOf, announcerOf(rows)); diff != "" {
		t.Errorf("announcerOf (-want +got):\n%s", diff)
	}
}

func TestParseProxyPod(t *testing.T) {
	pod := func(args ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "one", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "proxy", Args: args,
			Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}, {Name: "X", Value: "x"}},
		}}}}
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   proxyPod
		wantOK bool
	}{
		{"defaults", pod("proxy", "--http-bind-address=:8080"), proxyPod{controller: proxyingress.ControllerName, adminPort: 10254}, true},
		{"namespaced, as config/proxy/namespaced", pod("proxy", "--admin-bind-address=:9000", "--watch-namespace=$(POD_NAMESPACE)"),
			proxyPod{controller: proxyingress.ControllerName, namespaces: []string{"one"}, adminPort: 9000}, true},
		{"separate values, lists, bool flag", pod("proxy", "--controller-name", "example.com/$(X)", "-watch-namespace", "a, b", "--watch-namespace=c", "--watch-ingress-without-class", "--publish-service=one/lb"),
			proxyPod{controller: "example.com/x", namespaces: []string{"a", "b", "c"}, classless: true, publish: "one/lb", adminPort: 10254}, true},
		{"bool flag false", pod("proxy", "--watch-ingress-without-class=false"), proxyPod{controller: proxyingress.ControllerName, adminPort: 10254}, true},
		{"not a proxy", pod("speaker"), proxyPod{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProxyPod(tc.pod)
			if ok != tc.wantOK {
				t.Fatalf("ok = %t, want %t", ok, tc.wantOK)
			}
			got.pod = nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(proxyPod{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// readyProxy is a running, ready proxy pod in ns with the given flags, labelled as
// config/proxy/base labels it.
func readyProxy(ns, name string, ready bool, args ...string) proxyPod {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "proxy"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Args: append([]string{"proxy"}, args...)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	p, _ := parseProxyPod(pod)
	return p
}

func TestFindings(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	class := func(name, controller string, isDefault bool) networkingv1.IngressClass {
		c := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
		if isDefault {
			c.Annotations = map[string]string{annotationDefaultClass: "true"}
		}
		return c
	}
	ingress := func(ns, name, class string, ips ...string) networkingv1.Ingress {
		i := networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if class != "" {
			i.Spec.IngressClassName = &class
		}
		for _, ip := range ips {
			i.Status.LoadBalancer.Ingress = append(i.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
		return i
	}
	conflict := func(ns, name string, at time.Time) corev1.Event {
		return corev1.Event{Reason: "StatusConflict", Type: corev1.EventTypeWarning, Message: "overwritten by field manager \"rival\"", Count: 2,
			InvolvedObject: corev1.ObjectReference{Kind: "Ingress", Namespace: ns, Name: name}, LastTimestamp: metav1.NewTime(at)}
	}
	proxySvc := lbService("metalgate-system", "metalgate-proxy", "100.64.0.1")
	proxySvc.Spec.Selector = map[string]string{"app.kubernetes.io/component": "proxy"}
	tenantSvc := lbService("one", "metalgate-proxy", "100.64.0.2")
	tenantSvc.Spec.Selector = proxySvc.Spec.Selector
	tenantSvc.CreationTimestamp = metav1.NewTime(now) // newer than the cluster-wide one
	// announce puts a proxy's announcement on its Service, as its leader does.
	announce := func(svc corev1.Service, namespaces string) corev1.Service {
		svc.Labels = map[string]string{"metalgate.io/ingress-proxy": "true"}
		svc.Annotations = map[string]string{"metalgate.io/proxy-controller": proxyingress.ControllerName, "metalgate.io/proxy-watch-namespaces": namespaces,
			"metalgate.io/proxy-watch-ingress-without-class": "false", "metalgate.io/proxy-field-manager": "metalgate-proxy." + svc.Namespace}
		return svc
	}
	readySlice := func(ns, svc string) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}}}}
	}
	base := clusterState{
		namespace: "metalgate-system",
		pools:     []v1alpha1.IPAddressPool{testPool("p", "100.64.0.0/16")},
		l2:        []v1alpha1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "all"}}},
		services:  []corev1.Service{proxySvc},
		classes:   []networkingv1.IngressClass{class("metalgate", proxyingress.ControllerName, false), class("nginx", "k8s.io/ingress-nginx", false)},
		proxies:   []proxyPod{readyProxy("metalgate-system", "metalgate-proxy-1", true)},
	}
	with := func(f func(*clusterState)) clusterState {
		s := base
		f(&s)
		return s
	}
	tests := []struct {
		name  string
		state clusterState
		want  []string // "severity: object: message" prefixes, in order
	}{
		{"healthy: our Ingress with the proxy's VIP, another controller's with a node IP", with(func(s *clusterState) {
			s.ingresses = []networkingv1.Ingress{ingress("a", "web", "metalgate", "100.64.0.1"), ingress("a", "n", "nginx", "198.51.100.11")}
			s.conflicts = []corev1.Event{conflict("a", "web", now.Add(-2*time.Hour))} // too old to count
		}), nil},
		{"unknown class, no class without a default", with(func(s *clusterState) {
			s.ingresses = []networkingv1.Ingress{ingress("a", "typo", "metalgat"), ingress("a", "bare", "")}
		}), []string{
			"warning: Ingress a/bare: no class and no default IngressClass",
			`error: Ingress a/typo: its class "metalgat" (spec.ingressClassName) names no IngressClass`,
		}},
		{"class from the deprecated annotation names nothing", with(func(s *clusterState) {
			i := ingress("a", "old", "")
			i.Annotations = map[string]string{annotationIngressClass: "gone"}
			s.ingresses = []networkingv1.Ingress{i}
		}), []string{`error: Ingress a/old: its class "gone" (annotation kubernetes.io/ingress.class) names no IngressClass`}},
		{"no ready proxy for the class", with(func(s *clusterState) {
			s.proxies = []proxyPod{readyProxy("metalgate-system", "metalgate-proxy-1", false)}
			s.ingresses = []networkingv1.Ingress{ingress("a", "web", "metalgate")}
		}), []string{"error: IngressClass metalgate: no ready metalgate proxy serves its controller metalgate.io/ingress-controller"}},
		{"proxies watch other namespaces only", with(func(s *clusterState) {
			s.proxies = []proxyPod{readyProxy("one", "p", true, "--watch-namespace=one")}
			s.ingresses = []networkingv1.Ingress{ingress("one", "ok", "metalgate"), ingress("two", "web", "metalgate")}
		}), []string{"error: Ingress two/web: no ready metalgate proxy of class metalgate serves namespace two"}},
		{"default class is ours but no proxy takes classless Ingresses", with(func(s *clusterState) {
			s.classes = []networkingv1.IngressClass{class("metalgate", proxyingress.ControllerName, true)}
			s.ingresses = []networkingv1.Ingress{ingress("a", "bare", "")}
		}), []string{"error: Ingress a/bare: it has no class and no ready metalgate proxy takes Ingresses without a class"}},
		{"two default classes", with(func(s *clusterState) {
			s.classes = []networkingv1.IngressClass{class("metalgate", proxyingress.ControllerName, true), class("nginx", "k8s.io/ingress-nginx", true)}
		}), []string{"warning: IngressClass metalgate, nginx: more than one IngressClass is the default"}},
		{"a rival's node IP in our Ingress's status, and recent conflict events", with(func(s *clusterState) {
			s.ingresses = []networkingv1.Ingress{ingress("a", "web", "metalgate", "100.64.0.1", "198.51.100.11")}
			s.conflicts = []corev1.Event{conflict("a", "web", now.Add(-5*time.Minute)), conflict("a", "web", now.Add(-time.Minute))}
		}), []string{
			"error: Ingress a/web: status conflict: 4 StatusConflict event(s), last 1m0s ago: overwritten by field manager \"rival\"",
			"error: Ingress a/web: status.loadBalancer holds 198.51.100.11, which is the VIP of no metalgate proxy Service",
		}},
		{"two proxies serve one Ingress: the namespace's own publishes, the cluster-wide yields", with(func(s *clusterState) {
			s.services = []corev1.Service{announce(proxySvc, "*"), announce(tenantSvc, "one")}
			s.slices = []discoveryv1.EndpointSlice{readySlice("metalgate-system", "metalgate-proxy"), readySlice("one", "metalgate-proxy")}
			s.proxies = append(s.proxies, readyProxy("one", "metalgate-proxy-1", true, "--watch-namespace=one"))
			s.ingresses = []networkingv1.Ingress{ingress("one", "web", "metalgate", "100.64.0.2"), ingress("two", "web", "metalgate", "100.64.0.1")}
		}), []string{
			"warning: Ingress one/web: 2 metalgate proxies serve it: one/metalgate-proxy publishes its status (100.64.0.2); metalgate-system/metalgate-proxy yields: one/metalgate-proxy is namespace one's own proxy and metalgate-system/metalgate-proxy is cluster-wide",
		}},
		{"the status holds the losing proxy's VIP", with(func(s *clusterState) {
			s.services = []corev1.Service{announce(proxySvc, "*"), announce(tenantSvc, "one")}
			s.slices = []discoveryv1.EndpointSlice{readySlice("metalgate-system", "metalgate-proxy"), readySlice("one", "metalgate-proxy")}
			s.proxies = append(s.proxies, readyProxy("one", "metalgate-proxy-1", true, "--watch-namespace=one"))
			s.ingresses = []networkingv1.Ingress{ingress("one", "web", "metalgate", "100.64.0.1")}
		}), []string{
			"warning: Ingress one/web: 2 metalgate proxies serve it: one/metalgate-proxy publishes",
			"warning: Ingress one/web: status.loadBalancer holds 100.64.0.1, but by the arbitration rule one/metalgate-proxy publishes it (100.64.0.2)",
		}},
		{"the tenant's proxy has no ready endpoint: the cluster-wide proxy publishes", with(func(s *clusterState) {
			s.services = []corev1.Service{announce(proxySvc, "*"), announce(tenantSvc, "one")}
			s.slices = []discoveryv1.EndpointSlice{readySlice("metalgate-system", "metalgate-proxy")}
			s.ingresses = []networkingv1.Ingress{ingress("one", "web", "metalgate", "100.64.0.1")}
		}), []string{
			"warning: Ingress one/web: 2 metalgate proxies serve it: metalgate-system/metalgate-proxy publishes its status (100.64.0.1); one/metalgate-proxy yields: metalgate-system/metalgate-proxy is serving and one/metalgate-proxy has had no ready endpoint",
		}},
		{"status-owner annotation: no arbitration line", with(func(s *clusterState) {
			s.services = []corev1.Service{announce(proxySvc, "*"), announce(tenantSvc, "one")}
			s.slices = []discoveryv1.EndpointSlice{readySlice("metalgate-system", "metalgate-proxy"), readySlice("one", "metalgate-proxy")}
			s.proxies = append(s.proxies, readyProxy("one", "metalgate-proxy-1", true, "--watch-namespace=one"))
			i := ingress("one", "web", "metalgate", "100.64.0.1")
			i.Annotations = map[string]string{"metalgate.io/status-owner": "metalgate-system/metalgate-proxy"}
			s.ingresses = []networkingv1.Ingress{i}
		}), nil},
		{"a proxy that does not announce itself beside one that does", with(func(s *clusterState) {
			s.services = []corev1.Service{proxySvc, announce(tenantSvc, "one")}
			s.proxies = append(s.proxies, readyProxy("one", "metalgate-proxy-1", true, "--watch-namespace=one"))
		}), []string{
			"warning: Service metalgate-system/metalgate-proxy: metalgate proxy metalgate-system/metalgate-proxy-1 publishes this Service's address but the Service does not announce it (label metalgate.io/ingress-proxy)",
		}},
		{"a proxy whose --publish-service does not exist is not flagged as unannounced", with(func(s *clusterState) {
			s.services = []corev1.Service{announce(tenantSvc, "one")}
			s.proxies = []proxyPod{readyProxy("metalgate-system", "metalgate-proxy-1", true, "--publish-service=metalgate-system/does-not-exist"),
				readyProxy("one", "metalgate-proxy-1", true, "--watch-namespace=one")}
		}), nil},
		{"a malformed announcement", with(func(s *clusterState) {
			bad := announce(tenantSvc, "one,,two")
			s.services = append(s.services, bad)
		}), []string{
			`warning: Service one/metalgate-proxy: proxy announcement on Service one/metalgate-proxy: annotation metalgate.io/proxy-watch-namespaces="one,,two": "" is not a namespace name`,
		}},
		{"a proxy stopped writing: ForeignStatusWriter names the other writer", with(func(s *clusterState) {
			s.ingresses = []networkingv1.Ingress{ingress("a", "web", "metalgate", "198.51.100.11")}
			s.conflicts = []corev1.Event{conflict("a", "web", now.Add(-2*time.Minute)), {Reason: "ForeignStatusWriter", Type: corev1.EventTypeWarning,
				Message:        `status.loadBalancer of this Ingress was replaced 3 time(s) within 10m0s by field manager "rival" (now 198.51.100.11); this proxy stops writing it`,
				InvolvedObject: corev1.ObjectReference{Kind: "Ingress", Namespace: "a", Name: "web"}, LastTimestamp: metav1.NewTime(now.Add(-time.Minute))}}
		}), []string{
			`error: Ingress a/web: a metalgate proxy stopped writing its status (ForeignStatusWriter, 1m0s ago): status.loadBalancer of this Ingress was replaced 3 time(s) within 10m0s by field manager "rival"`,
			"error: Ingress a/web: status conflict: 2 StatusConflict event(s), last 2m0s ago",
			"error: Ingress a/web: status.loadBalancer holds 198.51.100.11, which is the VIP of no metalgate proxy Service",
		}},
		{"references that do not resolve", with(func(s *clusterState) {
			ns := metav1.ObjectMeta{Namespace: "metalgate-system"}
			l2, adv, peer := ns, ns, ns
			l2.Name, adv.Name, peer.Name = "l2", "adv", "r1"
			s.l2 = append(s.l2, v1alpha1.L2Advertisement{ObjectMeta: l2, Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"p", "gone"}}})
			s.bgp = []v1alpha1.BGPAdvertisement{{ObjectMeta: adv, Spec: v1alpha1.BGPAdvertisementSpec{Communities: []string{"no-export"}}}}
			s.refs = refcheck.Snapshot{Pools: s.pools, BGPPeers: []v1alpha1.BGPPeer{{ObjectMeta: peer, Spec: v1alpha1.BGPPeerSpec{BFDProfile: "fast"}}}}
		}), []string{
			`error: BGPAdvertisement metalgate-system/adv: CommunityNotFound: spec.communities[0]: community name "no-export" is defined by no Community in namespace metalgate-system`,
			`error: BGPPeer metalgate-system/r1: BFDProfileNotFound: spec.bfdProfile: BFDProfile "fast" not found`,
			`warning: L2Advertisement metalgate-system/l2: PoolNotFound: spec.ipAddressPools[1]: IPAddressPool "gone" not found`,
		}},
		{"pool problems", with(func(s *clusterState) {
			s.l2 = nil
			s.services = append(s.services, lbService("a", "pending"), lbService("a", "foreign", "203.0.113.9"))
		}), []string{
			"error: IPAddressPool metalgate-system/p: no L2Advertisement or BGPAdvertisement selects it",
			"warning: Service a/foreign: address 203.0.113.9 is in no pool",
			"warning: Service a/pending: no address yet",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := findings(tc.state, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d findings, want %d:\n%v", len(got), len(tc.want), got)
			}
			for i, f := range got {
				if !strings.HasPrefix(f.String(), tc.want[i]) {
					t.Errorf("finding %d = %q, want prefix %q", i, f.String(), tc.want[i])
				}
				if f.hint == "" {
					t.Errorf("finding %d has no hint: %s", i, f)
				}
			}
		})
	}
}

func TestWriteBackends(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	proxy := readyProxy("one", "metalgate-proxy-x", true)
	proxy.pod.Spec.NodeName = "n2"
	other := readyProxy("metalgate-system", "metalgate-proxy-y", true)
	b := &contract.Backends{Ingress: "one/echo", Generation: 7, Applied: now.Add(-90 * time.Second), Routes: []contract.BackendRoute{
		{Host: "one.demo.test", Path: "/", PathType: "Prefix", Service: "one/echo", Port: "http", Endpoints: []contract.BackendEndpoint{
			{Address: "10.244.1.5:8080", Ready: true, Serving: true, Routed: true, Healthy: true, InFlight: 3},
			{Address: "10.244.2.9:8080", Ready: true, Serving: true, Routed: true},
			{Address: "10.244.3.2:8080", Serving: true, Terminating: true},
			{Address: "10.244.3.3:8080"},
		}},
		{Path: "/empty", PathType: "Exact", Service: "one/none", Port: "80"},
	}}
	tests := []struct {
		name     string
		answers  []proxyAnswer
		want     string
		wantFail bool
	}{
		{"one proxy serves it", []proxyAnswer{{proxy: proxy, backends: b}, {proxy: other, notOurs: "this proxy does not serve Ingress one/echo"}},
			`proxy one/metalgate-proxy-x (node n2): table generation 7, applied 1m30s ago
HOST           PATH            SERVICE:PORT   ENDPOINT         READY        HEALTHY         IN-FLIGHT
one.demo.test  / (Prefix)      one/echo:http  10.244.1.5:8080  yes          yes             3
one.demo.test  / (Prefix)      one/echo:http  10.244.2.9:8080  yes          no (ejected)    0
one.demo.test  / (Prefix)      one/echo:http  10.244.3.2:8080  terminating  - (not routed)  -
one.demo.test  / (Prefix)      one/echo:http  10.244.3.3:8080  no           - (not routed)  -
*              /empty (Exact)  one/none:80    <none>           -            -               -
`, false},
		{"nobody serves it", []proxyAnswer{{proxy: other, notOurs: "this proxy does not serve Ingress one/echo"}, {proxy: proxy, err: errors.New("HTTP 503")}},
			`proxy metalgate-system/metalgate-proxy-y: this proxy does not serve Ingress one/echo
proxy one/metalgate-proxy-x did not answer: HTTP 503
`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := writeBackends(&out, "one/echo", tc.answers, now)
			if (err != nil) != tc.wantFail {
				t.Errorf("err = %v, want failure %t", err, tc.wantFail)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParallel: every index runs once, and no more than maxParallel at a time even when the
// first ones block until maxParallel of them have started.
func TestParallel(t *testing.T) {
	const n = 3 * maxParallel
	var active, peak, entered atomic.Int32
	ran := make([]atomic.Int32, n)
	release := make(chan struct{})
	var once sync.Once
	parallel(n, func(i int) {
		cur := active.Add(1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		if entered.Add(1) == maxParallel {
			once.Do(func() { close(release) })
		}
		<-release
		ran[i].Add(1)
		active.Add(-1)
	})
	if p := peak.Load(); p != maxParallel {
		t.Errorf("peak concurrency %d, want %d", p, maxParallel)
	}
	for i := range ran {
		if got := ran[i].Load(); got != 1 {
			t.Errorf("f(%d) ran %d times", i, got)
		}
	}
}

func TestBackendsTarget(t *testing.T) {
	tests := []struct {
		arg       string
		wantParam string
		wantID    string
		wantErr   string
	}{
		{"web", "ingress", "ctx/web", ""},
		{"shop/web", "ingress", "shop/web", ""},
		{"ingress/web", "ingress", "ctx/web", ""},
		{"ing/shop/web", "ingress", "shop/web", ""},
		{"Ingresses.networking.k8s.io/web", "ingress", "ctx/web", ""},
		{"httproute/web", "httproute", "ctx/web", ""},
		{"httproutes/app/web", "httproute", "app/web", ""},
		{"HTTPRoute.gateway.networking.k8s.io/web", "httproute", "ctx/web", ""},
		{"grpcroute/web", "grpcroute", "ctx/web", ""},
		{"grpcroutes/app/web", "grpcroute", "app/web", ""},
		{"GRPCRoute.gateway.networking.k8s.io/web", "grpcroute", "ctx/web", ""},
		{"grpcroute/a/b/c", "", "", `TARGET "grpcroute/a/b/c": want`},
		{"httproute/", "", "", `TARGET "httproute/": want`},
		{"httproute/a/b/c", "", "", `TARGET "httproute/a/b/c": want`},
		{"/web", "", "", `TARGET "/web": want`},
		{"a/b/c", "", "", `TARGET "a/b/c": want`},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			param, id, err := backendsTarget(tc.arg, "ctx")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || param != tc.wantParam || id.String() != tc.wantID {
				t.Errorf("= %q, %q, %v; want %q, %q", param, id, err, tc.wantParam, tc.wantID)
			}
		})
	}
}

func TestWriteRouteBackends(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	gwProxy := func(name, gw string) proxyPod {
		p := readyProxy("metalgate-system", name, true, "--gateway="+gw)
		p.pod.Spec.NodeName = "n1"
		return p
	}
	web, other := types.NamespacedName{Namespace: "infra", Name: "web"}, types.NamespacedName{Namespace: "infra", Name: "other"}
	split := &contract.Backends{HTTPRoute: "app/shop", Generation: 4, Applied: now.Add(-5 * time.Second), Routes: []contract.BackendRoute{
		{Host: "shop.test", Path: "/", PathType: "Prefix", Service: "app/shop", Port: "80", Weight: 90, Endpoints: []contract.BackendEndpoint{
			{Address: "10.244.1.5:8080", Ready: true, Serving: true, Routed: true, Healthy: true, InFlight: 2},
			{Address: "10.244.1.6:8080", Serving: true, Terminating: true}}},
		{Host: "shop.test", Path: "/", PathType: "Prefix", Weight: 10, Unresolved: true},
		{Host: "shop.test", Path: "/api", PathType: "Exact", Service: "app/api", Port: "8080"},
	}}
	none := &contract.Backends{HTTPRoute: "app/shop", Generation: 1}
	tests := []struct {
		name    string
		rgs     []routeGateway
		want    string
		wantErr string
	}{
		{"routed by one Gateway, another has no proxy, a third's proxy is unreachable", []routeGateway{
			{gateway: web, answers: []proxyAnswer{{proxy: gwProxy("gw-web-1", "infra/web"), backends: split}}},
			{gateway: other, problem: "no proxy pod (label app.kubernetes.io/component=gateway-proxy, argument --gateway=infra/other)"},
			{gateway: types.NamespacedName{Namespace: "infra", Name: "far"}, answers: []proxyAnswer{{proxy: gwProxy("gw-far-1", "infra/far"), err: errors.New("no route to host")}}},
		}, `Gateway infra/web, proxy metalgate-system/gw-web-1 (node n1): table generation 4, applied 5s ago
HOST       PATH          SERVICE:PORT       WEIGHT  ENDPOINT         READY        HEALTHY         IN-FLIGHT
shop.test  / (Prefix)    app/shop:80        90%     10.244.1.5:8080  yes          yes             2
shop.test  / (Prefix)    app/shop:80        90%     10.244.1.6:8080  terminating  - (not routed)  -
shop.test  / (Prefix)    <unresolved: 500>  10%     <none>           -            -               -
shop.test  /api (Exact)  app/api:8080       -       <none>           -            -               -
Gateway infra/other: no proxy pod (label app.kubernetes.io/component=gateway-proxy, argument --gateway=infra/other)
Gateway infra/far: proxy metalgate-system/gw-far-1 did not answer: no route to host
`, ""},
		{"the route is not admitted by the only Gateway's listeners", []routeGateway{
			{gateway: web, notAccepted: "NotAllowedByListeners: no listener admits routes of namespace app",
				answers: []proxyAnswer{{proxy: gwProxy("gw-web-1", "infra/web"), backends: none}}},
		}, `Gateway infra/web, proxy metalgate-system/gw-web-1 (node n1): table generation 1, applied unknown
  no routes: HTTPRoute app/shop is attached to no listener of Gateway infra/web (NotAllowedByListeners: no listener admits routes of namespace app)
`, "HTTPRoute app/shop is attached to no Gateway: HTTPRoute app/shop is attached to no listener of Gateway infra/web (NotAllowedByListeners"},
		{"no Gateway of the route has a usable proxy", []routeGateway{
			{gateway: web, problem: "not metalgate's: its GatewayClass nginx has controller example.com/nginx"},
			{gateway: other, answers: []proxyAnswer{{proxy: gwProxy("gw-other-1", "infra/other"), notOurs: "this proxy does not serve HTTPRoute app/shop (not seen yet)"}}},
		}, `Gateway infra/web: not metalgate's: its GatewayClass nginx has controller example.com/nginx
Gateway infra/other: proxy metalgate-system/gw-other-1: this proxy does not serve HTTPRoute app/shop (not seen yet)
`, "no metalgate proxy routes HTTPRoute app/shop: Gateway infra/web: not metalgate's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := writeRouteBackends(&out, "HTTPRoute app/shop", tc.rgs, now)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
