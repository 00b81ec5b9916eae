package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// The arbitration tests run a tenant's own proxy ("tenant": --watch-namespace=<ns>, publish
// Service <ns>/proxy) and a cluster-wide proxy ("cluster": publish Service <sys>/proxy) on an
// IngressClass of their own, so no other test's proxy serves the Ingress.

// arbitrationClass creates an IngressClass of a controller of the test's own.
func arbitrationClass(t *testing.T, name string) (class, controller string) {
	t.Helper()
	controller = "example.com/" + name
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	create(t, ic)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ic) })
	return name, controller
}

// proxyService creates a proxy's publish Service ns/name with the address ip ("" none) and an
// EndpointSlice with one ready endpoint, as the endpoint-slice controller would for a
// running proxy pod.
func proxyService(t *testing.T, ns, name, ip string) *corev1.Service {
	t.Helper()
	svc := service(ns, name, corev1.ServiceTypeLoadBalancer)
	create(t, svc)
	setServiceIP(t, ns, name, ip)
	setProxyReady(t, ns, name, true)
	return svc
}

func setServiceIP(t *testing.T, ns, name, ip string) {
	t.Helper()
	var svc corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = nil
	if ip != "" {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	}
	if err := k8sClient.Status().Update(context.Background(), &svc); err != nil {
		t.Fatalf("set Service %s/%s status: %v", ns, name, err)
	}
}

// setProxyReady sets the readiness of the one endpoint behind the proxy Service ns/name.
func setProxyReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-proxy-slice",
		Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.200.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}}}
	ctx := context.Background()
	var cur discoveryv1.EndpointSlice
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &cur); err == nil {
		cur.Endpoints = s.Endpoints
		if err := k8sClient.Update(ctx, &cur); err != nil {
			t.Fatalf("update slice: %v", err)
		}
		return
	}
	create(t, s)
}

// arbitrationProxy starts a proxy serving controller: watching ns only, or every namespace
// when ns is "", publishing Service svcNS/proxy.
func arbitrationProxy(t *testing.T, ns, svcNS, controller string, mutate func(*controlplane.Options)) *proxy {
	t.Helper()
	return startProxy(t, svcNS, arbitrationOptions(ns, svcNS, controller, mutate))
}

func arbitrationOptions(ns, svcNS, controller string, mutate func(*controlplane.Options)) func(*controlplane.Options) {
	return func(o *controlplane.Options) {
		o.Controller = controller
		o.WatchNamespaces = nil
		if ns != "" {
			o.WatchNamespaces = []string{ns}
		}
		o.PublishService = types.NamespacedName{Namespace: svcNS, Name: "proxy"}
		o.FieldManager = "metalgate-proxy." + svcNS + ".proxy"
		o.BackoffBase = 200 * time.Millisecond
		if mutate != nil {
			mutate(o)
		}
	}
}

// statusLog records every committed value of an Ingress's status, from a watch.
type statusLog struct {
	mu     sync.Mutex
	values []string
}

func watchStatus(t *testing.T, ns, name string) *statusLog {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &statusLog{}
	record := func(ing *networkingv1.Ingress) {
		v := ingressIPsOf(ing)
		l.mu.Lock()
		if len(l.values) == 0 || l.values[len(l.values)-1] != v {
			l.values = append(l.values, v)
		}
		l.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// From a read, then a watch from its resourceVersion; again after a watch error (a
		// watch without a resourceVersion may be refused as "too large" by a lagging cache).
		for ctx.Err() == nil {
			var ing networkingv1.Ingress
			if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ing); err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			record(&ing)
			w, err := wc.Watch(ctx, &networkingv1.IngressList{}, client.InNamespace(ns),
				client.MatchingFields{"metadata.name": name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: ing.ResourceVersion}})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if ing, ok := ev.Object.(*networkingv1.Ingress); ok && ev.Type != watch.Deleted {
					record(ing)
				} else if ev.Type == watch.Error {
					break
				}
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(t, 10*time.Second, "the status watch read the current value", func() error {
		if l.len() == 0 {
			return errors.New("the status watch has not read the current value yet")
		}
		return nil
	})
	return l
}

