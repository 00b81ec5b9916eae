package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestControllerOutlivesLostLease runs the controller (runController, with leader election and
// short Lease timings) against an API server of its own and takes its Lease away: another
// identity writes itself into the Lease and keeps renewing it. The controller must
//
//   - not return (the process survives a lost Lease),
//   - stop its controllers: a Service created while the other identity holds the Lease gets no
//     address, for several Lease durations,
//   - count the lost term (metalgate_controller_leader_election_restarts_total 1) and keep
//     serving /metrics meanwhile,
//   - take the Lease back once the other identity stops renewing, and assign again.
func TestControllerOutlivesLostLease(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}})
	c := env.Client
	ctx := context.Background()
	const ns, leaseNS, leaseName = "metalgate-system", "default", "metalgate-controller"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
			Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/28"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}

	metricsAddr := freeAddr(t)
	reg := prometheus.NewRegistry()
	opts := controllerOptions{
		Kubeconfig: env.Kubeconfig, MetricsAddr: metricsAddr, HealthAddr: "0",
		LeaderElect: true, LeaderElectionNamespace: leaseNS, LeaderElectionID: leaseName,
		LBClass: "metalgate.io/metalgate", Namespace: ns, MemberlistSecret: "memberlist",
		QPS: defaultControllerQPS, Burst: defaultControllerBurst, ServiceWorkers: 2,
		registry: reg, leaseDuration: 2 * time.Second, renew: 1500 * time.Millisecond, retryPeriod: 250 * time.Millisecond,
	}
	rctx, cancel := context.WithCancel(logr.NewContext(ctx, testenv.Logger(t, "controller")))
	done := make(chan error, 1)
	go func() { done <- runController(rctx, opts) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	running := func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the controller returned: %v", err)
		default:
			return nil
		}
	}

	service := func(name string) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatalf("create Service %s: %v", name, err)
		}
		return svc
	}
	address := func(name string) string {
		var svc corev1.Service
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &svc); err != nil {
			return "error: " + err.Error()
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return svc.Status.LoadBalancer.Ingress[0].IP
	}
	holder := func() string {
		var l coordinationv1.Lease
		if err := c.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: leaseName}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	restarts := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "metalgate_controller_leader_election_restarts_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}

	// The controller leads and assigns.
	service("a")
	testenv.Eventually(t, 30*time.Second, "Service a gets an address", func() error {
		if err := running(); err != nil {
			return err
		}
		if ip := address("a"); ip == "" || strings.HasPrefix(ip, "error") {
			return fmt.Errorf("address %q", ip)
		}
		return nil
	})
	ipA := address("a")
	ours := holder()
	if ours == "" || ours == "thief" {
		t.Fatalf("Lease holder %q, want the controller's identity", ours)
	}
	if got := restarts(); got != 0 {
		t.Fatalf("restarts = %v before any loss, want 0", got)
	}

	// Another identity takes the Lease and keeps renewing it.
	var thief sync.WaitGroup
	stopThief := make(chan struct{})
	thief.Add(1)
	go func() {
		defer thief.Done()
		for {
			var l coordinationv1.Lease
			if err := c.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: leaseName}, &l); err == nil {
				now := metav1.NewMicroTime(time.Now())
				id, secs := "thief", int32(2)
				if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
					l.Spec.AcquireTime = &now
				}
				l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &now
				_ = c.Update(ctx, &l) // a conflict with the controller's renewal: the next round wins
			}
			select {
			case <-stopThief:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	stopThiefOnce := sync.OnceFunc(func() { close(stopThief); thief.Wait() })
	t.Cleanup(stopThiefOnce)

	lostAt := time.Now()
	testenv.Eventually(t, 20*time.Second, "the controller notices the lost Lease and ends its term", func() error {
		if err := running(); err != nil {
			return err
		}
		if got := restarts(); got != 1 {
			return fmt.Errorf("restarts = %v, want 1", got)
		}
		return nil
	})
	t.Logf("term ended %v after the Lease was taken", time.Since(lostAt).Round(time.Millisecond))

	// While the other identity holds the Lease, nothing is assigned; the process runs and
	// serves /metrics. Several Lease durations: the window is the behaviour under test.
	service("b")
	hc := &http.Client{Timeout: 2 * time.Second}
	testenv.HoldsEvery(t, 250*time.Millisecond, 4*time.Second, "no assignment while another identity holds the Lease", func() error {
		if err := running(); err != nil {
			return err
		}
		if h := holder(); h != "thief" {
			return fmt.Errorf("Lease holder %q, want thief", h)
		}
		if ip := address("b"); ip != "" {
			return fmt.Errorf("Service b got %q from a controller that lost its Lease", ip)
		}
		resp, err := hc.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return fmt.Errorf("/metrics while not leading: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/metrics while not leading: %s", resp.Status)
		}
		return nil
	})

	// The other identity stops renewing: the controller takes the Lease back and assigns.
	stopThiefOnce()
	testenv.Eventually(t, 30*time.Second, "Service b gets an address after the controller took the Lease back", func() error {
		if err := running(); err != nil {
			return err
		}
		if ip := address("b"); ip == "" || strings.HasPrefix(ip, "error") {
			return fmt.Errorf("address %q", ip)
		}
		return nil
	})
	if h := holder(); h != ours {
		t.Errorf("Lease holder %q after the new term, want the controller's %q", h, ours)
	}
	if ip := address("a"); ip != ipA {
		t.Errorf("Service a's address moved from %s to %s across the terms", ipA, ip)
	}
	if got := restarts(); got != 1 {
		t.Errorf("restarts = %v, want 1 (one lost term)", got)
	}

	// SIGTERM: the run function returns cleanly and lets the Lease go.
	cancel()
	stopped = true
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("runController returned %v on cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runController did not return within 30s of cancel")
	}
	if h := holder(); h != "" {
		t.Errorf("Lease still held by %q after the controller stopped, want released", h)
	}
}
