package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
	"github.com/metalgate/metalgate/proxy/table"
)

func TestRoutesFromAPIServer(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	bes := samePortBackends(t, "web", 2)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	setSlice(t, ns, "web", bes...)
	create(t, ingress(ns, "web", "metalgate", "web.test", "web"))
	create(t, ingress(ns, "missing", "metalgate", "missing.test", "nope"))
	create(t, ingress(ns, "theirs", "other", "theirs.test", "web"))
	p := startProxy(t, ns, nil)

	seen := map[string]int{}
	testenv.Eventually(t, 10*time.Second, "web.test routed", func() error {
		code, be, err := call(http.DefaultClient, p.addr, "web.test")
		if err != nil || code != 200 {
			return fmt.Errorf("web.test: %d %v", code, err)
		}
		seen[be]++
		if len(seen) < 2 {
			return fmt.Errorf("only %v answered", seen)
		}
		return nil
	})
	if code, _, _ := call(http.DefaultClient, p.addr, "theirs.test"); code != http.StatusNotFound {
		t.Errorf("Ingress of another class routed: %d", code)
	}
	if code, _, _ := call(http.DefaultClient, p.addr, "missing.test"); code != http.StatusServiceUnavailable {
		t.Errorf("Ingress with a missing Service: %d, want 503", code)
	}
	warning(t, ns, "missing", "MissingService", "nope")
	if n := testutil.ToFloat64(p.metrics.Builds); n < 1 {
		t.Errorf("table builds = %v", n)
	}
}

// TestEndpointChurnNoLoss sends requests without pause while endpoints are replaced one at a
// time, each removed endpoint staying up until it has left the table and no request that could
// have picked it is still running (a terminating pod); every request must succeed.
func TestEndpointChurnNoLoss(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	live := samePortBackends(t, "gen", 2)
	setSlice(t, ns, "web", live...)
	create(t, ingress(ns, "web", "metalgate", "web.test", "web"))
	p := startProxy(t, ns, nil)
	testenv.Eventually(t, 10*time.Second, "web.test routed", func() error {
		if code, _, err := call(http.DefaultClient, p.addr, "web.test"); code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})

	var sent, ok atomic.Int64
	var failMu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	const workers = 4
	var finished [workers]atomic.Int64 // requests each worker has finished
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				code, _, err := call(c, p.addr, "web.test")
				finished[w].Add(1)
				if err == nil && code == 200 {
					ok.Add(1)
					continue
				}
				failMu.Lock()
				failures = append(failures, fmt.Sprintf("%d %v", code, err))
				failMu.Unlock()
			}
		}()
	}
	// drained waits until every worker has finished a request it started after now: then no
	// request still running can have read a table older than the one seen now.
	drained := func() {
		t.Helper()
		var at [workers]int64
		for w := range workers {
			at[w] = finished[w].Load()
		}
		testenv.Eventually(t, 20*time.Second, "every worker finished a request started after the swap", func() error {
			for w := range workers {
				if finished[w].Load() < at[w]+2 {
					return fmt.Errorf("worker %d: %d requests finished, want %d", w, finished[w].Load(), at[w]+2)
				}
			}
			return nil
		})
	}
	port := live[0].port
	for i := 0; i < 6; i++ {
		nb := startBackendOn(t, fmt.Sprintf("gen%d", i+2), port)
		live = append(live, nb)
		setSlice(t, ns, "web", live...) // add the new endpoint first (overlap)
		routesTo(t, p, "web.test", live...)
		old := live[0]
		live = live[1:]
		setSlice(t, ns, "web", live...) // then remove the oldest
		routesTo(t, p, "web.test", live...)
		drained() // it terminates gracefully after it left the table
		old.srv.Close()
	}
	close(stop)
	wg.Wait()
	t.Logf("churn: %d requests sent, %d answered 200, through 6 endpoint replacements", sent.Load(), ok.Load())
	if sent.Load() != ok.Load() || sent.Load() < 100 {
		t.Errorf("%d sent, %d ok; failures: %v", sent.Load(), ok.Load(), failures)
	}
}

