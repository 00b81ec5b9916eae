package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

func TestAssignsFromPool(t *testing.T) {
	kube.Need(t)
	startController(t)
	pool(t, "assign", nil, "192.0.2.0/30")
	ns := namespace(t, nil)
	service(t, ns, "web")
	waitIPs(t, ns, "web", "192.0.2.0")

	s := getService(t, ns, "web")
	if got := s.Annotations[contract.AnnotationAllocatedFromPool]; got != "assign" {
		t.Errorf("pool annotation = %q, want %q", got, "assign")
	}
	if m := s.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %v, want VIP", m)
	}
	var claim v1alpha1.IPAddressClaim
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Name: "v4-192-0-2-0"}, &claim); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(claim.Spec.Holders) != 1 || claim.Spec.Holders[0].UID != s.UID || claim.Spec.Pool != "assign" {
		t.Errorf("claim = %+v, want one holder %s from pool assign", claim.Spec, s.UID)
	}
	testenv.Eventually(t, 20*time.Second, "pool assign counts the address", func() error {
		var p v1alpha1.IPAddressPool
		if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: controllers.DefaultNamespace, Name: "assign"}, &p); err != nil {
			return err
		}
		if p.Status.AssignedIPv4 != 1 || p.Status.AvailableIPv4 != 3 {
			return fmt.Errorf("pool status %+v, want 1 assigned and 3 available", p.Status)
		}
		return nil
	})

	// Deleting the Service releases the address: no finalizer, claim gone, next one gets it.
	if err := k8sClient.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the claim is deleted with its Service", func() error {
		err := k8sClient.Get(context.Background(), types.NamespacedName{Name: "v4-192-0-2-0"}, &claim)
		if ignoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return errors.New("claim still exists")
		}
		return nil
	})
	service(t, ns, "next")
	waitIPs(t, ns, "next", "192.0.2.0")
}

func TestRequests(t *testing.T) {
	kube.Need(t)
	startController(t)
	pool(t, "req-a", nil, "198.51.100.10-198.51.100.12")
	pool(t, "req-manual", func(p *v1alpha1.IPAddressPool) { p.Spec.AutoAssign = ptr.To(false) }, "203.0.113.0/29")
	pool(t, "req-v6", nil, "2001:db8:1::/120")
	ns := namespace(t, nil)

	// Each step runs in order against the same controller: later steps see earlier Services.
	steps := []struct {
		desc    string
		name    string
		opts    []svcOpt
		wantIPs string
		warn    string // substring of a Warning event, when allocation must fail
	}{
		{desc: "first free of the first pool", name: "a", wantIPs: "198.51.100.10"},
		{desc: "requested address by annotation", name: "b", opts: []svcOpt{withAnnotation(contract.AnnotationLoadBalancerIPs, "198.51.100.12")}, wantIPs: "198.51.100.12"},
		{desc: "requested address held by another Service", name: "c", opts: []svcOpt{withAnnotation(contract.AnnotationLoadBalancerIPs, "198.51.100.12")}, warn: "198.51.100.12"},
		{desc: "spec.loadBalancerIP honoured", name: "d", opts: []svcOpt{func(s *corev1.Service) { s.Spec.LoadBalancerIP = "203.0.113.3" }}, wantIPs: "203.0.113.3"},
		{desc: "autoAssign false pool by name", name: "e", opts: []svcOpt{withAnnotation(contract.AnnotationAddressPool, "req-manual")}, wantIPs: "203.0.113.0"},
		{desc: "address in no pool", name: "f", opts: []svcOpt{withAnnotation(contract.AnnotationLoadBalancerIPs, "192.0.2.77")}, warn: "192.0.2.77"},
		{desc: "unknown pool", name: "g", opts: []svcOpt{withAnnotation(contract.AnnotationAddressPool, "nope")}, warn: "nope"},
		{desc: "bad requested address names the field", name: "h", opts: []svcOpt{withAnnotation(contract.AnnotationLoadBalancerIPs, "not-an-ip")}, warn: contract.AnnotationLoadBalancerIPs},
		{desc: "IPv6 single stack", name: "i", opts: []svcOpt{withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)}, wantIPs: "2001:db8:1::"},
		{desc: "dual stack from one pool fails over to single when preferred", name: "j", opts: []svcOpt{withFamilies(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)}, wantIPs: "198.51.100.11"},
		{desc: "require dual stack without a dual pool", name: "k", opts: []svcOpt{withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)}, warn: "IPv"},
		{desc: "pool exhausted", name: "l", warn: "exhausted"},
		{desc: "sharing key, other port", name: "m", opts: []svcOpt{withAnnotation(contract.AnnotationAllowSharedIP, "k1"), withAnnotation(contract.AnnotationAddressPool, "req-manual"), withPort(corev1.ProtocolTCP, 443)}, wantIPs: "203.0.113.1"},
		{desc: "same key, disjoint port shares", name: "n", opts: []svcOpt{withAnnotation(contract.AnnotationAllowSharedIP, "k1"), withAnnotation(contract.AnnotationLoadBalancerIPs, "203.0.113.1"), withPort(corev1.ProtocolUDP, 443)}, wantIPs: "203.0.113.1"},
		{desc: "same key, same port refused", name: "o", opts: []svcOpt{withAnnotation(contract.AnnotationAllowSharedIP, "k1"), withAnnotation(contract.AnnotationLoadBalancerIPs, "203.0.113.1"), withPort(corev1.ProtocolTCP, 443)}, warn: "443"},
		{desc: "other class ignored", name: "p", opts: []svcOpt{func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }}},
		// One worker takes Services in order: once "q" has its address, "p" has been seen.
		{desc: "next Service after the ignored one", name: "q", opts: []svcOpt{withAnnotation(contract.AnnotationAddressPool, "req-manual")}, wantIPs: "203.0.113.2"},
	}
	for _, st := range steps {
		t.Run(st.desc, func(t *testing.T) {
			service(t, ns, st.name, st.opts...)
			switch {
			case st.warn != "":
				warning(t, ns, st.name, "", st.warn)
				if got := ips(getService(t, ns, st.name)); got != "" {
					t.Errorf("failed allocation left addresses %q", got)
				}
			case st.wantIPs != "":
				waitIPs(t, ns, st.name, st.wantIPs)
			}
		})
	}
	if got := ips(getService(t, ns, "p")); got != "" {
		t.Errorf("Service of another class got %q", got)
	}
	assertNoAddressHeldTwice(t)
}

