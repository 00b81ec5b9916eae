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
				s.Annotations = map[string]string{AnnotationLoadBalancerIPs: " 2001:db8::5, 192.0.2.5", AnnotationAddressPool: "p", AnnotationAllowSharedIP: "k"}
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
				s.Annotations = map[string]string{AnnotationLoadBalancerIPs: "192.0.2.1,nope"}
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
