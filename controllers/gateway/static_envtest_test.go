package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// TestGatewayStaticAddressFirstStatus: when spec.addresses asks for another address, the
// first status written for the new generation already holds the answer (the address,
// Programmed=True); never first "AddressNotAssigned" with no address and the address a moment
// later. A reader that looks once after the conditions reach the generation (the conformance
// test GatewayStaticAddresses does) must see the assigned address. Every status update is
// watched, so the race cannot hide between polls. A refused request still gets its reason.
func TestGatewayStaticAddressFirstStatus(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ctx := context.Background()
	ns := namespace(t)
	gatewayClass(t, "gc-first", gateway.ControllerName)
	pool(t, "gw-first", "100.64.52.0/29")
	newGateway(t, ns, "web", "gc-first", address(gwv1.IPAddressType, "100.64.52.1"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "web")
		if got := statusAddresses(g); got != "100.64.52.1" {
			return fmt.Sprintf("status.addresses %q, want 100.64.52.1", got)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", g.Generation)
	})

	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		addr, wantAddrs, wantStatus, wantReason string
	}{
		{addr: "100.64.52.2", wantAddrs: "100.64.52.2", wantStatus: "True", wantReason: "Programmed"},
		{addr: "100.64.99.9", wantAddrs: "", wantStatus: "False", wantReason: "AddressNotUsable"}, // in no pool
		{addr: "100.64.52.3", wantAddrs: "100.64.52.3", wantStatus: "True", wantReason: "Programmed"},
	} {
		t.Run(step.addr, func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			w := watchGateway(t, wctx, wc, ns, "web")
			defer w.Stop()
			if err := updateGateway(t, ns, "web", func(g *gwv1.Gateway) {
				typ := gwv1.IPAddressType
				g.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: &typ, Value: step.addr}}
			}); err != nil {
				t.Fatal(err)
			}
			gen := getGateway(t, ns, "web").Generation // only this test writes the spec
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("watch ended before a status of the new generation (asked for %s)", step.addr)
					}
					g, isGW := ev.Object.(*gwv1.Gateway)
					if ev.Type != watch.Modified || !isGW {
						continue
					}
					c := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
					if c == nil || c.ObservedGeneration != gen || g.Generation != gen {
						continue
					}
					got := statusAddresses(g)
					if got != step.wantAddrs || string(c.Status) != step.wantStatus || c.Reason != step.wantReason {
						t.Fatalf("first status of generation %d: addresses %q, Programmed=%s/%s %q; want addresses %q, Programmed=%s/%s",
							g.Generation, got, c.Status, c.Reason, c.Message, step.wantAddrs, step.wantStatus, step.wantReason)
					}
					return
				case <-time.After(wait):
					t.Fatalf("no status for the new generation within %s", wait)
				}
			}
		})
	}
}

// watchGateway watches one Gateway from its current resourceVersion (read first), so that
// every later change is delivered. An explicit version is what the API server's watch cache
// can serve at once; a watch without one asks for etcd's newest revision, which the cache of a
// quiet kind may not reach ("Too large resource version").
func watchGateway(t *testing.T, ctx context.Context, wc client.WithWatch, ns, name string) watch.Interface {
	t.Helper()
	g := getGateway(t, ns, name)
	w, err := wc.Watch(ctx, &gwv1.GatewayList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: g.ResourceVersion}})
	if err != nil {
		t.Fatalf("watch Gateway %s/%s: %v", ns, name, err)
	}
	return w
}
