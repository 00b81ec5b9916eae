package cluster_test

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker/cluster"
	"github.com/metalgate/metalgate/speaker/config"
)

// fullMeta is metadata as the API server returns it: everything the transforms drop is set.
func fullMeta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
		Labels: labels, CreationTimestamp: metav1.Now(), Finalizers: []string{"x.io/keep"},
		Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`,
			"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-25T00:00:00Z",
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: "owner"}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1"}},
	}
}

// lbService is a LoadBalancer Service with every field a real one has; opts adjust it.
func lbService(name string, ips []string, opts ...func(*corev1.Service)) corev1.Service {
	s := corev1.Service{
		ObjectMeta: fullMeta("default", name, map[string]string{"app": name}),
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}},
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// slice is an EndpointSlice of svc with one endpoint per entry of eps: node ("" = no nodeName,
// "-" = nodeName "") and ready ("y", "n", "?" = unset).
func slice(name, svc string, eps ...[2]string) discoveryv1.EndpointSlice {
	es := discoveryv1.EndpointSlice{
		ObjectMeta:  fullMeta("default", name, map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": svc}),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	if svc == "" {
		delete(es.Labels, discoveryv1.LabelServiceName)
	}
	for i, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses: []string{"10.1.0." + strconv.Itoa(i+1)}, Hostname: ptr.To("pod"), Zone: ptr.To("z1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod"},
			Conditions: discoveryv1.EndpointConditions{Serving: ptr.To(true), Terminating: ptr.To(false)},
		}
		switch e[0] {
		case "":
		case "-":
			ep.NodeName = ptr.To("")
		default:
			ep.NodeName = ptr.To(e[0])
		}
		switch e[1] {
		case "y":
			ep.Conditions.Ready = ptr.To(true)
		case "n":
			ep.Conditions.Ready, ep.Conditions.Serving = ptr.To(false), ptr.To(false)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

// baseSnapshot is four nodes running speakers (n3 not ready, n4 excluded), layer-2 pools (192.0.2.0/28; 192.0.2.16/28 on
// eth1 only; 192.0.2.8/29 on eth2 only, overlapping the first: the recorded pool decides) and a
// BGP pool (198.51.100.0/28) with one peer.
func baseSnapshot() config.Snapshot {
	var s config.Snapshot
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		node := corev1.Node{ObjectMeta: fullMeta("", n, map[string]string{"zone": n}),
			Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "203.0.113." + n[1:]}, {Type: corev1.NodeInternalIP, Address: "2001:db8::" + n[1:]},
					{Type: corev1.NodeHostName, Address: n}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Images:     []corev1.ContainerImage{{Names: []string{"registry.example/app@sha256:0123"}, SizeBytes: 1 << 20}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.35.4"},
			}}
		switch n {
		case "n3": // not ready: no speaker of its counts
			node.Status.Conditions[0].Status = corev1.ConditionFalse
		case "n4": // excluded twice over
			node.Labels[contract.LabelExcludeFromLB] = ""
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
		}
		s.Nodes = append(s.Nodes, node)
		s.SpeakerPods = append(s.SpeakerPods, corev1.Pod{ObjectMeta: fullMeta("metalgate-system", "speaker-"+n, nil),
			Spec: corev1.PodSpec{NodeName: n}, Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "203.0.113." + n[1:]}})
	}
	s.Pools = []v1alpha1.IPAddressPool{
		{ObjectMeta: fullMeta("metalgate-system", "l2", nil), Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/28"}}},
		{ObjectMeta: fullMeta("metalgate-system", "l2-eth1", nil), Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.16/28"}}},
		{ObjectMeta: fullMeta("metalgate-system", "l2-overlap", nil), Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.8/29"}}},
		{ObjectMeta: fullMeta("metalgate-system", "bgp", nil), Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"198.51.100.0/28"}}},
	}
	s.L2Advertisements = []v1alpha1.L2Advertisement{
		{ObjectMeta: fullMeta("metalgate-system", "l2", nil), Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"l2"}}},
		{ObjectMeta: fullMeta("metalgate-system", "eth1", nil), Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"l2-eth1"}, Interfaces: []string{"eth1"}}},
		{ObjectMeta: fullMeta("metalgate-system", "eth2", nil), Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"l2-overlap"}, Interfaces: []string{"eth2"}}},
	}
	s.BGPAdvertisements = []v1alpha1.BGPAdvertisement{{ObjectMeta: fullMeta("metalgate-system", "bgp", nil),
		Spec: v1alpha1.BGPAdvertisementSpec{IPAddressPools: []string{"bgp"}}}}
	s.BGPPeers = []v1alpha1.BGPPeer{{ObjectMeta: fullMeta("metalgate-system", "router", nil),
		Spec: v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64513, Address: "203.0.113.254"}}}
	return s
}

// trimmed returns s with its Services and EndpointSlices passed through the cache transforms
// (twice: a transform must be idempotent), and every object without managedFields, as the
// speaker's cache holds them.
func trimmed(t *testing.T, s config.Snapshot) config.Snapshot {
	t.Helper()
	out := s
	out.Services, out.EndpointSlices, out.Nodes = nil, nil, nil
	for _, n := range s.Nodes {
		got := trimTwice(t, cluster.TrimNode, n.DeepCopy())
		if len(got.Status.Images) != 0 || len(got.Annotations) != 0 {
			t.Fatalf("trimmed Node %s still has images or annotations: %+v", n.Name, got)
		}
		out.Nodes = append(out.Nodes, *got)
	}
	for _, svc := range s.Services {
		got := trimTwice(t, cluster.TrimService, svc.DeepCopy())
		if len(got.ManagedFields) != 0 || len(got.Spec.Ports) != 0 {
			t.Fatalf("trimmed Service %s still has managedFields or ports: %+v", svc.Name, got)
		}
		out.Services = append(out.Services, *got)
	}
	for _, es := range s.EndpointSlices {
		got := trimTwice(t, cluster.TrimEndpointSlice, es.DeepCopy())
		for _, ep := range got.Endpoints {
			if len(ep.Addresses) != 0 || ep.TargetRef != nil {
				t.Fatalf("trimmed EndpointSlice %s still has addresses or target refs: %+v", es.Name, got)
			}
		}
		out.EndpointSlices = append(out.EndpointSlices, *got)
	}
	return out
}

// trimTwice passes obj through the transform twice and fails unless the second pass changes
// nothing (a transform must be idempotent).
func trimTwice[T any](t *testing.T, trim func(any) (any, error), obj T) T {
	t.Helper()
	once, err := trim(obj)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := trim(once)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(once, twice) {
		t.Fatalf("transform is not idempotent: %+v, then %+v", once, twice)
	}
	got, ok := twice.(T)
	if !ok {
		t.Fatalf("transform returned %T, want %T", twice, obj)
	}
	return got
}

// TestTrimKeepsDecisions builds the World from full objects and from the trimmed ones the
// speaker's cache holds: it must be the same World (every VIP, mode, pool, readiness and
// Local flag), or a transform dropped a field the speaker reads.
func TestTrimKeepsDecisions(t *testing.T) {
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	class := func(c string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c }
	}
	pool := func(p string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations[contract.AnnotationAllocatedFromPool] = p }
	}
	tests := []struct {
		name     string
		services []corev1.Service
		slices   []discoveryv1.EndpointSlice
		wantVIPs int // announced entries in the World: the case must decide something
	}{
		{
			name:     "Cluster policy, ready endpoints on two nodes, many duplicates",
			services: []corev1.Service{lbService("web", []string{"192.0.2.1"})},
			slices: []discoveryv1.EndpointSlice{slice("web-a", "web", [2]string{"n1", "y"}, [2]string{"n1", "y"}, [2]string{"n2", "y"}, [2]string{"n2", "?"}),
				slice("web-b", "web", [2]string{"n1", "y"})},
			wantVIPs: 1,
		},
		{
			name:     "Local policy: ready, not ready, unset and nodeless endpoints",
			services: []corev1.Service{lbService("local", []string{"192.0.2.2"}, local)},
			slices: []discoveryv1.EndpointSlice{slice("local-a", "local",
				[2]string{"n1", "y"}, [2]string{"n2", "n"}, [2]string{"n2", "n"}, [2]string{"n3", "?"}, [2]string{"", "y"}, [2]string{"-", "y"}, [2]string{"", "n"})},
			wantVIPs: 1,
		},
		{
			name:     "Local policy, no ready endpoint at all",
			services: []corev1.Service{lbService("idle", []string{"192.0.2.3"}, local)},
			slices:   []discoveryv1.EndpointSlice{slice("idle-a", "idle", [2]string{"n1", "n"}, [2]string{"n2", "n"})},
			wantVIPs: 1,
		},
		{
			name: "a shared address, one sharer Local; a slice without the service-name label",
			services: []corev1.Service{lbService("b-shared", []string{"192.0.2.4"}), lbService("a-shared", []string{"192.0.2.4"}, local),
				lbService("c-other", []string{"192.0.2.6"})},
			slices: []discoveryv1.EndpointSlice{slice("a-1", "a-shared", [2]string{"n3", "y"}), slice("b-1", "b-shared", [2]string{"n1", "y"}),
				slice("orphan", "", [2]string{"n2", "y"})},
			wantVIPs: 2,
		},
		{
			name: "classes, types and the recorded pool decide what is served and where",
			services: []corev1.Service{
				lbService("ours", []string{"192.0.2.5"}, class("metalgate.io/metalgate")),
				lbService("theirs", []string{"192.0.2.7"}, class("other.io/lb")),
				lbService("nodeport", []string{"192.0.2.8"}, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }),
				lbService("eth1", []string{"192.0.2.17"}, pool("l2-eth1")),
				lbService("overlap", []string{"192.0.2.10"}, pool("l2-overlap")),
				lbService("hostname", nil, func(s *corev1.Service) {
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example"}, {IP: "garbage"}}
				}),
			},
			slices:   []discoveryv1.EndpointSlice{slice("ours-1", "ours", [2]string{"n2", "y"}), slice("eth1-1", "eth1", [2]string{"n3", "y"})},
			wantVIPs: 3,
		},
		{
			name:     "BGP and layer 2, dual addresses, IPv4-mapped",
			services: []corev1.Service{lbService("api", []string{"198.51.100.1", "::ffff:192.0.2.9"}, local, pool("bgp"))},
			slices:   []discoveryv1.EndpointSlice{slice("api-1", "api", [2]string{"n1", "y"}, [2]string{"n2", "n"})},
			wantVIPs: 2,
		},
	}
	opts := config.Options{LBClass: "metalgate.io/metalgate", MemberlistPort: 7946, Node: "n1"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			full := baseSnapshot()
			full.Services, full.EndpointSlices = tc.services, tc.slices
			wantW, wantErrs := config.Build(full, opts)
			gotW, gotErrs := config.Build(trimmed(t, full), opts)
			if len(wantW.VIPs) != tc.wantVIPs {
				t.Fatalf("the full objects give %d VIPs, want %d: %+v", len(wantW.VIPs), tc.wantVIPs, wantW.VIPs)
			}
			if diff := cmp.Diff(wantW, gotW, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
				t.Errorf("World from trimmed objects differs (-full +trimmed):\n%s", diff)
			}
			if diff := cmp.Diff(errStrings(wantErrs), errStrings(gotErrs)); diff != "" {
				t.Errorf("Build errors differ (-full +trimmed):\n%s", diff)
			}
		})
	}
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestTrimEndpointSliceDedupes: 100 ready endpoints on 3 nodes keep 3, not-ready ones stay
// apart from ready ones on the same node, and an unset nodeName stays apart from "".
func TestTrimEndpointSliceDedupes(t *testing.T) {
	var eps [][2]string
	for i := range 100 {
		eps = append(eps, [2]string{[]string{"n1", "n2", "n3"}[i%3], "y"})
	}
	eps = append(eps, [2]string{"n1", "n"}, [2]string{"n1", "?"}, [2]string{"", "y"}, [2]string{"-", "y"}, [2]string{"", "y"})
	es := slice("big", "web", eps...)
	got, err := cluster.TrimEndpointSlice(&es)
	if err != nil {
		t.Fatal(err)
	}
	type ep struct {
		Node  *string
		Ready *bool
	}
	var kept []ep
	for _, e := range got.(*discoveryv1.EndpointSlice).Endpoints {
		kept = append(kept, ep{e.NodeName, e.Conditions.Ready})
	}
	want := []ep{{ptr.To("n1"), ptr.To(true)}, {ptr.To("n2"), ptr.To(true)}, {ptr.To("n3"), ptr.To(true)},
		{ptr.To("n1"), ptr.To(false)}, {ptr.To("n1"), nil}, {nil, ptr.To(true)}, {ptr.To(""), ptr.To(true)}}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("kept endpoints (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{discoveryv1.LabelServiceName: "web"}, got.(*discoveryv1.EndpointSlice).Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestTrimPassesOtherObjects: a tombstone (or any other type) goes through unchanged.
func TestTrimPassesOtherObjects(t *testing.T) {
	tomb := toolscache.DeletedFinalStateUnknown{Key: "default/web", Obj: &corev1.Service{}}
	for name, f := range map[string]func(any) (any, error){
		"service": cluster.TrimService, "endpointslice": cluster.TrimEndpointSlice, "node": cluster.TrimNode,
	} {
		got, err := f(tomb)
		if err != nil || !reflect.DeepEqual(got, tomb) {
			t.Errorf("%s: tombstone became %+v, %v", name, got, err)
		}
	}
}

// TestBuildDoesNotMutateSnapshot: the reconciler lists the cache without deep copies
// (client.UnsafeDisableDeepCopy), so config.Build must leave every listed object as it was.
func TestBuildDoesNotMutateSnapshot(t *testing.T) {
	s := baseSnapshot()
	s.Services = []corev1.Service{lbService("z-web", []string{"192.0.2.1"}), lbService("a-api", []string{"198.51.100.1"}, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})}
	s.EndpointSlices = []discoveryv1.EndpointSlice{slice("z-1", "z-web", [2]string{"n2", "y"}), slice("a-1", "a-api", [2]string{"n1", "y"})}
	before := deepCopySnapshot(s)
	w, _ := config.Build(s, config.Options{LBClass: "metalgate.io/metalgate", MemberlistPort: 7946, Node: "n1"})
	if len(w.VIPs) != 2 {
		t.Fatalf("want 2 VIPs, got %+v", w.VIPs)
	}
	if diff := cmp.Diff(before, s); diff != "" {
		t.Errorf("Build changed its snapshot (-before +after):\n%s", diff)
	}
}

func deepCopySnapshot(s config.Snapshot) config.Snapshot {
	out := s
	out.Services = nil
	for i := range s.Services {
		out.Services = append(out.Services, *s.Services[i].DeepCopy())
	}
	out.EndpointSlices = nil
	for i := range s.EndpointSlices {
		out.EndpointSlices = append(out.EndpointSlices, *s.EndpointSlices[i].DeepCopy())
	}
	out.Nodes, out.SpeakerPods, out.Pools, out.L2Advertisements = nil, nil, nil, nil
	for i := range s.Nodes {
		out.Nodes = append(out.Nodes, *s.Nodes[i].DeepCopy())
	}
	for i := range s.SpeakerPods {
		out.SpeakerPods = append(out.SpeakerPods, *s.SpeakerPods[i].DeepCopy())
	}
	for i := range s.Pools {
		out.Pools = append(out.Pools, *s.Pools[i].DeepCopy())
	}
	for i := range s.L2Advertisements {
		out.L2Advertisements = append(out.L2Advertisements, *s.L2Advertisements[i].DeepCopy())
	}
	out.BGPPeers, out.BGPAdvertisements = nil, nil
	for i := range s.BGPPeers {
		out.BGPPeers = append(out.BGPPeers, *s.BGPPeers[i].DeepCopy())
	}
	for i := range s.BGPAdvertisements {
		out.BGPAdvertisements = append(out.BGPAdvertisements, *s.BGPAdvertisements[i].DeepCopy())
	}
	return out
}
