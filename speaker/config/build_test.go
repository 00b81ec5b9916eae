package config

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/speaker"
)

// The pieces Build is made of, each a pure function, tested on their own; TestBuild* test them
// together.

func TestNodeLabels(t *testing.T) {
	nodes := []corev1.Node{node("a", map[string]string{"x": "1"}), node("b", map[string]string{"x": "2"})}
	tests := []struct {
		name string
		want map[string]string
	}{
		{"b", map[string]string{"x": "2"}},
		{"missing", nil},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nodeLabels(nodes, tc.name)); diff != "" {
				t.Errorf("nodeLabels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestElectionNodes(t *testing.T) {
	cond := func(name string, typ corev1.NodeConditionType, st corev1.ConditionStatus, lbls map[string]string) corev1.Node {
		n := node(name, lbls)
		n.Status.Conditions = []corev1.NodeCondition{{Type: typ, Status: st}}
		return n
	}
	nodes := []corev1.Node{
		cond("e-notready", corev1.NodeReady, corev1.ConditionFalse, nil),
		cond("d-unknown", corev1.NodeReady, corev1.ConditionUnknown, nil),
		cond("c-nonet", corev1.NodeNetworkUnavailable, corev1.ConditionTrue, nil),
		node("b-labelled", map[string]string{contract.LabelExcludeFromLB: ""}),
		cond("a-ready", corev1.NodeReady, corev1.ConditionTrue, nil),
		node("f-nocondition", nil),
		cond("g-net-ok", corev1.NodeNetworkUnavailable, corev1.ConditionFalse, nil),
	}
	got, notReady := electionNodes(nodes)
	var names []string
	excluded := map[string]bool{}
	for _, n := range got {
		names = append(names, n.Name)
		if n.Excluded {
			excluded[n.Name] = true
		}
	}
	if diff := cmp.Diff([]string{"a-ready", "b-labelled", "c-nonet", "d-unknown", "e-notready", "f-nocondition", "g-net-ok"}, names); diff != "" {
		t.Errorf("nodes, sorted by name (-want +got):\n%s", diff)
	}
	// The exclusion label counts whatever its value (even empty); an unreachable network
	// excludes; a node that is merely not ready is a candidate the quorum leaves out.
	if diff := cmp.Diff(map[string]bool{"b-labelled": true, "c-nonet": true}, excluded); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
	// Unknown is not ready; no Ready condition at all is.
	if diff := cmp.Diff(map[string]bool{"d-unknown": true, "e-notready": true}, notReady); diff != "" {
		t.Errorf("notReady (-want +got):\n%s", diff)
	}
}

func TestLiveSpeakers(t *testing.T) {
	pod := func(nodeName, hostIP string, mut func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: hostIP}}
		if mut != nil {
			mut(&p)
		}
		return p
	}
	tests := []struct {
		name      string
		pods      []corev1.Pod
		notReady  map[string]bool
		wantNodes []string
		wantPeers []string
	}{
		{
			name: "terminating, unscheduled, ended and not-ready-node speakers are not live",
			pods: []corev1.Pod{
				pod("a", "10.0.0.1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }),
				pod("", "10.0.0.2", nil),
				pod("c", "10.0.0.3", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				pod("d", "10.0.0.4", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
				pod("e", "10.0.0.5", nil),
			},
			notReady: map[string]bool{"e": true},
		},
		{
			name:      "sorted and without duplicates; a speaker without host IP counts but has no peer address",
			pods:      []corev1.Pod{pod("z", "10.0.0.9", nil), pod("b", "", nil), pod("z", "10.0.0.9", nil), pod("a", "2001:db8::1", nil)},
			wantNodes: []string{"a", "b", "z"},
			wantPeers: []string{"10.0.0.9:7946", "[2001:db8::1]:7946"},
		},
		{
			name:      "pending pods on a ready node count (they are scheduled)",
			pods:      []corev1.Pod{pod("a", "10.0.0.1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })},
			wantNodes: []string{"a"}, wantPeers: []string{"10.0.0.1:7946"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, peers := liveSpeakers(tc.pods, tc.notReady, 7946)
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPeers, peers); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnnouncedVIPs(t *testing.T) {
	rng := func(first, last string) []allocator.Range {
		return []allocator.Range{{First: netip.MustParseAddr(first), Last: netip.MustParseAddr(last)}}
	}
	l2 := []*l2Pool{
		{addressPool: addressPool{name: "l2a", ranges: rng("192.0.2.0", "192.0.2.255")}, interfaces: []string{"eth1"}},
		{addressPool: addressPool{name: "l2b", ranges: rng("192.0.2.0", "192.0.2.255")}},
	}
	bgpPools := []*bgpPool{{addressPool: addressPool{name: "bgp", ranges: rng("198.51.100.0", "198.51.100.255")}}}
	both := &bgpPool{addressPool: addressPool{name: "both", ranges: rng("192.0.2.0", "192.0.2.255")}}
	bgpB := &bgpPool{addressPool: addressPool{name: "bgp-b", ranges: rng("198.51.100.0", "198.51.100.127")}}
	ready := map[string]map[string]bool{
		"ns/web":   {"n1": true},
		"ns/api":   {"n2": true},
		"ns/local": {"n3": true},
	}
	type vip struct {
		VIP, Mode, Service, Pool string
		Local, AnyReady          bool
		Ready                    []string
	}
	summarise := func(vs []speaker.VIP) []vip {
		var out []vip
		for _, v := range vs {
			var r []string
			for n := range v.ReadyNodes {
				r = append(r, n)
			}
			if len(r) > 1 {
				t.Fatalf("test expects at most one ready node per VIP, got %v", r)
			}
			out = append(out, vip{v.VIP.String(), string(v.Mode), v.Service, v.Pool, v.Local, v.AnyReady, r})
		}
		return out
	}
	local := func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	tests := []struct {
		name     string
		services []corev1.Service
		bgp      []*bgpPool
		want     []vip
	}{
		{
			name: "other classes, other types, hostnames and addresses outside every pool are not announced",
			services: []corev1.Service{
				svc("other", func(s *corev1.Service) { c := "example.com/lb"; s.Spec.LoadBalancerClass = &c }, "192.0.2.1"),
				svc("cip", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }, "192.0.2.2"),
				svc("host", func(s *corev1.Service) {
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
				}),
				svc("outside", nil, "203.0.113.1"),
			},
		},
		{
			name:     "our class named explicitly; an IPv4-mapped address is announced as IPv4",
			services: []corev1.Service{svc("web", func(s *corev1.Service) { c := "mine"; s.Spec.LoadBalancerClass = &c }, "::ffff:192.0.2.7")},
			want:     []vip{{VIP: "192.0.2.7", Mode: "layer2", Service: "ns/web", Pool: "l2a", AnyReady: true}},
		},
		{
			name: "the recorded pool wins among layer-2 pools that hold the address",
			services: []corev1.Service{svc("web", func(s *corev1.Service) {
				s.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: "l2b"}
			}, "192.0.2.7")},
			want: []vip{{VIP: "192.0.2.7", Mode: "layer2", Service: "ns/web", Pool: "l2b", AnyReady: true}},
		},
		{
			name: "a shared VIP: named by the first Service by name, Local if any sharer is, ready nodes only of Local ones",
			services: []corev1.Service{
				svc("web", nil, "192.0.2.9"),
				svc("local", local, "192.0.2.9"),
			},
			want: []vip{{VIP: "192.0.2.9", Mode: "layer2", Service: "ns/local", Pool: "l2a", Local: true, AnyReady: true, Ready: []string{"n3"}}},
		},
		{
			name:     "no ready endpoint: announced with AnyReady false (the election decides)",
			services: []corev1.Service{svc("idle", nil, "192.0.2.3")},
			want:     []vip{{VIP: "192.0.2.3", Mode: "layer2", Service: "ns/idle", Pool: "l2a"}},
		},
		{
			name:     "BGP only",
			services: []corev1.Service{svc("api", nil, "198.51.100.1")},
			want:     []vip{{VIP: "198.51.100.1", Mode: "bgp", Service: "ns/api", Pool: "bgp", AnyReady: true}},
		},
		{
			name: "the recorded pool wins among BGP pools that hold the address; a recorded pool that does not hold it is ignored",
			services: []corev1.Service{
				svc("api", func(s *corev1.Service) {
					s.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: "bgp-b"}
				}, "198.51.100.1"),
				svc("web", func(s *corev1.Service) {
					s.Annotations = map[string]string{contract.AnnotationAllocatedFromPool: "bgp-b"}
				}, "198.51.100.200"),
			},
			bgp: []*bgpPool{bgpPools[0], bgpB},
			want: []vip{
				{VIP: "198.51.100.1", Mode: "bgp", Service: "ns/api", Pool: "bgp-b", AnyReady: true},
				{VIP: "198.51.100.200", Mode: "bgp", Service: "ns/web", Pool: "bgp", AnyReady: true},
			},
		},
		{
			name:     "an address in a layer-2 and a BGP pool is announced in both modes, sorted by address then mode",
			services: []corev1.Service{svc("web", nil, "192.0.2.5"), svc("api", nil, "198.51.100.1", "192.0.2.4")},
			bgp:      []*bgpPool{bgpPools[0], both},
			want: []vip{
				{VIP: "192.0.2.4", Mode: "bgp", Service: "ns/api", Pool: "both", AnyReady: true},
				{VIP: "192.0.2.4", Mode: "layer2", Service: "ns/api", Pool: "l2a", AnyReady: true},
				{VIP: "192.0.2.5", Mode: "bgp", Service: "ns/web", Pool: "both", AnyReady: true},
				{VIP: "192.0.2.5", Mode: "layer2", Service: "ns/web", Pool: "l2a", AnyReady: true},
				{VIP: "198.51.100.1", Mode: "bgp", Service: "ns/api", Pool: "bgp", AnyReady: true},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bp := tc.bgp
			if bp == nil {
				bp = bgpPools
			}
			got := summarise(announcedVIPs(tc.services, ready, "mine", l2, bp))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
		})
	}
}
