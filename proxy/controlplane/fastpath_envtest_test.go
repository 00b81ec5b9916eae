package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// TestEndpointFastPath: against a real API server, an EndpointSlice change of a routed
// Service is applied by the endpoint fast path (metalgate_proxy_table_patches_total, no full
// build) and routed; a Service change, and an endpoint change of the proxy's own publish
// Service, still take the full build — with Options.YieldTraffic on (the arbitration shapes
// the table too) and off (the status publisher still arbitrates by those endpoints: patching
// them once left an Ingress's status with a proxy that had no ready endpoint).
func TestEndpointFastPath(t *testing.T) {
	kube.Need(t)
	for name, yield := range map[string]bool{"yield": true, "serve-yielded": false} {
		t.Run(name, func(t *testing.T) { endpointFastPath(t, yield) })
	}
}

func endpointFastPath(t *testing.T, yield bool) {
	ns := namespace(t)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	v0 := startBackend(t, "v0")
	setSlice(t, ns, "web", v0)
	create(t, ingress(ns, "web", "metalgate", "web.test", "web"))
	// The proxy's own publish Service, routed by an Ingress so that a change of its
	// endpoints is seen applied.
	create(t, service(ns, "proxy", corev1.ServiceTypeClusterIP))
	self0 := startBackendOn(t, "self0", v0.port)
	setSlice(t, ns, "proxy", self0)
	create(t, ingress(ns, "self", "metalgate", "self.test", "proxy"))
	p := startProxy(t, ns, func(o *controlplane.Options) { o.YieldTraffic = yield })
	routed := func(host, name string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, host+" answered by "+name, func() error {
			if _, be, err := call(http.DefaultClient, p.addr, host); be != name {
				return fmt.Errorf("answered by %q (%v)", be, err)
			}
			return nil
		})
	}
	routed("web.test", "v0")
	routed("self.test", "self0")
	count := func() (builds, patches float64) {
		return testutil.ToFloat64(p.metrics.Builds), testutil.ToFloat64(p.metrics.Patches)
	}

	// An endpoint change: patched. The proxy's own writes (the announcement on its Service)
	// are changes too and may share the first change's batch, which then builds in full: a
	// few tries.
	var patched bool
	for i := 1; i <= 5 && !patched; i++ {
		_, patches := count()
		setSlice(t, ns, "web", startBackendOn(t, fmt.Sprintf("v%d", i), v0.port))
		routed("web.test", fmt.Sprintf("v%d", i))
		_, pa := count()
		patched = pa > patches
	}
	if !patched {
		t.Fatalf("5 endpoint changes routed, none by the fast path (patches %v)", testutil.ToFloat64(p.metrics.Patches))
	}

	// A Service change: a full build.
	builds, patches := count()
	var svc corev1.Service
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Labels = map[string]string{"changed": "yes"}
	if err := k8sClient.Update(context.Background(), &svc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the Service change built in full", func() error {
		if b, pa := count(); b < builds+1 || pa != patches {
			return fmt.Errorf("builds %v→%v, patches %v→%v; want one more build and no patch", builds, b, patches, pa)
		}
		return nil
	})

	// The proxy's own Service: its endpoints rank it in the arbitration, so a change of
	// them is never patched.
	_, patches = count()
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("self%d", i)
		setSlice(t, ns, "proxy", startBackendOn(t, name, v0.port))
		routed("self.test", name)
	}
	if _, pa := count(); pa != patches {
		t.Errorf("an endpoint change of the proxy's own Service was patched (patches %v→%v); the arbitration reads those endpoints, it must build in full", patches, pa)
	}
}

// TestInitialListBuildsOnce: the objects the caches list at start are in the first table, so
// their add events, which the informers deliver after the caches report synced, must not
// rebuild it (at 10,000 Ingresses each rebuild took seconds, right when endpoint changes
// began to count).
func TestInitialListBuildsOnce(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	be := startBackend(t, "web")
	for i := range 30 {
		name := fmt.Sprintf("web%d", i)
		create(t, service(ns, name, corev1.ServiceTypeClusterIP))
		setSlice(t, ns, name, be)
		create(t, ingress(ns, name, "metalgate", name+".test", name))
	}
	p := startProxy(t, ns, nil)
	testenv.Holds(t, 2*time.Second, "one build, no more", func() error {
		if b := testutil.ToFloat64(p.metrics.Builds); b != 1 {
			return fmt.Errorf("%v builds", b)
		}
		return nil
	})
}