// TestEndpointUpdateLatency measures endpoint change → first request routed to the new
// endpoint, through the API server. hack/bench-proxy.sh reads its ENDPOINT_UPDATE line.
func TestEndpointUpdateLatency(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	cur := startBackend(t, "v0")
	setSlice(t, ns, "web", cur)
	create(t, ingress(ns, "web", "metalgate", "web.test", "web"))
	// swapped says when the data plane got a new table, so the measurement checks at once
	// instead of on the next poll tick.
	swapped := make(chan struct{}, 1)
	p := startProxy(t, ns, func(o *controlplane.Options) {
		swap := o.Swap
		o.Swap = func(tab *table.Table) {
			swap(tab)
			select {
			case swapped <- struct{}{}:
			default:
			}
		}
	})
	testenv.Eventually(t, 10*time.Second, "v0 routed", func() error {
		if _, be, _ := call(http.DefaultClient, p.addr, "web.test"); be != "v0" {
			return errors.New("v0 not routed yet")
		}
		return nil
	})
	const changes = 25
	var lat []time.Duration
	for i := 1; i <= changes; i++ {
		nb := startBackendOn(t, fmt.Sprintf("v%d", i), cur.port)
		start := time.Now()
		setSlice(t, ns, "web", nb)
		testenv.EventuallyOn(t, 10*time.Second, fmt.Sprintf("change %d applied", i), swapped, func() error {
			if _, be, _ := call(http.DefaultClient, p.addr, "web.test"); be != nb.name {
				return fmt.Errorf("answered by %q, want %q", be, nb.name)
			}
			return nil
		})
		lat = append(lat, time.Since(start))
		cur.srv.Close()
		cur = nb
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1)+0.5)].Microseconds()) / 1000 }
	fmt.Printf("ENDPOINT_UPDATE changes=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f\n", changes, pct(0.5), pct(0.99), pct(1))
	if p99 := pct(0.99); p99 > 1000 {
		t.Errorf("endpoint update p99 %.0fms", p99)
	}
}

func lbService(t *testing.T, ns string, ips ...string) {
	t.Helper()
	svc := service(ns, "proxy", corev1.ServiceTypeLoadBalancer)
	create(t, svc)
	if len(ips) == 0 {
		return
	}
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if err := k8sClient.Status().Update(context.Background(), svc); err != nil {
		t.Fatalf("set service status: %v", err)
	}
}

func ingressIPs(t testing.TB, ns, name string) string {
	t.Helper()
	var ing networkingv1.Ingress
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &ing); err != nil {
		t.Fatalf("get ingress: %v", err)
	}
	var out []string
	for _, i := range ing.Status.LoadBalancer.Ingress {
		out = append(out, i.IP)
	}
	return strings.Join(out, ",")
}

func waitIngressIPs(t testing.TB, ns, name, want string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "Ingress status", func() error {
		if got := ingressIPs(t, ns, name); got != want {
			return fmt.Errorf("%s/%s status %q, want %q", ns, name, got, want)
		}
		return nil
	})
}

func TestStatusPublishesOwnServiceAddress(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	lbService(t, ns, "100.64.0.10")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "mine", "metalgate", "a.test", "web"))
	create(t, ingress(ns, "theirs", "other", "b.test", "web"))
	p := startProxy(t, ns, nil)
	waitIngressIPs(t, ns, "mine", "100.64.0.10")

	// Our write is recorded under our field manager; the other class's Ingress is untouched.
	if got := ingressIPs(t, ns, "theirs"); got != "" {
		t.Errorf("wrote %q into an Ingress of another class", got)
	}
	// The class changes: we clear what we wrote.
	var ing networkingv1.Ingress
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "mine"}, &ing); err != nil {
		t.Fatal(err)
	}
	ing.Spec.IngressClassName = ptr("other")
	if err := k8sClient.Update(context.Background(), &ing); err != nil {
		t.Fatal(err)
	}
	waitIngressIPs(t, ns, "mine", "")
	if n := testutil.ToFloat64(p.metrics.StatusConflicts); n != 0 {
		t.Errorf("conflicts = %v, want 0", n)
	}
}

