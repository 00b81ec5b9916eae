package controllers_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

// handDriven is one controller process as a test drives it: its own cache, allocator and
// memory, Reconcile called by the test (no manager, no leader election).
type handDriven struct {
	*controllers.ServiceReconciler
	cache client.Client
	ctx   context.Context
}

func newHandDriven(t *testing.T, name string, wrap func(client.Client) client.Client) *handDriven {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ctx = logr.NewContext(ctx, testenv.Logger(t, name))
	opts := controllers.CacheOptions(controllers.DefaultNamespace)
	opts.Scheme = scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatalf("%s: new cache: %v", name, err)
	}
	if err := controllers.IndexClaims(ctx, c); err != nil {
		t.Fatalf("%s: index claims: %v", name, err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatalf("%s: cache did not sync", name)
	}
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatalf("%s: client: %v", name, err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("%s: client: %v", name, err)
	}
	var cl client.Client = cached
	if wrap != nil {
		cl = wrap(cached)
	}
	return &handDriven{
		ServiceReconciler: controllers.NewHandDrivenServiceReconciler(cl, direct, events.NewFakeRecorder(1000)),
		cache:             cached,
		ctx:               ctx,
	}
}

func (h *handDriven) reconcile(ns, name string) (ctrl.Result, error) {
	return h.Reconcile(h.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}

// statusGate holds one Service's status writes at the door: the writer stops right before the
// write goes out, says so on reached, and goes on when open is closed.
type statusGate struct {
	ns, name string
	reached  chan struct{}
	open     chan struct{}
}

type gatedClient struct {
	client.Client
	g *statusGate
}

func (c gatedClient) Status() client.SubResourceWriter {
	return gatedStatus{SubResourceWriter: c.Client.Status(), g: c.g}
}

type gatedStatus struct {
	client.SubResourceWriter
	g *statusGate
}

func (s gatedStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.g.wait(obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s gatedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.g.wait(obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (g *statusGate) wait(obj client.Object) {
	if _, ok := obj.(*corev1.Service); !ok || obj.GetNamespace() != g.ns || obj.GetName() != g.name {
		return
	}
	select {
	case g.reached <- struct{}{}:
	default:
	}
	<-g.open
}

// TestInterleavedWithdrawAndPublish plays out, step by step against a real API server, the race
// of issue #30 between two controllers that both run (a Lease handover, a partition, a second
// install): A gives an address to S and is about to write S's status; B, whose view is a step
// behind (it has not yet seen a Service go), believes the pool full, gives up on S and takes
// S's claim away; then, caught up, B gives the freed address to T. When A's write lands, S and
// T both show the address — unless taking a claim away fences off writes prepared before it.
// Without the fence (the withdrawal of before #30: drop the claim, write S's status only when
// it showed something), A's write succeeds and this test fails.
func TestInterleavedWithdrawAndPublish(t *testing.T) {
	kube.Need(t)
	pool(t, "interleave", nil, "10.202.0.0/31") // two addresses: .0 and .1
	ns := namespace(t, nil)
	service(t, ns, "u", withAnnotation(contract.AnnotationLoadBalancerIPs, "10.202.0.1"))
	service(t, ns, "s")
	service(t, ns, "t")
	addr0 := netip.MustParseAddr("10.202.0.0")

	gate := &statusGate{ns: ns, name: "s", reached: make(chan struct{}, 1), open: make(chan struct{})}
	a := newHandDriven(t, "A", func(c client.Client) client.Client { return gatedClient{Client: c, g: gate} })
	b := newHandDriven(t, "B", nil)

	// Both learn that u holds .1.
	for _, c := range []*handDriven{a, b} {
		if _, err := c.reconcile(ns, "u"); err != nil {
			t.Fatalf("reconcile u: %v", err)
		}
	}
	waitIPs(t, ns, "u", "10.202.0.1")
	// B is a step behind: it still believes a Service that is gone holds .0.
	if _, err := b.Alloc.Restore(allocator.Request{Key: ns + "/gone", Namespace: ns}, []netip.Addr{addr0}); err != nil {
		t.Fatalf("B: restore the gone Service: %v", err)
	}

	// A: claims .0 for s and stops right before s's status write.
	aDone := make(chan error, 1)
	go func() {
		_, err := a.reconcile(ns, "s")
		aDone <- err
	}()
	select {
	case <-gate.reached:
	case err := <-aDone:
		t.Fatalf("A finished s without writing its status: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("A never reached s's status write")
	}
	// B sees A's claim, finds no address for s (the pool is full in its view) and withdraws
	// what s holds.
	testenv.Eventually(t, 10*time.Second, "B's cache shows s holding .0", func() error {
		var c v1alpha1.IPAddressClaim
		if err := b.cache.Get(b.ctx, types.NamespacedName{Name: controllers.ClaimName(addr0)}, &c); err != nil {
			return err
		}
		if !slices.ContainsFunc(c.Spec.Holders, func(h v1alpha1.ClaimHolder) bool { return h.Name == "s" }) {
			return fmt.Errorf("holders %v", c.Spec.Holders)
		}
		return nil
	})
	if _, err := b.reconcile(ns, "s"); err != nil {
		t.Fatalf("B: reconcile s: %v", err)
	}
	// B catches up: the gone Service's address is free, and t gets it.
	b.Alloc.Release(ns + "/gone")
	if _, err := b.reconcile(ns, "t"); err != nil {
		t.Fatalf("B: reconcile t: %v", err)
	}
	waitIPs(t, ns, "t", "10.202.0.0")

	// A's prepared write goes out now.
	close(gate.open)
	aErr := <-aDone
	t.Logf("A's reconcile of s after the gate: %v", aErr)
	assertNoAddressHeldTwice(t)
	if got := ips(getService(t, ns, "s")); got != "" {
		t.Fatalf("s shows %q after B withdrew its claim; want nothing", got)
	}

	// Afterwards both controllers agree: the pool is full, s waits, t keeps .0.
	for _, c := range []*handDriven{a, b} {
		if _, err := c.reconcile(ns, "s"); err != nil {
			t.Fatalf("reconcile s again: %v", err)
		}
	}
	assertNoAddressHeldTwice(t)
	if got := ips(getService(t, ns, "t")); got != "10.202.0.0" {
		t.Errorf("t shows %q, want 10.202.0.0", got)
	}
	var claim v1alpha1.IPAddressClaim
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Name: controllers.ClaimName(addr0)}, &claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.Spec.Holders) != 1 || claim.Spec.Holders[0].Name != "t" || claim.Spec.Holders[0].Releasing {
		t.Errorf("claim of .0 holders = %+v, want only t", claim.Spec.Holders)
	}
}
