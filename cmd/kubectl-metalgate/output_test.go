package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// TestOutputFormats prints the rows of pools and allocations in each -o format: the table and
// wide columns, and JSON and YAML decoded back into the documented {"kind", "items"} shape.
func TestOutputFormats(t *testing.T) {
	poolObjs := []v1alpha1.IPAddressPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: v1alpha1.IPAddressPoolSpec{
			Addresses: []v1alpha1.AddressRange{"192.0.2.0/30", "2001:db8::/126"}, AvoidBuggyIPs: true,
			AddressSharing: "AcrossNamespaces", ServiceAllocation: &v1alpha1.ServiceAllocation{Priority: 5}},
			Status: v1alpha1.IPAddressPoolStatus{AssignedIPv4: 1, AvailableIPv4: 3, AssignedIPv6: 2, AvailableIPv6: 2}},
	}
	svcs := []corev1.Service{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "gw-shop-web", Annotations: map[string]string{
			contract.AnnotationAllocatedFromPool: "dual", contract.AnnotationGateway: "shop/web"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP}}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}},
	}}
	pools := poolItems(poolObjs)
	allocs := allocationItems(svcs, map[string]string{"192.0.2.1": "layer2 n1"})
	wantPools := []poolItem{
		{Pool: "dual", Family: "IPv4", Assigned: 1, Available: 3, AutoAssign: true, Addresses: []string{"192.0.2.0/30"}, Problems: []string{},
			AvoidBuggyIPs: true, AddressSharing: "AcrossNamespaces", Priority: 5},
		{Pool: "dual", Family: "IPv6", Assigned: 2, Available: 2, AutoAssign: true, Addresses: []string{"2001:db8::/126"}, Problems: []string{},
			AvoidBuggyIPs: true, AddressSharing: "AcrossNamespaces", Priority: 5},
	}
	wantAllocs := []allocationItem{{Namespace: "shop", Service: "gw-shop-web", Gateway: "shop/web", Address: "192.0.2.1", Pool: "dual",
		Announcer: "layer2 n1", LoadBalancerClass: "-", ExternalTrafficPolicy: "Local", Ports: []string{"443/TCP"}, IPFamilies: []string{"IPv4"}}}

	render := func(format outputFormat, what string) string {
		var out bytes.Buffer
		var err error
		if what == "pools" {
			err = printList(&out, format, "PoolList", pools, poolColumns())
		} else {
			err = printList(&out, format, "AllocationList", allocs, allocationColumns())
		}
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	// decode reads a JSON or YAML document strictly (no field the row type lacks).
	decode := func(t *testing.T, format outputFormat, b string, into any) {
		t.Helper()
		var err error
		if format == outputYAML {
			err = yaml.UnmarshalStrict([]byte(b), into)
		} else {
			dec := json.NewDecoder(strings.NewReader(b))
			dec.DisallowUnknownFields()
			err = dec.Decode(into)
		}
		if err != nil {
			t.Fatalf("decode %s: %v\n%s", format, err, b)
		}
	}

	tests := []struct {
		name, what      string
		format          outputFormat
		want, dontWant  []string // table and wide: lines (or headers) that must and must not appear
		wantKind        string   // json and yaml
		wantPools       []poolItem
		wantAllocations []allocationItem
	}{
		{name: "pools table", what: "pools", format: outputTable,
			want:     []string{"POOL  FAMILY  ASSIGNED  AVAILABLE  AUTO-ASSIGN  ADDRESSES       PROBLEMS\n", "dual  IPv6    2         2          true         2001:db8::/126  -\n"},
			dontWant: []string{"AVOID-BUGGY-IPS", "AcrossNamespaces"}},
		{name: "pools wide", what: "pools", format: outputWide,
			want: []string{"PROBLEMS  AVOID-BUGGY-IPS  ADDRESS-SHARING   PRIORITY\n", "192.0.2.0/30    -         true             AcrossNamespaces  5\n"}},
		{name: "pools json", what: "pools", format: outputJSON, wantKind: "PoolList", wantPools: wantPools},
		{name: "pools yaml", what: "pools", format: outputYAML, wantKind: "PoolList", wantPools: wantPools},
		{name: "allocations table", what: "allocations", format: outputTable,
			want:     []string{"shop       gw-shop-web (Gateway shop/web)  192.0.2.1  dual  layer2 n1  -      Local\n"},
			dontWant: []string{"PORTS", "443/TCP"}},
		{name: "allocations wide", what: "allocations", format: outputWide,
			want: []string{"TRAFFIC-POLICY  PORTS    IP-FAMILIES\n", "Local           443/TCP  IPv4\n"}},
		{name: "allocations json", what: "allocations", format: outputJSON, wantKind: "AllocationList", wantAllocations: wantAllocs},
		{name: "allocations yaml", what: "allocations", format: outputYAML, wantKind: "AllocationList", wantAllocations: wantAllocs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := render(tc.format, tc.what)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(got, w) {
					t.Errorf("output has %q:\n%s", w, got)
				}
			}
			if tc.wantKind == "" {
				return
			}
			if tc.what == "pools" {
				var doc list[poolItem]
				decode(t, tc.format, got, &doc)
				if diff := cmp.Diff(list[poolItem]{Kind: tc.wantKind, Items: tc.wantPools}, doc); diff != "" {
					t.Errorf("document (-want +got):\n%s", diff)
				}
			} else {
				var doc list[allocationItem]
				decode(t, tc.format, got, &doc)
				if diff := cmp.Diff(list[allocationItem]{Kind: tc.wantKind, Items: tc.wantAllocations}, doc); diff != "" {
					t.Errorf("document (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestOutputEmpty: a listing with no rows is still one document whose items are an empty
// list (not null, which a script iterating .items would trip on), and a table with its header.
func TestOutputEmpty(t *testing.T) {
	tests := []struct {
		format outputFormat
		want   string
	}{
		{outputJSON, "{\n  \"kind\": \"PoolList\",\n  \"items\": []\n}\n"},
		{outputYAML, "items: []\nkind: PoolList\n"},
		{outputTable, "POOL  FAMILY  ASSIGNED  AVAILABLE  AUTO-ASSIGN  ADDRESSES  PROBLEMS\n"},
	}
	for _, tc := range tests {
		t.Run(string(tc.format), func(t *testing.T) {
			var out bytes.Buffer
			if err := printList(&out, tc.format, "PoolList", poolItems(nil), poolColumns()); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}