func TestStatusNothingWithoutAddress(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	lbService(t, ns) // no address yet
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "mine", "metalgate", "a.test", "web"))
	p := startProxy(t, ns, nil)
	warning(t, ns, "mine", contract.ReasonNoAddress, "has no load-balancer address")
	if got := ingressIPs(t, ns, "mine"); got != "" {
		t.Errorf("status %q written without an address", got)
	}
	if v := testutil.ToFloat64(p.metrics.AddressMissing); v != 1 {
		t.Errorf("address missing gauge = %v", v)
	}
	// The address arrives: it is published.
	var svc corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "proxy"}, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "100.64.0.11"}}
	if err := k8sClient.Status().Update(context.Background(), &svc); err != nil {
		t.Fatal(err)
	}
	waitIngressIPs(t, ns, "mine", "100.64.0.11")
}

func TestStatusNoSuchService(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "mine", "metalgate", "a.test", "web"))
	startProxy(t, ns, nil)
	warning(t, ns, "mine", contract.ReasonNoAddress, "not found")
	if got := ingressIPs(t, ns, "mine"); got != "" {
		t.Errorf("status %q written without a Service", got)
	}
}

// TestStatusRivalWriter: another writer puts a node IP into the status whenever it holds
// something else, as an ingress controller's status sync does. The proxy (cluster-wide, so it
// may also report on the cluster-scoped IngressClass; serving a class of its own, so it owns
// this test's Ingress only) detects it, names the writer, backs off, and at the third
// overwrite stops writing: the status stays the rival's, the stop is a ForeignStatusWriter
// event naming the rival and a yielded Ingress in the metric. After ForeignQuiet without a
// change it writes again and one overwrite stops it at once; after the third stop it waits
// for the rival to let go (here: the status cleared).
func TestStatusRivalWriter(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	const class, controller = "rival-test", "example.com/rival-test"
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	create(t, ic)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ic) })
	lbService(t, ns, "100.64.0.12")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "contested", class, "a.test", "web"))
	const quiet = 2 * time.Second
	p := startProxy(t, ns, func(o *controlplane.Options) {
		o.BackoffBase = time.Second
		o.WatchNamespaces = nil
		o.Controller = controller
		o.ForeignQuiet = quiet
	})
	waitIngressIPs(t, ns, "contested", "100.64.0.12")
	log := watchStatus(t, ns, "contested")
	ourWrites := func() float64 { return testutil.ToFloat64(p.metrics.StatusWrites.WithLabelValues("ok")) }
	before := ourWrites()
	// The rival: every 200ms, the node IP unless it is there already.
	rivalWrites := 0
	setStatus := func(ip, owner string) {
		var ing networkingv1.Ingress
		if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "contested"}, &ing); err != nil {
			t.Fatal(err)
		}
		if got := ingressIPsOf(&ing); got == ip {
			return
		}
		ing.Status.LoadBalancer.Ingress = nil
		if ip != "" {
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: ip}}
		}
		if err := k8sClient.Status().Update(context.Background(), &ing, client.FieldOwner(owner)); err == nil && owner == "rival-controller" {
			rivalWrites++
		}
	}
	ctx, stopRival := context.WithCancel(context.Background())
	rivalDone := make(chan struct{})
	go func() {
		defer close(rivalDone)
		for ctx.Err() == nil {
			setStatus("172.18.0.2", "rival-controller")
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopRival(); <-rivalDone })

	// Stop 1 (3 overwrites), stop 2 after ForeignQuiet, stop 3 after twice that.
	warning(t, ns, "contested", contract.ReasonForeignWriter, `replaced 3 time(s) within 10m0s by field manager "rival-controller" (now 172.18.0.2)`)
	warning(t, ns, "contested", contract.ReasonStatusConflict, `"rival-controller"`)
	warning(t, "default", class, contract.ReasonStatusConflict, "rival-controller")
	testenv.Eventually(t, 20*time.Second+3*quiet, "the third ForeignWriter event", func() error {
		evs, n := eventsOn(t, ns, "contested", contract.ReasonForeignWriter)
		for _, e := range evs {
			if strings.Contains(e.Message, "stop 3 of 3") && strings.Contains(e.Message, "writes again only when the other writer clears the status") {
				return nil
			}
		}
		return fmt.Errorf("%d ForeignStatusWriter events, none about the third stop", n)
	})
	start := log.len()
	stable(t, log, ns, "contested", "172.18.0.2", 2*quiet+time.Second) // no more resumes by time
	ours := ourWrites() - before
	values := log.since(0)
	t.Logf("rival wrote %d times; we wrote %v times; status values %q", rivalWrites, ours, values)
	// Overwrite 1: rewrite at once; 2: back off, rewrite; 3: stop; one rewrite after each
	// quiet time: 4 writes in all, each answered by the rival, which also wrote first: at
	// most 9 changes after the first value.
	if ours > 4 || len(values)-1 > 9 {
		t.Errorf("we wrote the status %v times (%d changes) against the rival, want at most 4 writes and 9 changes (MaxConflicts 3, then 2 resumes)", ours, len(values)-1)
	}
	if n := testutil.ToFloat64(p.metrics.StatusConflicts); n < 1 {
		t.Errorf("conflicts = %v, want ≥ 1", n)
	}
	if v := testutil.ToFloat64(p.metrics.IngressesYielded.WithLabelValues("foreign")); v != 1 {
		t.Errorf("metalgate_proxy_ingresses_yielded{reason=foreign} = %v, want 1", v)
	}
	if got := log.since(start); len(got) != 0 {
		t.Errorf("status changed after the third stop: %q", got)
	}
	// The rival goes and clears the status on its way out: we write it again.
	stopRival()
	<-rivalDone
	setStatus("", "rival-controller")
	waitIngressIPs(t, ns, "contested", "100.64.0.12")
}