func TestPoolEditReallocates(t *testing.T) {
	kube.Need(t)
	startController(t)
	p := pool(t, "edit", nil, "192.0.2.64/30", "192.0.2.128/30")
	ns := namespace(t, nil)
	service(t, ns, "keep", withAnnotation(contract.AnnotationLoadBalancerIPs, "192.0.2.129"))
	service(t, ns, "move")
	waitIPs(t, ns, "keep", "192.0.2.129")
	waitIPs(t, ns, "move", "192.0.2.64")

	// Drop the first range: "move" must be re-allocated, "keep" must not change. A patch of
	// the spec alone: the controller writes the pool's status concurrently, so an Update of
	// the object read a moment ago may conflict.
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: controllers.DefaultNamespace, Name: "edit"}, p); err != nil {
		t.Fatal(err)
	}
	edited := p.DeepCopy()
	edited.Spec.Addresses = []v1alpha1.AddressRange{"192.0.2.128/30"}
	if err := k8sClient.Patch(context.Background(), edited, client.MergeFrom(p)); err != nil {
		t.Fatal(err)
	}
	waitIPs(t, ns, "move", "192.0.2.128")
	waitIPs(t, ns, "keep", "192.0.2.129")
	assertNoAddressHeldTwice(t)
}

func TestOverlappingPoolsReported(t *testing.T) {
	kube.Need(t)
	startController(t)
	pool(t, "over-a", nil, "192.0.2.200/29")
	pool(t, "over-b", nil, "192.0.2.204-192.0.2.210")
	for _, name := range []string{"over-a", "over-b"} {
		testenv.Eventually(t, 20*time.Second, "pool reports the overlap", func() error {
			var p v1alpha1.IPAddressPool
			if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: controllers.DefaultNamespace, Name: name}, &p); err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1alpha1.ConditionOverlap && c.Status == metav1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("%s conditions %+v: no Overlapping=True", name, p.Status.Conditions)
		})
	}
}

