package config

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/layer2"
)

func pool(name string, lbls map[string]string, addrs ...string) v1alpha1.IPAddressPool {
	p := v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	for _, a := range addrs {
		p.Spec.Addresses = append(p.Spec.Addresses, v1alpha1.AddressRange(a))
	}
	return p
}

func ad(name string, spec v1alpha1.L2AdvertisementSpec) v1alpha1.L2Advertisement {
	return v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func svc(name string, mutate func(*corev1.Service), ips ...string) corev1.Service {
	s := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if mutate != nil {
		mutate(&s)
	}
	return s
}

func slice(svcName string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svcName + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		Endpoints:  eps,
	}
}

func ep(node string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

// summary is the part of a VIP the table compares.
type summary struct {
	VIP        string
	Service    string
	Pool       string
	Interfaces []string
	Local      bool
	AnyReady   bool
	Ready      []string
	Selectors  []string
}

// l2Interfaces are the interfaces of a layer-2 VIP (nil for BGP).
func l2Interfaces(v speaker.VIP) []string {
	p, _ := v.Params.(layer2.Params)
	return p.Interfaces
}

func summarize(w speaker.World) []summary {
	var out []summary
	for _, v := range w.VIPs {
		s := summary{VIP: v.VIP.String(), Service: v.Service, Pool: v.Pool, Interfaces: l2Interfaces(v), Local: v.Local, AnyReady: v.AnyReady}
		for n := range v.ReadyNodes {
			s.Ready = append(s.Ready, n)
		}
		for _, sel := range v.NodeSelectors {
			s.Selectors = append(s.Selectors, sel.String())
		}
		out = append(out, s)
	}
	return out
}

func TestBuildVIPs(t *testing.T) {
	other := "other.io/lb"
	ours := "metalgate.io/metalgate"
	pools := []v1alpha1.IPAddressPool{
		pool("a", map[string]string{"tier": "web"}, "198.51.100.0/28", "2001:db8::/120"),
		pool("b", nil, "203.0.113.10-203.0.113.20"),
		pool("c", nil, "192.0.2.0/24"),
	}
	readyAnywhere := []discoveryv1.EndpointSlice{slice("s1", ep("n1", true)), slice("s2", ep("n2", true))}
	tests := []struct {
		name     string
		ads      []v1alpha1.L2Advertisement
		services []corev1.Service
		slices   []discoveryv1.EndpointSlice
		want     []summary
	}{
		{
			name:     "empty advertisement announces every pool",
			ads:      []v1alpha1.L2Advertisement{ad("all", v1alpha1.L2AdvertisementSpec{})},
			services: []corev1.Service{svc("s1", nil, "198.51.100.1", "2001:db8::1"), svc("s2", nil, "203.0.113.10")},
			slices:   readyAnywhere,
			want: []summary{
				{VIP: "198.51.100.1", Service: "ns/s1", Pool: "a", AnyReady: true},
				{VIP: "203.0.113.10", Service: "ns/s2", Pool: "b", AnyReady: true},
				{VIP: "2001:db8::1", Service: "ns/s1", Pool: "a", AnyReady: true},
			},
		},
		{
			name:     "by name and by label; unselected pool not announced",
			ads:      []v1alpha1.L2Advertisement{ad("x", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"b"}, IPAddressPoolSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "web"}}}})},
			services: []corev1.Service{svc("s1", nil, "198.51.100.1"), svc("s2", nil, "203.0.113.10"), svc("s3", nil, "192.0.2.7")},
			slices:   readyAnywhere,
			want: []summary{
				{VIP: "198.51.100.1", Service: "ns/s1", Pool: "a", AnyReady: true},
				{VIP: "203.0.113.10", Service: "ns/s2", Pool: "b", AnyReady: true},
			},
		},
		{
			name: "restrictions of several advertisements add up",
			ads: []v1alpha1.L2Advertisement{
				ad("x", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"a"}, Interfaces: []string{"eth1"}, NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}}}),
				ad("y", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"a"}, Interfaces: []string{"eth0", "eth1"}, NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "b"}}}}),
				ad("z", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"b"}, Interfaces: []string{"eth0"}}),
				ad("w", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"b"}}),
			},
			services: []corev1.Service{svc("s1", nil, "198.51.100.1"), svc("s2", nil, "203.0.113.10")},
			slices:   readyAnywhere,
			want: []summary{
				{VIP: "198.51.100.1", Service: "ns/s1", Pool: "a", AnyReady: true, Interfaces: []string{"eth0", "eth1"}, Selectors: []string{"zone=a", "zone=b"}},
				{VIP: "203.0.113.10", Service: "ns/s2", Pool: "b", AnyReady: true},
			},
		},
		{
			name: "other loadBalancerClass, non-LoadBalancer and hostname ingress are ignored",
			ads:  []v1alpha1.L2Advertisement{ad("all", v1alpha1.L2AdvertisementSpec{})},
			services: []corev1.Service{
				svc("s1", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }, "198.51.100.1"),
				svc("s2", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &ours }, "198.51.100.2"),
				svc("s3", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }, "198.51.100.3"),
				svc("s4", func(s *corev1.Service) {
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example"}}
				}),
			},
			want: []summary{{VIP: "198.51.100.2", Service: "ns/s2", Pool: "a"}},
		},
		{
			name: "annotation picks the pool among overlapping ones",
			ads:  []v1alpha1.L2Advertisement{ad("all", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"c"}, Interfaces: []string{"eth9"}}), ad("a", v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"a"}})},
			services: []corev1.Service{svc("s1", func(s *corev1.Service) {
				s.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: "c"}
			}, "192.0.2.1")},
			want: []summary{{VIP: "192.0.2.1", Service: "ns/s1", Pool: "c", Interfaces: []string{"eth9"}}},
		},
		{
			name: "ETP Local: ready local endpoints only; shared address merges",
			ads:  []v1alpha1.L2Advertisement{ad("all", v1alpha1.L2AdvertisementSpec{})},
			services: []corev1.Service{
				svc("s1", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }, "198.51.100.1"),
				svc("s2", nil, "198.51.100.1"),
			},
			slices: []discoveryv1.EndpointSlice{slice("s1", ep("n1", true), ep("n2", false)), slice("s2", ep("n3", true))},
			want:   []summary{{VIP: "198.51.100.1", Service: "ns/s1", Pool: "a", Local: true, AnyReady: true, Ready: []string{"n1"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, errs := Build(Snapshot{Services: tc.services, EndpointSlices: tc.slices, Pools: pools, L2Advertisements: tc.ads}, Options{LBClass: ours, MemberlistPort: 7946})
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if diff := cmp.Diff(tc.want, summarize(w)); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildNodesAndSpeakers(t *testing.T) {
	now := metav1.Now()
	node := func(name string, lbls map[string]string, conds ...corev1.NodeCondition) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	pod := func(name, node, hostIP string, del bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{HostIP: hostIP, Phase: corev1.PodRunning}}
		if del {
			p.DeletionTimestamp = &now
		}
		return p
	}
	s := Snapshot{
		Nodes: []corev1.Node{
			node("n3", nil, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}),
			node("n1", map[string]string{"a": "b"}),
			node("n2", map[string]string{contract.LabelExcludeFromLB: ""}),
			node("n4", nil, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}),
		},
		SpeakerPods: []corev1.Pod{
			pod("p1", "n1", "10.0.0.1", false), pod("p2", "n2", "10.0.0.2", false),
			pod("p3", "n3", "10.0.0.3", true), pod("p4", "n4", "10.0.0.4", false),
		},
	}
	w, errs := Build(s, Options{MemberlistPort: 7946})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	type n struct {
		Name     string
		Excluded bool
	}
	var got []n
	for _, x := range w.Nodes {
		got = append(got, n{x.Name, x.Excluded})
	}
	if diff := cmp.Diff([]n{{"n1", false}, {"n2", true}, {"n3", true}, {"n4", false}}, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	// Terminating pods and pods on NotReady nodes are not expected to answer.
	if diff := cmp.Diff([]string{"n1", "n2"}, w.Speakers); diff != "" {
		t.Errorf("speakers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.0.0.1:7946", "10.0.0.2:7946"}, w.Peers); diff != "" {
		t.Errorf("peers (-want +got):\n%s", diff)
	}
}

// TestBuildSpeakerAddrs: the members the speakers admit are the nodes with a speaker Pod,
// with their InternalIPs and the Pod's host IPs; nothing else.
func TestBuildSpeakerAddrs(t *testing.T) {
	now := metav1.Now()
	node := func(name string, addrs ...corev1.NodeAddress) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	internal := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
	}
	pod := func(name, node, hostIP string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{HostIP: hostIP, Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		pods  []corev1.Pod
		want  map[string][]netip.Addr
	}{
		{
			name: "InternalIPs of both families and the host IP; no ExternalIP, no Hostname",
			nodes: []corev1.Node{node("n1", internal("2001:db8::11"), internal("10.0.0.1"),
				corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
				corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})},
			pods: []corev1.Pod{pod("p1", "n1", "10.0.0.1", func(p *corev1.Pod) {
				p.Status.HostIPs = []corev1.HostIP{{IP: "10.0.0.1"}, {IP: "2001:db8::11"}}
			})},
			want: map[string][]netip.Addr{"n1": {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::11")}},
		},
		{
			name:  "a node without a speaker Pod is not admitted",
			nodes: []corev1.Node{node("n1", internal("10.0.0.1")), node("n2", internal("10.0.0.2"))},
			pods:  []corev1.Pod{pod("p1", "n1", "10.0.0.1", nil)},
			want:  map[string][]netip.Addr{"n1": {netip.MustParseAddr("10.0.0.1")}},
		},
		{
			name:  "a terminating speaker is still admitted (its leave must get through); an ended one is not",
			nodes: []corev1.Node{node("n1", internal("10.0.0.1")), node("n2", internal("10.0.0.2"))},
			pods: []corev1.Pod{
				pod("p1", "n1", "10.0.0.1", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
				pod("p2", "n2", "10.0.0.2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			},
			want: map[string][]netip.Addr{"n1": {netip.MustParseAddr("10.0.0.1")}},
		},
		{
			name:  "a Pending Pod without a host IP yet: the node's InternalIP",
			nodes: []corev1.Node{node("n1", internal("10.0.0.1"))},
			pods:  []corev1.Pod{pod("p1", "n1", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })},
			want:  map[string][]netip.Addr{"n1": {netip.MustParseAddr("10.0.0.1")}},
		},
		{
			name:  "unscheduled Pod, unknown node without host IP: nothing",
			nodes: []corev1.Node{node("n1", internal("10.0.0.1"))},
			pods:  []corev1.Pod{pod("p1", "", "", nil), pod("p2", "gone", "", nil)},
			want:  map[string][]netip.Addr{},
		},
		{
			name:  "a node with only an ExternalIP: the host IP the kubelet chose",
			nodes: []corev1.Node{node("n1", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"})},
			pods:  []corev1.Pod{pod("p1", "n1", "203.0.113.1", nil)},
			want:  map[string][]netip.Addr{"n1": {netip.MustParseAddr("203.0.113.1")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, errs := Build(Snapshot{Nodes: tc.nodes, SpeakerPods: tc.pods}, Options{MemberlistPort: 7946})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if diff := cmp.Diff(tc.want, w.SpeakerAddrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("SpeakerAddrs (-want +got):\n%s", diff)
			}
		})
	}
}