// since returns the values recorded from index i on.
func (l *statusLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.values[min(i, len(l.values)):]...)
}

func (l *statusLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.values)
}

// eventsOn returns the events with reason on the object ns/name and their total count
// (events.k8s.io series included).
func eventsOn(t *testing.T, ns, name, reason string) ([]corev1.Event, int) {
	t.Helper()
	var list corev1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
			c := max(int(e.Count), 1)
			if e.Series != nil {
				c = max(c, int(e.Series.Count))
			}
			n += c
		}
	}
	return out, n
}

// stable checks that the Ingress's status stays want for d: no committed change at all. The
// wait is the behaviour under test (a flap, if any, would happen meanwhile): d is the window
// in which nothing may change.
func stable(t *testing.T, l *statusLog, ns, name, want string, d time.Duration) {
	t.Helper()
	start := l.len()
	testenv.Holds(t, d, fmt.Sprintf("%s/%s status stays %q", ns, name, want), func() error {
		if got := ingressIPs(t, ns, name); got != want {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
	if changes := l.since(start); len(changes) > 0 {
		t.Fatalf("status changed during %v: %q", d, changes)
	}
}

// TestArbitrationClusterWideSecond: the tenant's own proxy publishes; a cluster-wide proxy on
// the same class, with its own VIP, started later, yields: the status never changes, the
// cluster-wide proxy says so once (Warning StatusYielded naming the winner and the rule),
// nobody counts a conflict.
func TestArbitrationClusterWideSecond(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-second")
	proxyService(t, ns, "proxy", "100.64.1.1")
	proxyService(t, sys, "proxy", "100.64.1.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	tenant := arbitrationProxy(t, ns, ns, controller, nil)
	waitIngressIPs(t, ns, "web", "100.64.1.1")
	log := watchStatus(t, ns, "web")

	cluster := arbitrationProxy(t, "", sys, controller, nil)
	warning(t, ns, "web", contract.ReasonYielded, fmt.Sprintf("published by metalgate proxy %s/proxy (100.64.1.1), not by this proxy (%s/proxy): %s/proxy is namespace %s's own proxy and %s/proxy is cluster-wide", ns, sys, ns, ns, sys))
	stable(t, log, ns, "web", "100.64.1.1", 3*time.Second)
	if evs, n := eventsOn(t, ns, "web", contract.ReasonYielded); n != 1 {
		t.Errorf("%d StatusYielded events (%d objects), want exactly 1", n, len(evs))
	}
	if v := testutil.ToFloat64(cluster.metrics.IngressesYielded.WithLabelValues("proxy")); v != 1 {
		t.Errorf("cluster-wide metalgate_proxy_ingresses_yielded{reason=proxy} = %v, want 1", v)
	}
	for name, p := range map[string]*proxy{"tenant": tenant, "cluster": cluster} {
		if n := testutil.ToFloat64(p.metrics.StatusConflicts); n != 0 {
			t.Errorf("%s counted %v conflicts, want 0", name, n)
		}
		if v := testutil.ToFloat64(p.metrics.Announced); v != 1 {
			t.Errorf("%s announced = %v, want 1", name, v)
		}
	}
	var svc corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: sys, Name: "proxy"}, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Annotations[contract.AnnotationProxyWatchNamespaces] != "*" || svc.Labels[contract.LabelProxy] != "true" ||
		svc.Annotations[contract.AnnotationProxyController] != controller {
		t.Errorf("cluster-wide proxy's Service announces %v %v", svc.Labels, svc.Annotations)
	}
}

// TestArbitrationClusterWideFirst: the cluster-wide proxy publishes its VIP first; the
// tenant's proxy starts before its Service has an address and takes over once it has one:
// exactly one change (cluster VIP → tenant VIP), then none; the cluster-wide proxy yields
// once.
func TestArbitrationClusterWideFirst(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-first")
	proxyService(t, sys, "proxy", "100.64.2.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	cluster := arbitrationProxy(t, "", sys, controller, nil)
	waitIngressIPs(t, ns, "web", "100.64.2.4")
	log := watchStatus(t, ns, "web")
	start := log.len()

	proxyService(t, ns, "proxy", "") // installed; the allocator has not given it a VIP yet
	tenant := arbitrationProxy(t, ns, ns, controller, nil)
	warning(t, ns, "web", contract.ReasonNoAddress, "has no load-balancer address")
	if got := ingressIPs(t, ns, "web"); got != "100.64.2.4" {
		t.Fatalf("status %q before the tenant's proxy has an address, want the cluster-wide VIP", got)
	}
	setServiceIP(t, ns, "proxy", "100.64.2.1")
	waitIngressIPs(t, ns, "web", "100.64.2.1")
	warning(t, ns, "web", contract.ReasonYielded, "namespace "+ns+"'s own proxy")
	stable(t, log, ns, "web", "100.64.2.1", 3*time.Second)
	if got := log.since(start); len(got) != 1 || got[0] != "100.64.2.1" {
		t.Errorf("status went through %q since the tenant's proxy was installed, want one change to 100.64.2.1", got)
	}
	if _, n := eventsOn(t, ns, "web", contract.ReasonYielded); n != 1 {
		t.Errorf("%d StatusYielded events, want exactly 1", n)
	}
	for name, p := range map[string]*proxy{"tenant": tenant, "cluster": cluster} {
		if n := testutil.ToFloat64(p.metrics.StatusConflicts); n != 0 {
			t.Errorf("%s counted %v conflicts, want 0", name, n)
		}
	}
}

// TestArbitrationHandover: with both proxies running, the status follows the rule as the
// tenant's proxy loses its VIP, gets it back, has no ready endpoint for longer than
// GoneAfter, is ready again, and is uninstalled (its Service deleted).
func TestArbitrationHandover(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-handover")
	tenantSvc := proxyService(t, ns, "proxy", "100.64.3.1")
	proxyService(t, sys, "proxy", "100.64.3.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	const gone = 2 * time.Second
	short := func(o *controlplane.Options) { o.GoneAfter = gone }
	arbitrationProxy(t, ns, ns, controller, short)
	arbitrationProxy(t, "", sys, controller, short)
	waitIngressIPs(t, ns, "web", "100.64.3.1")

	steps := []struct {
		desc string
		do   func()
		want string
	}{
		{"the tenant's Service loses its VIP: the cluster-wide proxy takes over", func() { setServiceIP(t, ns, "proxy", "") }, "100.64.3.4"},
		{"the VIP is back: the tenant's proxy takes it back", func() { setServiceIP(t, ns, "proxy", "100.64.3.1") }, "100.64.3.1"},
		{"no ready endpoint for longer than GoneAfter: the cluster-wide proxy", func() { setProxyReady(t, ns, "proxy", false) }, "100.64.3.4"},
		{"ready again: the tenant's proxy", func() { setProxyReady(t, ns, "proxy", true) }, "100.64.3.1"},
		{"the tenant's Service is deleted: the cluster-wide proxy", func() {
			if err := k8sClient.Delete(context.Background(), tenantSvc); err != nil {
				t.Fatal(err)
			}
		}, "100.64.3.4"},
	}
	for _, s := range steps {
		s.do()
		testenv.Eventually(t, 20*time.Second+gone, "status settles", func() error {
			if got := ingressIPs(t, ns, "web"); got != s.want {
				return fmt.Errorf("%s: status %q, want %q", s.desc, got, s.want)
			}
			return nil
		})
	}
}

// TestArbitrationUnreadyRestart: a tenant's proxy whose endpoint is not ready for less than
// GoneAfter (a restart) keeps its Ingress.
func TestArbitrationUnreadyRestart(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-restart")
	proxyService(t, ns, "proxy", "100.64.4.1")
	proxyService(t, sys, "proxy", "100.64.4.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	long := func(o *controlplane.Options) { o.GoneAfter = time.Minute }
	arbitrationProxy(t, ns, ns, controller, long)
	arbitrationProxy(t, "", sys, controller, long)
	waitIngressIPs(t, ns, "web", "100.64.4.1")
	log := watchStatus(t, ns, "web")
	setProxyReady(t, ns, "proxy", false)
	stable(t, log, ns, "web", "100.64.4.1", 3*time.Second)
	setProxyReady(t, ns, "proxy", true)
	stable(t, log, ns, "web", "100.64.4.1", time.Second)
}

// TestStatusOwnerAnnotation: metalgate.io/status-owner decides over arbitration: naming the
// cluster-wide proxy (by its publish Service) makes it the writer and the tenant's proxy
// yield; naming another controller makes both leave the status alone, even when that
// controller writes it; without it the tenant's proxy takes it back.
func TestStatusOwnerAnnotation(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-owner")
	proxyService(t, ns, "proxy", "100.64.5.1")
	proxyService(t, sys, "proxy", "100.64.5.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	tenant := arbitrationProxy(t, ns, ns, controller, nil)
	cluster := arbitrationProxy(t, "", sys, controller, nil)
	waitIngressIPs(t, ns, "web", "100.64.5.1")

	annotate := func(v string) {
		t.Helper()
		var ing networkingv1.Ingress
		if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, &ing); err != nil {
			t.Fatal(err)
		}
		if v == "" {
			delete(ing.Annotations, contract.AnnotationStatusOwner)
		} else {
			if ing.Annotations == nil {
				ing.Annotations = map[string]string{}
			}
			ing.Annotations[contract.AnnotationStatusOwner] = v
		}
		if err := k8sClient.Update(context.Background(), &ing); err != nil {
			t.Fatal(err)
		}
	}
	annotate(sys + "/proxy")
	waitIngressIPs(t, ns, "web", "100.64.5.4")
	testenv.Eventually(t, 20*time.Second, "a Yielded event naming the owner", func() error {
		evs, _ := eventsOn(t, ns, "web", contract.ReasonYielded)
		for _, e := range evs {
			if e.Type == corev1.EventTypeNormal && strings.Contains(e.Message, fmt.Sprintf(`annotation metalgate.io/status-owner names "%s/proxy"`, sys)) {
				return nil
			}
		}
		return fmt.Errorf("no Normal StatusYielded naming the annotation: %v", evs)
	})
	if v := testutil.ToFloat64(tenant.metrics.IngressesYielded.WithLabelValues("annotation")); v != 1 {
		t.Errorf("tenant metalgate_proxy_ingresses_yielded{reason=annotation} = %v, want 1", v)
	}

	annotate("nginx-ingress-controller")
	var ing networkingv1.Ingress
	testenv.Eventually(t, 20*time.Second, "the status written by hand", func() error {
		if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, &ing); err != nil {
			return err
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.7"}}
		if err := k8sClient.Status().Update(context.Background(), &ing, client.FieldOwner("nginx-ingress-controller")); err != nil {
			return err
		}
		return nil
	})
	log := watchStatus(t, ns, "web")
	stable(t, log, ns, "web", "192.0.2.7", 2*time.Second)
	for name, p := range map[string]*proxy{"tenant": tenant, "cluster": cluster} {
		if n := testutil.ToFloat64(p.metrics.StatusConflicts); n != 0 {
			t.Errorf("%s counted %v conflicts, want 0", name, n)
		}
	}
	annotate("")
	waitIngressIPs(t, ns, "web", "100.64.5.1")
}

// TestYieldTraffic: a proxy that loses the arbitration still routes the Ingress by default;
// with YieldTraffic (--serve-yielded-ingresses=false) it leaves it out of its table.
func TestYieldTraffic(t *testing.T) {
	kube.Need(t)
	ns, sys, sys2 := namespace(t), namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-traffic")
	proxyService(t, ns, "proxy", "100.64.6.1")
	proxyService(t, sys, "proxy", "100.64.6.4")
	proxyService(t, sys2, "proxy", "100.64.6.5")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	arbitrationProxy(t, ns, ns, controller, nil)
	serves := arbitrationProxy(t, "", sys, controller, nil)
	leaves := arbitrationProxy(t, "", sys2, controller, func(o *controlplane.Options) { o.YieldTraffic = true })
	waitIngressIPs(t, ns, "web", "100.64.6.1")
	testenv.Eventually(t, 20*time.Second, "one proxy routes, the other does not", func() error {
		if n := serves.dp.Table().Ingresses; n != 1 {
			return fmt.Errorf("the yielding proxy routes %d Ingresses, want 1 (it still serves by default)", n)
		}
		if n := leaves.dp.Table().Ingresses; n != 0 {
			return fmt.Errorf("the proxy with YieldTraffic routes %d Ingresses, want 0", n)
		}
		return nil
	})
	warning(t, ns, "web", contract.ReasonYielded, "This proxy does not route its traffic either")
}

// TestArbitrationReplicas: the cluster-wide proxy runs two replicas with leader election, as
// a Deployment of two would. Only the leader writes and reports: one StatusYielded, no
// change. When the leader goes, the other replica leads, yields as well (and reports once
// itself), and the status still does not change.
func TestArbitrationReplicas(t *testing.T) {
	kube.Need(t)
	ns, sys := namespace(t), namespace(t)
	class, controller := arbitrationClass(t, "arb-replicas")
	proxyService(t, ns, "proxy", "100.64.7.1")
	proxyService(t, sys, "proxy", "100.64.7.4")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "web", class, "a.test", "web"))
	arbitrationProxy(t, ns, ns, controller, nil)
	waitIngressIPs(t, ns, "web", "100.64.7.1")
	log := watchStatus(t, ns, "web")
	elect := func(o *ctrl.Options) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, "arb-replicas", sys
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr(3*time.Second), ptr(2*time.Second), ptr(500*time.Millisecond)
		o.LeaderElectionReleaseOnCancel = true
	}
	replicas := []*proxy{
		startProxyWith(t, sys, arbitrationOptions("", sys, controller, nil), elect),
		startProxyWith(t, sys, arbitrationOptions("", sys, controller, nil), elect),
	}
	yielding := func(p *proxy) bool {
		return testutil.ToFloat64(p.metrics.IngressesYielded.WithLabelValues("proxy")) == 1
	}
	var leader, other *proxy
	testenv.Eventually(t, 20*time.Second, "one replica leads and yields", func() error {
		switch {
		case yielding(replicas[0]) && !yielding(replicas[1]):
			leader, other = replicas[0], replicas[1]
		case yielding(replicas[1]) && !yielding(replicas[0]):
			leader, other = replicas[1], replicas[0]
		default:
			return fmt.Errorf("want exactly one replica (the leader) yielding: %v, %v", yielding(replicas[0]), yielding(replicas[1]))
		}
		return nil
	})
	stable(t, log, ns, "web", "100.64.7.1", 2*time.Second)
	if _, n := eventsOn(t, ns, "web", contract.ReasonYielded); n != 1 {
		t.Errorf("%d StatusYielded events from two replicas, want 1 (the leader's)", n)
	}
	leader.stop()
	testenv.Eventually(t, 30*time.Second, "the other replica takes over", func() error {
		if !yielding(other) {
			return errors.New("the other replica does not lead and yield yet")
		}
		return nil
	})
	stable(t, log, ns, "web", "100.64.7.1", 2*time.Second)
	if got := log.since(0); len(got) != 1 {
		t.Errorf("status went through %q across the leader change, want one value", got)
	}
}