// TestRestartKeepsAssignments kills the controller half-way through 200 Services and starts a
// new one: no Service changes its address, no address is held twice, all end up allocated.
func TestRestartKeepsAssignments(t *testing.T) {
	kube.Need(t)
	const n = 200
	pool(t, "restart", nil, "10.200.0.0/24")
	ns := namespace(t, nil)
	// The first controller is slowed down (one worker, 20 requests/s: a few Services a
	// second) so that the restart surely interrupts it: at full speed it allocates all 200
	// before the test can look.
	slow := rest.CopyConfig(cfg)
	slow.QPS, slow.Burst = 20, 20
	stop := startControllerWith(t, slow, controllers.Options{ServiceWorkers: 1})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := createService(ns, fmt.Sprintf("s%03d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Kill it mid-way: once some but not all Services have addresses.
	seen := map[string]string{}
	testenv.Eventually(t, 60*time.Second, "a quarter of the Services allocated by the slow controller", func() error {
		var list corev1.ServiceList
		if err := k8sClient.List(context.Background(), &list); err != nil {
			return err
		}
		done := 0
		for _, s := range list.Items {
			if s.Namespace == ns && ips(&s) != "" {
				done++
			}
		}
		if done < n/4 {
			return fmt.Errorf("%d of %d allocated", done, n)
		}
		return nil
	})
	stop()
	snapshot := func() map[string]string {
		var list corev1.ServiceList
		if err := k8sClient.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Items {
			if s.Namespace == ns {
				out[s.Name] = ips(&s)
			}
		}
		return out
	}
	before := snapshot()
	for name, ip := range before {
		if ip != "" {
			seen[name] = ip
		}
	}
	if len(seen) == n {
		t.Fatalf("all %d allocated before the restart: the test did not interrupt anything", n)
	}
	t.Logf("restart after %d of %d allocated", len(seen), n)

	startController(t)
	testenv.Eventually(t, 90*time.Second, "every Service allocated after the restart", func() error {
		after := snapshot()
		missing := 0
		for _, ip := range after {
			if ip == "" {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d Services still without an address", missing)
		}
		return nil
	})
	after := snapshot()
	for name, ip := range seen {
		if after[name] != ip {
			t.Errorf("%s changed address across the restart: %s -> %s", name, ip, after[name])
		}
	}
	assertNoAddressHeldTwice(t)
}

// TestRivalsNeverDoubleAssign runs two controllers at once with leader election off.
func TestRivalsNeverDoubleAssign(t *testing.T) {
	kube.Need(t)
	const n = 120
	pool(t, "rivals", nil, "10.201.0.0/24")
	ns := namespace(t, nil)
	startController(t)
	startController(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := createService(ns, fmt.Sprintf("r%03d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	testenv.Eventually(t, 120*time.Second, "every Service allocated by the rivals", func() error {
		var list corev1.ServiceList
		if err := k8sClient.List(context.Background(), &list); err != nil {
			return err
		}
		missing := 0
		for _, s := range list.Items {
			if s.Namespace == ns && ips(&s) == "" {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d Services still without an address", missing)
		}
		return nil
	})
	assertNoAddressHeldTwice(t)
	var claims v1alpha1.IPAddressClaimList
	if err := k8sClient.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if len(c.Spec.Holders) > 1 {
			t.Errorf("claim %s has %d holders without sharing", c.Name, len(c.Spec.Holders))
		}
	}
}

// TestStaleClaimReclaimed: a claim whose holder no longer exists does not block its address.
func TestStaleClaimReclaimed(t *testing.T) {
	kube.Need(t)
	pool(t, "stale", nil, "192.0.2.240/30")
	ns := namespace(t, nil)
	stale := &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: controllers.ClaimName(netip.MustParseAddr("192.0.2.241"))},
		Spec: v1alpha1.IPAddressClaimSpec{Address: "192.0.2.241", Pool: "stale", Holders: []v1alpha1.ClaimHolder{
			{Namespace: ns, Name: "gone", UID: "00000000-0000-0000-0000-000000000000"},
		}},
	}
	if err := k8sClient.Create(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), stale) })
	startController(t)
	s := service(t, ns, "wants-it", withAnnotation(contract.AnnotationLoadBalancerIPs, "192.0.2.241"))
	waitIPs(t, ns, "wants-it", "192.0.2.241")
	var claim v1alpha1.IPAddressClaim
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Name: stale.Name}, &claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.Spec.Holders) != 1 || claim.Spec.Holders[0].UID != s.UID {
		t.Errorf("claim holders = %+v, want only %s", claim.Spec.Holders, s.UID)
	}
}

