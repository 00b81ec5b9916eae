package controlplane_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// TestHostConflictEvent: through the API server, an Ingress of another namespace naming an
// older tenant's host (with an Exact / that would beat its Prefix /) gets no traffic and a
// HostConflict Warning event.
func TestHostConflictEvent(t *testing.T) {
	kube.Need(t)
	shop := namespace(t)
	// Created in the same second the two Ingresses tie on age; namespace/name order then
	// still makes shop the first: "x" < "x-z".
	evil := shop + "-z"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evil}})
	for ns, be := range map[string]*backend{shop: startBackend(t, "shop"), evil: startBackend(t, "evil")} {
		create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
		setSlice(t, ns, "web", be)
	}
	create(t, ingress(shop, "web", "metalgate", "shop.test", "web"))
	steal := ingress(evil, "steal", "metalgate", "shop.test", "web")
	steal.Spec.Rules[0].HTTP.Paths[0].PathType = ptr(networkingv1.PathTypeExact) // Exact / beats Prefix /
	create(t, steal)
	p := startProxy(t, shop, func(o *controlplane.Options) { o.WatchNamespaces = []string{shop, evil} })
	testenv.Eventually(t, 10*time.Second, "shop.test routed", func() error {
		if code, be, err := call(http.DefaultClient, p.addr, "shop.test"); err != nil || code != http.StatusOK || be != "shop" {
			return fmt.Errorf("shop.test: %d %q %v", code, be, err)
		}
		return nil
	})
	for i := 0; i < 10; i++ {
		if code, be, err := call(http.DefaultClient, p.addr, "shop.test"); err != nil || be != "shop" {
			t.Fatalf("shop.test answered by %q (%d, %v), want shop", be, code, err)
		}
	}
	warning(t, evil, "steal", "HostConflict", fmt.Sprintf(`spec.rules[0].host "shop.test" ignored: the host belongs to namespace %s`, shop))
}

// TestUnmanagedEndpointSlice: a hand-written EndpointSlice (no managed-by label) is refused,
// with a RefusedEndpoint Warning event, unless Options.AllowUnmanagedSlices.
func TestUnmanagedEndpointSlice(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	be := startBackend(t, "hand")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-hand", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(be.port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{podIP(be.ip)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	})
	create(t, ingress(ns, "web", "metalgate", "hand.test", "web"))

	strict := startProxy(t, ns, nil)
	testenv.Eventually(t, 10*time.Second, "strict proxy refuses hand.test", func() error {
		if code, _, err := call(http.DefaultClient, strict.addr, "hand.test"); err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("hand.test: %d %v, want 503", code, err)
		}
		return nil
	})
	warning(t, ns, "web", "RefusedEndpoint", fmt.Sprintf("EndpointSlice %s/web-hand is not managed by endpointslice-controller.k8s.io", ns))

	allowing := startProxy(t, ns, func(o *controlplane.Options) { o.AllowUnmanagedSlices = true })
	testenv.Eventually(t, 10*time.Second, "allowing proxy routes hand.test", func() error {
		if code, name, err := call(http.DefaultClient, allowing.addr, "hand.test"); err != nil || code != http.StatusOK || name != "hand" {
			return fmt.Errorf("hand.test: %d %q %v, want 200 from hand", code, name, err)
		}
		return nil
	})
}
