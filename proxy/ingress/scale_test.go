package ingress

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/table"
)

// scaleInput makes n Ingresses (one host, two paths each), each with its own Service and
// EndpointSlice of perSvc ready endpoints: n=10,000 and perSvc=10 is 100,000 endpoints.
func scaleInput(n, perSvc int) Input {
	in := Input{Classes: []*networkingv1.IngressClass{class("metalgate")}}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("ns%d", i%100)
		name := fmt.Sprintf("app%d", i)
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0))},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr("metalgate")}}
		var paths []networkingv1.HTTPIngressPath
		for _, p := range []string{"/", "/api"} {
			paths = append(paths, networkingv1.HTTPIngressPath{Path: p, PathType: ptr(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}})
		}
		ing.Spec.Rules = []networkingv1.IngressRule{{Host: name + ".example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}
		in.Ingresses = append(in.Ingresses, ing)
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: table.EndpointSliceController}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}}}
		for j := 0; j < perSvc; j++ {
			k := i*perSvc + j
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
		}
		in.Slices = append(in.Slices, s)
	}
	return in
}

// TestScale10kIngresses builds a table from 10,000 Ingresses and 100,000 endpoints and
// reports the time, the heap the table holds, and the process's peak RSS (VmHWM: the input
// objects, as an informer cache would hold them, plus the table). Run by hack/bench-proxy.sh;
// skipped unless METALGATE_SCALE_TEST=1 (it allocates a few hundred MiB).
func TestScale10kIngresses(t *testing.T) {
	if os.Getenv("METALGATE_SCALE_TEST") != "1" {
		t.Skip("set METALGATE_SCALE_TEST=1 to build a 10,000-Ingress table (hack/bench-proxy.sh does)")
	}
	in := scaleInput(10000, 10)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	tab, problems := Build(in)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(problems) > 0 {
		t.Fatalf("%d problems, first %v", len(problems), problems[0])
	}
	if r := tab.Lookup("app9999.example.com", "/api/x"); r == nil || len(r.Backend.Endpoints) != 10 {
		t.Fatalf("lookup: %+v", r)
	}
	// A second build, as after a change, while the first table is still live (the swap).
	start = time.Now()
	tab2, _ := Build(in)
	took2 := time.Since(start)
	runtime.KeepAlive(tab)
	// An endpoint-only change of one Service (the fast path): one endpoint of app5000 moves.
	id, changed := scaleEndpointChange(in, 5000)
	start = time.Now()
	tab3, ok := table.PatchEndpoints(tab2, changed)
	tookPatch := time.Since(start)
	if !ok || tab3 == tab2 {
		t.Fatalf("PatchEndpoints refused or changed nothing: ok=%v", ok)
	}
	if r := tab3.Lookup(id.Name+".example.com", "/"); r == nil || !slices.Contains(r.Backend.Endpoints, scaleMovedEndpoint) {
		t.Fatalf("patched table does not route to the new endpoint: %+v", r)
	}
	runtime.KeepAlive(tab2)
	tableMiB := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	hwm := procStatusKiB(t, "VmHWM") / 1024
	fmt.Printf("SCALE ingresses=10000 endpoints=100000 build_ms=%d rebuild_ms=%d patch_us=%d table_heap_mib=%.1f total_heap_mib=%.1f rss_hwm_mib=%.0f\n",
		took.Milliseconds(), took2.Milliseconds(), tookPatch.Microseconds(), tableMiB, float64(after.HeapAlloc)/(1<<20), hwm)
}

// scaleMovedEndpoint is where scaleEndpointChange moves an endpoint to.
const scaleMovedEndpoint = "10.255.255.1:8080"

// scaleEndpointChange is an endpoint-only change of Service app<i> of scaleInput: its slice
// with the first endpoint replaced by scaleMovedEndpoint. It returns the Service and
// PatchEndpoints's argument.
func scaleEndpointChange(in Input, i int) (types.NamespacedName, map[types.NamespacedName][]*discoveryv1.EndpointSlice) {
	s := in.Slices[i].DeepCopy()
	s.Endpoints[0].Addresses = []string{strings.TrimSuffix(scaleMovedEndpoint, ":8080")}
	id := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
	return id, map[types.NamespacedName][]*discoveryv1.EndpointSlice{id: {s}}
}

// BenchmarkPatchVsBuild10k compares the two ways a table follows an endpoint change of one
// Service at 10,000 Ingresses and 100,000 endpoints: a full Build and PatchEndpoints.
func BenchmarkPatchVsBuild10k(b *testing.B) {
	in := scaleInput(10000, 10)
	tab, _ := Build(in)
	b.Run("Build", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			Build(in)
		}
	})
	b.Run("PatchEndpoints", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, changed := scaleEndpointChange(in, 5000)
			if _, ok := table.PatchEndpoints(tab, changed); !ok {
				b.Fatal("patch refused")
			}
		}
	})
}

func procStatusKiB(t *testing.T, field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return n
		}
	}
	return 0
}

func BenchmarkLookup(b *testing.B) {
	tab, _ := Build(scaleInput(1000, 2))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if tab.Lookup("app500.example.com", "/api/users/1") == nil {
			b.Fatal("no route")
		}
	}
}