func ingressIPsOf(ing *networkingv1.Ingress) string {
	var out []string
	for _, i := range ing.Status.LoadBalancer.Ingress {
		out = append(out, i.IP)
	}
	return strings.Join(out, ",")
}

// TestBurstIsCoalesced: an apply of many Ingresses at once becomes a few table swaps, not
// one per Ingress, and all of them are routed at the end.
func TestBurstIsCoalesced(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	bes := samePortBackends(t, "burst", 1)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	setSlice(t, ns, "web", bes...)
	// Windows long enough that a burst from 8 writers is many events per window even on a
	// loaded machine (with the default 15ms quiet time, a slow API server turns a burst into
	// a trickle, which is rightly built at once).
	const window = 200 * time.Millisecond
	p := startProxy(t, ns, func(o *controlplane.Options) { o.MaxBatch, o.Quiet = window, window })
	before := testutil.ToFloat64(p.metrics.Builds)
	const n, writers = 300, 8
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				if err := k8sClient.Create(context.Background(), ingress(ns, fmt.Sprintf("i%d", i), "metalgate", fmt.Sprintf("h%d.test", i), "web")); err != nil {
					t.Errorf("create: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	applied := time.Since(start)
	testenv.Eventually(t, 20*time.Second, "every Ingress in the table", func() error {
		if tab := p.dp.Table(); tab == nil || tab.Ingresses != n {
			return errors.New("not all Ingresses in the table yet")
		}
		return nil
	})
	builds := testutil.ToFloat64(p.metrics.Builds) - before
	t.Logf("%d Ingresses created in %v by %d writers: %v table builds", n, applied.Round(time.Millisecond), writers, builds)
	// One build per window at most (plus the last, after the burst): a burst of d seconds
	// needs about d/window builds, not one per Ingress.
	if limit := float64(applied/window) + 2; builds > limit {
		t.Errorf("%v builds for %d Ingresses created in %v, want at most %v (one per %v window)", builds, n, applied, limit, window)
	}
	if builds >= n {
		t.Errorf("%v builds for %d Ingresses: one per Ingress, nothing coalesced", builds, n)
	}
	if code, be, _ := call(http.DefaultClient, p.addr, "h299.test"); code != 200 || be != "burst0" {
		t.Errorf("h299.test: %d from %q", code, be)
	}
}

// TestTwoProxiesOneClass: two proxies with different Services (VIPs) in one namespace claim
// the same class. Both are the namespace's own proxy and their Services were created in the
// same second, so the first by name writes and the other yields, once, naming it: no
// conflict, no change of the status afterwards. (Before arbitration they fought, then backed
// off: a slower flap.)
func TestTwoProxiesOneClass(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	proxyService(t, ns, "proxy", "100.64.0.21")
	proxyService(t, ns, "proxy-b", "100.64.0.22")
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	create(t, ingress(ns, "shared", "metalgate", "a.test", "web"))
	log := watchStatus(t, ns, "shared")
	a := startProxy(t, ns, func(o *controlplane.Options) {
		o.FieldManager, o.BackoffBase = "metalgate-proxy.a", 500*time.Millisecond
	})
	b := startProxy(t, ns, func(o *controlplane.Options) {
		o.FieldManager, o.BackoffBase = "metalgate-proxy.b", 500*time.Millisecond
		o.PublishService = types.NamespacedName{Namespace: ns, Name: "proxy-b"}
	})
	// The Services may or may not have been created in the same second: the older, then the
	// first by name, wins; "proxy" is both.
	warning(t, ns, "shared", contract.ReasonYielded, fmt.Sprintf("published by metalgate proxy %s/proxy (100.64.0.21), not by this proxy (%s/proxy-b)", ns, ns))
	waitIngressIPs(t, ns, "shared", "100.64.0.21")
	stable(t, log, ns, "shared", "100.64.0.21", 8*time.Second) // a fight, if any, would go on meanwhile
	for _, v := range log.since(0) {
		if v == "100.64.0.22" {
			t.Errorf("the loser's VIP was published: %q", log.since(0))
		}
	}
	if n := testutil.ToFloat64(a.metrics.StatusConflicts) + testutil.ToFloat64(b.metrics.StatusConflicts); n != 0 {
		t.Errorf("%v conflicts counted, want 0", n)
	}
	if _, n := eventsOn(t, ns, "shared", contract.ReasonYielded); n != 1 {
		t.Errorf("%d StatusYielded events, want 1", n)
	}
	if v := testutil.ToFloat64(b.metrics.IngressesYielded.WithLabelValues("proxy")); v != 1 {
		t.Errorf("loser's metalgate_proxy_ingresses_yielded{reason=proxy} = %v, want 1", v)
	}
}

// routesTo waits until the proxy's table sends host to exactly the endpoints of bes.
func routesTo(t *testing.T, p *proxy, host string, bes ...*backend) {
	t.Helper()
	var want []string
	for _, b := range bes {
		want = append(want, fmt.Sprintf("%s:%d", podIP(b.ip), b.port))
	}
	slices.Sort(want)
	testenv.Eventually(t, 20*time.Second, host+" routed to "+strings.Join(want, ","), func() error {
		tab := p.dp.Table()
		if tab == nil {
			return errors.New("no table yet")
		}
		r := tab.Lookup(host, "/")
		if r == nil || r.Backend == nil {
			return errors.New("no route")
		}
		if got := r.Backend.Endpoints; !slices.Equal(got, want) {
			return fmt.Errorf("endpoints %v", got)
		}
		return nil
	})
}