// TestDeleteNeverWaitsForController: with the controller down, deleting a Service that holds an
// address completes at once (no finalizer), and the next controller frees the address.
func TestDeleteNeverWaitsForController(t *testing.T) {
	kube.Need(t)
	pool(t, "nodelay", nil, "192.0.2.248/30")
	ns := namespace(t, nil)
	stop := startController(t)
	s := service(t, ns, "doomed")
	waitIPs(t, ns, "doomed", "192.0.2.248")
	stop()
	if len(getService(t, ns, "doomed").Finalizers) != 0 {
		t.Fatalf("Service has finalizers %v", getService(t, ns, "doomed").Finalizers)
	}
	if err := k8sClient.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	var gone corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "doomed"}, &gone); ignoreNotFound(err) != nil || err == nil {
		t.Fatalf("Service still there after delete with the controller down: err=%v", err)
	}
	startController(t)
	service(t, ns, "heir")
	waitIPs(t, ns, "heir", "192.0.2.248")
}

// TestPendingServiceGetsReleasedAddress: a Service waiting on an exhausted pool gets the address
// another Service releases, without waiting for the periodic retry (1 min; the wait here is 20 s).
func TestPendingServiceGetsReleasedAddress(t *testing.T) {
	kube.Need(t)
	startController(t)
	pool(t, "pending", nil, "192.0.2.252/31")
	ns := namespace(t, nil)
	// One at a time: with several workers, two Services pending together get the two free
	// addresses in either order.
	first := service(t, ns, "first")
	waitIPs(t, ns, "first", "192.0.2.252")
	service(t, ns, "second")
	waitIPs(t, ns, "second", "192.0.2.253")
	service(t, ns, "third")
	warning(t, ns, "third", contract.ReasonAllocationFailed, "exhausted")
	if err := k8sClient.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitIPs(t, ns, "third", "192.0.2.252")
}

// TestForeignStatusRestored: a status written by someone else after the controller's own write
// (the misinstalled controller of the status-flapping story, writing a node IP) is put back;
// it is not mistaken for the cache lagging behind the controller's write.
func TestForeignStatusRestored(t *testing.T) {
	kube.Need(t)
	startController(t)
	pool(t, "foreign", nil, "192.0.2.232/30")
	ns := namespace(t, nil)
	service(t, ns, "victim")
	waitIPs(t, ns, "victim", "192.0.2.232")
	for range 3 { // more than once: every overwrite is seen, not only the first
		s := getService(t, ns, "victim")
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.2"}}
		if err := k8sClient.Status().Update(context.Background(), s); err != nil {
			t.Fatalf("overwrite status: %v", err)
		}
		waitIPs(t, ns, "victim", "192.0.2.232")
	}
}

// TestPendingAndAllocationMetrics: metalgate_services_pending counts the Services waiting for
// an address — up when an allocation is refused, down when the Service is deleted while it
// waits (it is not waiting any more) or gets an address — and
// metalgate_allocation_duration_seconds observes each Service newly given addresses, not the
// refused ones.
func TestPendingAndAllocationMetrics(t *testing.T) {
	kube.Need(t)
	m := controllers.NewMetrics(prometheus.NewRegistry())
	startControllerWith(t, cfg, controllers.Options{Metrics: m})
	pool(t, "metrics", nil, "192.0.2.236/32")
	ns := namespace(t, nil)
	want := func(step string, pending, allocated float64) {
		t.Helper()
		testenv.Eventually(t, 20*time.Second, step, func() error {
			p, n := testutil.ToFloat64(m.Pending), histogramCount(t, m.AllocationDuration)
			if p != pending || n != allocated {
				return fmt.Errorf("services_pending = %v, allocation_duration_seconds_count = %v; want %v, %v", p, n, pending, allocated)
			}
			return nil
		})
	}
	first := service(t, ns, "first")
	waitIPs(t, ns, "first", "192.0.2.236")
	want("first allocated", 0, 1)
	service(t, ns, "second")
	warning(t, ns, "second", contract.ReasonAllocationFailed, "exhausted")
	third := service(t, ns, "third")
	warning(t, ns, "third", contract.ReasonAllocationFailed, "exhausted")
	want("second and third wait", 2, 1)
	if err := k8sClient.Delete(context.Background(), third); err != nil {
		t.Fatal(err)
	}
	want("third deleted while waiting", 1, 1)
	if err := k8sClient.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitIPs(t, ns, "second", "192.0.2.236")
	want("second got the released address", 0, 2)
}

// histogramCount is the number of observations h holds.
func histogramCount(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	var out dto.Metric
	if err := h.Write(&out); err != nil {
		t.Fatalf("read histogram: %v", err)
	}
	return float64(out.GetHistogram().GetSampleCount())
}
