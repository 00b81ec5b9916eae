package controllers

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
)

func TestClaimName(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"100.64.0.1", "v4-100-64-0-1"},
		{"::ffff:100.64.0.1", "v4-100-64-0-1"},
		{"2001:db8::1", "v6-20010db8000000000000000000000001"},
		{"::", "v6-00000000000000000000000000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := ClaimName(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Errorf("ClaimName(%s) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}

func TestBuildRequest(t *testing.T) {
	base := func(mut func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"team": "a"}},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"b": "2", "a": "1"},
				Ports:    []corev1.ServicePort{{Port: 80}, {Protocol: corev1.ProtocolUDP, Port: 53}},
			},
		}
		if mut != nil {
			mut(s)
		}
		return s
	}
	tests := []struct {
		name    string
		svc     *corev1.Service
		want    allocator.Request
		wantErr string
	}{
		{
			name: "defaults",
			svc:  base(nil),
			want: allocator.Request{Key: "ns/web", Namespace: "ns", ServiceLabels: map[string]string{"team": "a"},
				Ports: []allocator.Port{{Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: 53}}},
		},
		{
			name: "annotations, dual stack, ETP Local",
			svc: base(func(s *corev1.Service) {
				s.Annotations = map[string]string{contract.AnnotationLoadBalancerIPs: " 2001:db8::5, 192.0.2.5", contract.AnnotationAddressPool: "p", contract.AnnotationAllowSharedIP: "k"}
				s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.Ports = nil
			}),
			want: allocator.Request{Key: "ns/web", Namespace: "ns", ServiceLabels: map[string]string{"team": "a"},
				Pool: "p", SharingKey: "k", BackendKey: "selector:a=1,b=2", Policy: allocator.RequireDualStack,
				Families:  []allocator.Family{allocator.IPv6, allocator.IPv4},
				Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("192.0.2.5")}},
		},
		{
			name: "spec.loadBalancerIP without families",
			svc:  base(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.9"; s.Spec.Ports = nil }),
			want: allocator.Request{Key: "ns/web", Namespace: "ns", ServiceLabels: map[string]string{"team": "a"},
				Families: []allocator.Family{allocator.IPv4}, Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.9")}},
		},
		{
			name: "bad annotation names the field",
			svc: base(func(s *corev1.Service) {
				s.Annotations = map[string]string{contract.AnnotationLoadBalancerIPs: "192.0.2.1,nope"}
			}),
			wantErr: `metadata.annotations[metalgate.io/loadBalancerIPs]: "nope" is not an IP address`,
		},
		{
			name:    "two of one family",
			svc:     base(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1, 192.0.2.2" }),
			wantErr: "spec.loadBalancerIP: more than one IPv4 address",
		},
		{
			name:    "zone refused",
			svc:     base(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "fe80::1%eth0" }),
			wantErr: "is not an IP address",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := buildRequest(tc.svc, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMetalLBAnnotations: MetalLB's names are read when metalgate.io's is absent, in the
// order metalgate.io, metallb.io, metallb.universe.tf; names that disagree with the one read
// are reported.
func TestMetalLBAnnotations(t *testing.T) {
	tests := []struct {
		name          string
		ann           map[string]string
		lbIP          string // spec.loadBalancerIP
		wantPool      string
		wantKey       string
		wantAddrs     string
		wantConflicts []string
		wantErr       string
	}{
		{name: "none"},
		{
			name: "metallb.io",
			ann: map[string]string{contract.AnnotationMetalLBAddressPool: "p", contract.AnnotationMetalLBAllowSharedIP: "k",
				contract.AnnotationMetalLBLoadBalancerIPs: "192.0.2.1"},
			wantPool: "p", wantKey: "k", wantAddrs: "192.0.2.1",
		},
		{
			name: "metallb.universe.tf",
			ann: map[string]string{contract.AnnotationMetalLBLegacyAddressPool: " p ", contract.AnnotationMetalLBLegacyAllowSharedIP: "k",
				contract.AnnotationMetalLBLegacyLoadBalancerIPs: "2001:db8::1, 192.0.2.1"},
			wantPool: "p", wantKey: "k", wantAddrs: "2001:db8::1,192.0.2.1",
		},
		{
			name: "all three agree: no conflict",
			ann: map[string]string{contract.AnnotationAddressPool: "p", contract.AnnotationMetalLBAddressPool: "p ", contract.AnnotationMetalLBLegacyAddressPool: "p",
				contract.AnnotationLoadBalancerIPs: "192.0.2.1,2001:db8::1", contract.AnnotationMetalLBLoadBalancerIPs: "2001:db8::1, 192.0.2.1"},
			wantPool: "p", wantAddrs: "192.0.2.1,2001:db8::1",
		},
		{
			name:     "metalgate.io wins",
			ann:      map[string]string{contract.AnnotationAddressPool: "a", contract.AnnotationMetalLBAddressPool: "b", contract.AnnotationMetalLBLegacyAddressPool: "c"},
			wantPool: "a",
			wantConflicts: []string{
				`annotation metallb.io/address-pool="b" is ignored: metalgate.io/address-pool="a" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`,
				`annotation metallb.universe.tf/address-pool="c" is ignored: metalgate.io/address-pool="a" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`,
			},
		},
		{
			name:          "metallb.io before metallb.universe.tf",
			ann:           map[string]string{contract.AnnotationMetalLBAllowSharedIP: "new", contract.AnnotationMetalLBLegacyAllowSharedIP: "old"},
			wantKey:       "new",
			wantConflicts: []string{`annotation metallb.universe.tf/allow-shared-ip="old" is ignored: metallb.io/allow-shared-ip="new" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`},
		},
		{
			name:          "an empty metalgate.io annotation still wins, and says so",
			ann:           map[string]string{contract.AnnotationAddressPool: "", contract.AnnotationMetalLBAddressPool: "b"},
			wantConflicts: []string{`annotation metallb.io/address-pool="b" is ignored: metalgate.io/address-pool="" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`},
		},
		{
			name:      "an alias wins over spec.loadBalancerIP, as metalgate.io's name does",
			ann:       map[string]string{contract.AnnotationMetalLBLegacyLoadBalancerIPs: "192.0.2.7"},
			lbIP:      "192.0.2.8",
			wantAddrs: "192.0.2.7",
		},
		{
			name:    "a bad alias names its own key",
			ann:     map[string]string{contract.AnnotationMetalLBLoadBalancerIPs: "192.0.2.1,nope", contract.AnnotationMetalLBLegacyLoadBalancerIPs: "192.0.2.1"},
			wantErr: `metadata.annotations[metallb.io/loadBalancerIPs]: "nope" is not an IP address`,
			wantConflicts: []string{
				`annotation metallb.universe.tf/loadBalancerIPs="192.0.2.1" is ignored: metallb.io/loadBalancerIPs="192.0.2.1,nope" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`,
			},
		},
		{
			name:      "a bad alias behind a good metalgate.io annotation is not read",
			ann:       map[string]string{contract.AnnotationLoadBalancerIPs: "192.0.2.1", contract.AnnotationMetalLBLoadBalancerIPs: "nope"},
			wantAddrs: "192.0.2.1",
			wantConflicts: []string{
				`annotation metallb.io/loadBalancerIPs="nope" is ignored: metalgate.io/loadBalancerIPs="192.0.2.1" takes precedence (metalgate.io, then metallb.io, then metallb.universe.tf)`,
			},
		},
		{
			name: "the controller's own metallb.io/ip-allocated-from-pool is not read",
			ann:  map[string]string{"metallb.io/ip-allocated-from-pool": "p"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: tc.ann},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: tc.lbIP},
			}
			if diff := cmp.Diff(tc.wantConflicts, AnnotationConflicts(svc)); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			got, err := buildRequest(svc, nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			for _, a := range got.Addresses {
				addrs = append(addrs, a.String())
			}
			if got.Pool != tc.wantPool || got.SharingKey != tc.wantKey || strings.Join(addrs, ",") != tc.wantAddrs {
				t.Errorf("pool %q, key %q, addresses %q; want %q, %q, %q", got.Pool, got.SharingKey, strings.Join(addrs, ","), tc.wantPool, tc.wantKey, tc.wantAddrs)
			}
		})
	}
}
