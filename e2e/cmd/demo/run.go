package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/e2e/lab"
)

// tenants are the demo namespaces (config/demo/<name>); each Ingress is echo, host <ns>.demo.test.
var tenants = []string{"one", "two", "three"}

const (
	operatorNS = "metalgate-system"
	ingress    = "echo"
	proxyName  = "metalgate-proxy"
	// misPublish is the misinstalled proxy's --publish-service (config/demo/misinstalled-proxy).
	misPublish = "metalgate-system/does-not-exist"
)

// proxyReasons are the Warning reasons the proxies record (docs/proxy.md).
var proxyReasons = []string{"NoLoadBalancerAddress", "StatusConflict", "StatusYielded", "ForeignStatusWriter", "PathConflict", "MissingService",
	"MissingServicePort", "InvalidTLSSecret", "InvalidAnnotation", "InvalidRule"}

// Announcement modes (DEMO_MODE): how the VIPs reach the client.
const (
	modeL2  = "l2"  // ARP from one elected node; the client has the pool on its segment
	modeBGP = "bgp" // every node advertises each VIP to the lab router; the client goes through it
)

type demo struct {
	mode     string // modeL2 or modeBGP
	l        *lab.Lab
	cs       *kubernetes.Clientset
	out      io.Writer
	start    time.Time
	failures []string
	vips     map[string]netip.Addr // tenant → its proxy Service's VIP
	// misStarted is when the misinstalled proxy was applied, secondStarted when the
	// cluster-wide proxy was installed properly; clusterVIP is its Service's VIP.
	misStarted    time.Time
	secondStarted time.Time
	clusterVIP    netip.Addr
}

func host(ns string) string { return ns + ".demo.test" }

// run is `demo run`.
func run(ctx context.Context, out io.Writer, mode string, watch time.Duration) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	l, err := lab.Open(octx)
	cancel()
	if err != nil {
		return err
	}
	cs, err := l.Clientset()
	if err != nil {
		return err
	}
	d := &demo{mode: mode, l: l, cs: cs, out: out, start: time.Now(), vips: map[string]netip.Addr{}}
	d.say("metalgate demo in lab %q (kubeconfig %s)", l.Prefix, l.KubeconfigPath())
	type step struct {
		name string
		fn   func(context.Context) error
	}
	steps := []step{{"operator: controller, a speaker per node, IngressClass metalgate (kubectl apply -k config/lab)", d.operator}}
	switch mode {
	case modeL2:
		d.say("announcing at layer 2 (ARP); the BGP variant: make demo DEMO_MODE=bgp")
		steps = append(steps,
			step{"layer 2: the client reaches the VIP range on its segment", d.clientRoute},
			step{"pool 100.64.0.0/16 + L2Advertisement, three tenants one/two/three with their own proxies (config/demo)", d.tenants})
	case modeBGP:
		d.say("announcing by BGP to the lab router (FRR, AS 64500); the layer-2 variant: make demo")
		steps = append(steps,
			step{"BGP: the client reaches the VIP range through the router only", d.clientViaRouter},
			step{"pool 100.64.0.0/16 + BGPPeer (the lab router) + BGPAdvertisement, three tenants one/two/three with their own proxies (config/demo)", d.tenants},
			step{"the router learns each VIP from all three nodes (ECMP)", d.routerPaths})
	default:
		return fmt.Errorf("DEMO_MODE=%q: want %s or %s", mode, modeL2, modeBGP)
	}
	steps = append(steps,
		step{"kubectl get svc,ingress -A", d.show},
		step{"curl through each VIP from the client", d.curlAll},
		step{"a fourth tenant through Gateway API: GatewayClass + Gateway + HTTPRoute (config/demo/gateway) — its own VIP and proxy, no Ingress", d.gatewayTenant})
	for _, step := range steps {
		d.step(step.name)
		if err := step.fn(ctx); err != nil {
			d.fail("%s: %v", step.name, err)
			return d.finish(watch, false)
		}
	}
	d.step(fmt.Sprintf("the mistake: a fourth proxy, cluster-wide, same IngressClass, --publish-service %s; watching every Ingress every second from the apply until %s after it runs", misPublish, watch))
	if err := d.misinstall(ctx, watch); err != nil {
		d.fail("misinstalled proxy: %v", err)
	}
	d.step("the conflict is reported: kubectl get events -A --field-selector type=Warning (lines from the proxies)")
	if err := d.events(ctx); err != nil {
		d.fail("events: %v", err)
	}
	d.step("still served after the mistake")
	if err := d.curlAll(ctx); err != nil {
		d.fail("curl after the mistake: %v", err)
	}
	d.step(fmt.Sprintf("the fix: the cluster-wide proxy as config/proxy ships it (its own LoadBalancer Service and VIP) — now two valid proxies serve every tenant Ingress on class metalgate; watching every Ingress every second from the apply until %s after it runs", watch))
	if err := d.secondInstall(ctx, watch); err != nil {
		d.fail("second install: %v", err)
	}
	d.step("why the status did not move: the proxies arbitrate (namespace's own proxy > cluster-wide); the loser says so once per Ingress")
	if err := d.yielded(ctx); err != nil {
		d.fail("yielded: %v", err)
	}
	return d.finish(watch, true)
}

func (d *demo) elapsed() string {
	e := time.Since(d.start).Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(e.Minutes()), int(e.Seconds())%60)
}

func (d *demo) step(s string) { fmt.Fprintf(d.out, "\n==> [%s] %s\n", d.elapsed(), s) }
func (d *demo) say(f string, a ...any) {
	fmt.Fprintf(d.out, "    "+f+"\n", a...)
}
func (d *demo) ok(f string, a ...any) { fmt.Fprintf(d.out, "    ok   "+f+"\n", a...) }
func (d *demo) fail(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	d.failures = append(d.failures, msg)
	fmt.Fprintf(d.out, "    FAIL %s\n", msg)
}

// indent prints command output indented under the step.
func (d *demo) indent(s string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(d.out, "      %s\n", line)
	}
}

// waitFor polls check every second until it returns nil, printing progress every 10 s.
func (d *demo) waitFor(ctx context.Context, what string, timeout time.Duration, check func() error) error {
	start := time.Now()
	next := start.Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("%s: not within %s: %v", what, timeout, err)
		}
		if time.Now().After(next) {
			d.say("… %s (%s): %v", what, time.Since(start).Round(time.Second), err)
			next = next.Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (d *demo) kubectl(ctx context.Context, args ...string) (string, error) {
	kctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return d.l.Kubectl(kctx, args...)
}

// applied summarises kubectl apply output: "12 objects (3 created, 9 unchanged)".
func applied(out string) string {
	counts := map[string]int{}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n++
		counts[f[len(f)-1]]++
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d objects (%s)", n, strings.Join(parts, ", "))
}

func (d *demo) apply(ctx context.Context, dir string) error {
	out, err := d.kubectl(ctx, "apply", "-k", dir)
	if err != nil {
		return err
	}
	d.ok("kubectl apply -k %s: %s", dir, applied(out))
	return nil
}

func (d *demo) operator(ctx context.Context) error {
	// Replaying: the mistake of an earlier run goes first, and its fix (config/proxy: the
	// same Deployment, plus the Service).
	for _, dir := range []string{"config/demo/misinstalled-proxy", "config/proxy"} {
		if _, err := d.kubectl(ctx, "delete", "--ignore-not-found", "--wait=true", "-k", dir); err != nil {
			return err
		}
	}
	if err := d.apply(ctx, "config/lab"); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/ipaddresspools.metalgate.io", "crd/l2advertisements.metalgate.io"); err != nil {
		return err
	}
	if err := d.waitFor(ctx, "controller Deployment available", 3*time.Minute, func() error {
		return d.deploymentReady(ctx, operatorNS, "metalgate-controller")
	}); err != nil {
		return err
	}
	d.ok("controller running")
	if err := d.waitFor(ctx, "a speaker on every node", 3*time.Minute, func() error {
		ds, err := d.cs.AppsV1().DaemonSets(operatorNS).Get(ctx, "metalgate-speaker", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.NumberReady != lab.NodeCount || ds.Status.UpdatedNumberScheduled != lab.NodeCount {
			return fmt.Errorf("%d/%d ready, %d updated", ds.Status.NumberReady, lab.NodeCount, ds.Status.UpdatedNumberScheduled)
		}
		return nil
	}); err != nil {
		return err
	}
	d.ok("speaker ready on all %d nodes", lab.NodeCount)
	return nil
}

func (d *demo) deploymentReady(ctx context.Context, ns, name string) error {
	dep, err := d.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if dep.Status.ObservedGeneration < dep.Generation || dep.Status.ReadyReplicas != want ||
		dep.Status.UpdatedReplicas != want || dep.Status.Replicas != want {
		return fmt.Errorf("%s/%s: %d/%d ready, %d updated, %d total", ns, name, dep.Status.ReadyReplicas, want, dep.Status.UpdatedReplicas, dep.Status.Replicas)
	}
	return nil
}

// clientRoute puts the VIP pool on the client's segment: in layer-2 mode the VIPs must be on
// the LAN the clients are on. The lab's segment is 198.51.100.0/24, so the client gets an
// on-link route for 100.64.0.0/16 (inside its network namespace only).
func (d *demo) clientRoute(ctx context.Context) error {
	if _, err := d.l.Exec(ctx, "client", "ip", "route", "replace", lab.VIPPool.String(), "dev", "eth0"); err != nil {
		return err
	}
	d.ok("ip -n %sclient route replace %s dev eth0 (the client ARPs for VIPs; the elected node's speaker answers)", d.l.Prefix, lab.VIPPool)
	return nil
}

// clientViaRouter removes the on-link route the layer-2 variant gives the client: in BGP mode
// its packets to the pool follow its default route, through the router, which knows the VIPs
// only from the nodes' BGP advertisements.
func (d *demo) clientViaRouter(ctx context.Context) error {
	out, err := d.l.Exec(ctx, "client", "ip", "route", "show", lab.VIPPool.String())
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		if _, err := d.l.Exec(ctx, "client", "ip", "route", "del", lab.VIPPool.String()); err != nil {
			return err
		}
		d.ok("removed the client's on-link route for %s (left by a layer-2 run)", lab.VIPPool)
	}
	first := lab.VIPPool.Addr().Next()
	out, err = d.l.Exec(ctx, "client", "ip", "route", "get", first.String())
	if err != nil {
		return err
	}
	d.say("$ ip -n %sclient route get %s", d.l.Prefix, first)
	d.indent(strings.TrimSpace(out))
	return nil
}

// routerPaths waits until FRR has every tenant's VIP/32 from all three nodes and shows the
// router's view (BGP table and the ECMP route in its kernel).
func (d *demo) routerPaths(ctx context.Context) error {
	want := map[string]string{}
	for _, n := range lab.Nodes() {
		want[n.IPv4.String()] = n.Name
	}
	for _, ns := range tenants {
		vip := d.vips[ns]
		if err := d.waitFor(ctx, fmt.Sprintf("router has %s/32 from %d nodes", vip, len(want)), time.Minute, func() error {
			paths, err := d.l.RouterPaths(ctx, vip)
			if err != nil {
				return err
			}
			hops := slices.Sorted(maps.Keys(paths))
			if len(hops) != len(want) {
				return fmt.Errorf("next hops %v", hops)
			}
			for _, h := range hops {
				if _, ok := want[h]; !ok {
					return fmt.Errorf("next hop %s is not a node (next hops %v)", h, hops)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		d.ok("%s's VIP %s/32: %d paths, one per node", ns, vip, len(want))
	}
	vip := d.vips[tenants[0]]
	d.say("$ ip netns exec %srouter vtysh --vty_socket %s -c 'show ip bgp %s/32'", d.l.Prefix, d.l.FRRDir(), vip)
	if out, err := d.l.Vtysh(ctx, "show ip bgp "+vip.String()+"/32"); err == nil {
		d.indent(strings.TrimRight(out, "\n"))
	}
	d.say("$ ip -n %srouter route show %s/32", d.l.Prefix, vip)
	if out, err := d.l.Exec(ctx, "router", "ip", "route", "show", vip.String()+"/32"); err == nil {
		d.indent(strings.TrimRight(out, "\n"))
	}
	return nil
}

func (d *demo) tenants(ctx context.Context) error {
	// Replaying in the other mode: its announcements go first.
	use, other := "config/demo/l2", "config/demo/bgp"
	if d.mode == modeBGP {
		use, other = other, use
	}
	if _, err := d.kubectl(ctx, "delete", "--ignore-not-found", "-k", other); err != nil {
		return err
	}
	for _, dir := range []string{"config/demo/pool", use} {
		if err := d.apply(ctx, dir); err != nil {
			return err
		}
	}
	for _, ns := range tenants {
		if err := d.apply(ctx, "config/demo/"+ns); err != nil {
			return err
		}
	}
	for _, ns := range tenants {
		for _, name := range []string{proxyName, "echo"} {
			if err := d.waitFor(ctx, fmt.Sprintf("Deployment %s/%s ready", ns, name), 4*time.Minute, func() error {
				return d.deploymentReady(ctx, ns, name)
			}); err != nil {
				return err
			}
		}
		d.ok("%s: proxy (--watch-namespace=%s) and echo ready", ns, ns)
	}
	for _, ns := range tenants {
		if err := d.waitFor(ctx, fmt.Sprintf("Service %s/%s gets a VIP", ns, proxyName), time.Minute, func() error {
			svc, err := d.cs.CoreV1().Services(ns).Get(ctx, proxyName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if a, err := netip.ParseAddr(in.IP); err == nil && lab.VIPPool.Contains(a) {
					d.vips[ns] = a
					return nil
				}
			}
			return fmt.Errorf("no address from %s yet", lab.VIPPool)
		}); err != nil {
			return err
		}
	}
	seen := map[netip.Addr]string{}
	for _, ns := range tenants {
		if other, dup := seen[d.vips[ns]]; dup {
			return fmt.Errorf("%s and %s share VIP %s", other, ns, d.vips[ns])
		}
		seen[d.vips[ns]] = ns
	}
	for _, ns := range tenants {
		want := d.vips[ns].String()
		if err := d.waitFor(ctx, fmt.Sprintf("Ingress %s/%s status = %s", ns, ingress, want), time.Minute, func() error {
			got, err := d.ingressAddress(ctx, ns)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("status.loadBalancer = %q", got)
			}
			return nil
		}); err != nil {
			return err
		}
		d.ok("Ingress %s/%s (host %s) → %s, the VIP of %s's own proxy", ns, ingress, host(ns), want, ns)
	}
	return nil
}

// ingressAddress returns the Ingress's status addresses, comma-separated ("" when none).
func (d *demo) ingressAddress(ctx context.Context, ns string) (string, error) {
	ing, err := d.cs.NetworkingV1().Ingresses(ns).Get(ctx, ingress, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return lbAddresses(ing), nil
}

// lbAddresses returns an Ingress's status addresses, comma-separated ("" when none).
func lbAddresses(ing *networkingv1.Ingress) string {
	var a []string
	for _, in := range ing.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			a = append(a, in.IP)
		} else {
			a = append(a, in.Hostname)
		}
	}
	return strings.Join(a, ",")
}

func (d *demo) show(ctx context.Context) error {
	out, err := d.kubectl(ctx, "get", "svc,ingress", "-A")
	if err != nil {
		return err
	}
	d.indent(out)
	return nil
}

// echoReply is the part of e2e/cmd/echo's JSON the demo shows.
type echoReply struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	Host      string `json:"host"`
	Path      string `json:"path"`
}

// curl runs curl in the client namespace and returns the body and status code.
func (d *demo) curl(ctx context.Context, vip netip.Addr, hostHeader string) (string, string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := d.l.Exec(cctx, "client", "curl", "-s", "-m", "3", "-w", "\n%{http_code}", "http://"+vip.String()+"/", "-H", "Host: "+hostHeader)
	if err != nil {
		return "", "", err
	}
	out = strings.TrimRight(out, "\n")
	i := strings.LastIndex(out, "\n")
	if i < 0 {
		return "", strings.TrimSpace(out), nil
	}
	return strings.TrimSpace(out[:i]), strings.TrimSpace(out[i+1:]), nil
}

// curlEcho curls vip with Host <ns>.demo.test from the client until an echo pod of namespace
// ns answers 200, and shows the command and the reply.
func (d *demo) curlEcho(ctx context.Context, vip netip.Addr, ns string) error {
	var rep echoReply
	err := d.waitFor(ctx, fmt.Sprintf("curl %s with Host %s", vip, host(ns)), 90*time.Second, func() error {
		body, code, err := d.curl(ctx, vip, host(ns))
		if err != nil {
			return err
		}
		if code != "200" {
			return fmt.Errorf("HTTP %s: %.200s", code, body)
		}
		rep = echoReply{}
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			return fmt.Errorf("not the echo JSON: %.200s", body)
		}
		if rep.Namespace != ns || !strings.HasPrefix(rep.Pod, "echo-") {
			return fmt.Errorf("answered by pod %q in namespace %q", rep.Pod, rep.Namespace)
		}
		return nil
	})
	d.say("$ ip netns exec %sclient curl -s http://%s/ -H 'Host: %s'", d.l.Prefix, vip, host(ns))
	if err != nil {
		return err
	}
	b, _ := json.Marshal(rep)
	d.say("  %s   (headers left out)", b)
	return nil
}

func (d *demo) curlAll(ctx context.Context) error {
	for _, ns := range tenants {
		if err := d.curlEcho(ctx, d.vips[ns], ns); err != nil {
			return err
		}
	}
	// Isolation: each proxy serves its own namespace only.
	a, b := tenants[0], tenants[1]
	_, code, err := d.curl(ctx, d.vips[a], host(b))
	if err != nil {
		return err
	}
	if code != "404" {
		return fmt.Errorf("%s's VIP answered Host %s with HTTP %s, want 404 (%s's proxy watches %s only)", a, host(b), code, a, a)
	}
	d.ok("%s's VIP %s with Host %s → HTTP 404: each proxy serves its own namespace only", a, d.vips[a], host(b))
	return nil
}

// record is what a watch saw of one tenant's Ingress.
type record struct {
	values    []string // distinct, in order first seen (polls and watch events)
	last      string   // by the last poll
	changes   int      // between consecutive polls, or consecutive watch events
	polls     int
	errors    int
	events    int // watch events
	watchLast *string
}

// seen adds v to the distinct values.
func (r *record) seen(v string) {
	if !slices.Contains(r.values, v) {
		r.values = append(r.values, v)
	}
}

// polled records a successful poll that read v.
func (r *record) polled(v string) {
	r.polls++
	if r.polls > 1 && r.last != v {
		r.changes++
	}
	r.last = v
	r.seen(v)
}

// watched records a watch event that showed v.
func (r *record) watched(v string) {
	r.events++
	if r.watchLast != nil && *r.watchLast != v {
		r.changes++
	}
	r.watchLast = &v
	r.seen(v)
}

// progress is one tenant's part of a progress line: "one=100.64.0.1 (1 value(s), 0 change(s))".
func (r *record) progress(ns string) string {
	cur := "?"
	if r.polls > 0 {
		cur = show(r.last)
	}
	return fmt.Sprintf("%s=%s (%d value(s), %d change(s))", ns, cur, len(r.values), r.changes)
}

// ingressWatch is what the pollers and watchers of watchIngresses share.
type ingressWatch struct {
	mu   sync.Mutex
	recs map[string]*record // by tenant
	end  time.Time          // when the watch ends: far ahead until the change returned
}

func newIngressWatch(t0 time.Time) *ingressWatch {
	w := &ingressWatch{recs: map[string]*record{}, end: t0.Add(24 * time.Hour)}
	for _, ns := range tenants {
		w.recs[ns] = &record{}
	}
	return w
}

// update runs f on the record of ns under the lock.
func (w *ingressWatch) update(ns string, f func(*record)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.recs[ns])
}

func (w *ingressWatch) setEnd(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.end = t
}

func (w *ingressWatch) ending() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end
}

// progress is the progress line of every tenant.
func (w *ingressWatch) progress() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, ns := range tenants {
		parts = append(parts, w.recs[ns].progress(ns))
	}
	return strings.Join(parts, "  ")
}

// watchIngresses polls every tenant's Ingress every second, and watches it, from just before
// change (the install under test, until what it installed runs) until watch after change
// returned; it prints progress every 10 s and returns what it saw.
func (d *demo) watchIngresses(ctx context.Context, watch time.Duration, change func(t0 time.Time) error) (map[string]*record, error) {
	t0 := time.Now()
	iw := newIngressWatch(t0)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { d.pollIngresses(wctx, iw) })
	for _, ns := range tenants {
		wg.Go(func() { d.followIngress(wctx, iw, ns) })
	}
	if err := change(t0); err != nil {
		cancel()
		wg.Wait()
		return nil, err
	}
	t1 := time.Now()
	iw.setEnd(t1.Add(watch))
	stop := time.AfterFunc(watch, cancel)
	defer stop.Stop()
	d.reportProgress(wctx, iw, t1, watch)
	wg.Wait()
	return iw.recs, ctx.Err()
}

// pollIngresses reads every tenant's Ingress every second until ctx ends, as a user watching
// kubectl would see it.
func (d *demo) pollIngresses(ctx context.Context, iw *ingressWatch) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, ns := range tenants {
			pctx, pcancel := context.WithTimeout(ctx, 900*time.Millisecond)
			v, err := d.ingressAddress(pctx, ns)
			pcancel()
			// A read cut short by the end of the watch is not a failed read.
			failed := err != nil && time.Until(iw.ending()) > time.Second
			iw.update(ns, func(r *record) {
				switch {
				case failed:
					r.errors++
				case err == nil:
					r.polled(v)
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// followIngress watches one tenant's Ingress until ctx ends, which sees every committed
// change, even one reverted within a second. It starts (again) from a read whenever it has
// no resourceVersion to resume from.
func (d *demo) followIngress(ctx context.Context, iw *ingressWatch, ns string) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			// A watch without a resourceVersion asks for a watch list, which this lab's API
			// server refuses.
			ing, err := d.cs.NetworkingV1().Ingresses(ns).Get(ctx, ingress, metav1.GetOptions{})
			if err != nil {
				pause(ctx, time.Second)
				continue
			}
			rv = ing.ResourceVersion
		}
		w, err := d.cs.NetworkingV1().Ingresses(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + ingress, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		rv = drainIngressWatch(w, rv, func(v string) { iw.update(ns, func(r *record) { r.watched(v) }) })
		w.Stop()
	}
}

// drainIngressWatch hands the address of every Ingress event of w to seen until w ends, and
// returns the resourceVersion to resume from: the last one seen, or "" after an error event
// (e.g. resourceVersion too old: read again).
func drainIngressWatch(w apiwatch.Interface, rv string, seen func(v string)) string {
	for ev := range w.ResultChan() {
		ing, ok := ev.Object.(*networkingv1.Ingress)
		if !ok {
			if ev.Type == apiwatch.Error {
				rv = ""
			}
			continue
		}
		rv = ing.ResourceVersion
		if ev.Type == apiwatch.Bookmark {
			continue
		}
		seen(lbAddresses(ing))
	}
	return rv
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// reportProgress prints iw's progress every 10 s after t1, and once more when ctx ends.
func (d *demo) reportProgress(ctx context.Context, iw *ingressWatch, t1 time.Time, watch time.Duration) {
	for {
		next := t1.Add(time.Duration(int(time.Since(t1)/(10*time.Second))+1) * 10 * time.Second)
		pause(ctx, time.Until(next))
		el := min(time.Since(t1).Round(time.Second), watch)
		d.say("[%4s/%s] %s", el, watch, iw.progress())
		if ctx.Err() != nil {
			return
		}
	}
}

// oneValue checks that each tenant's Ingress showed its own tenant's VIP, and only that,
// throughout a watch.
func (d *demo) oneValue(recs map[string]*record, watch time.Duration) []string {
	nodeIPs := map[string]string{}
	for _, n := range lab.Nodes() {
		nodeIPs[n.IPv4.String()], nodeIPs[n.IPv6.String()] = n.Name, n.Name
	}
	var errs []string
	for _, ns := range tenants {
		r := recs[ns]
		want := d.vips[ns].String()
		var shown []string
		for _, v := range r.values {
			s := show(v)
			for _, a := range strings.Split(v, ",") {
				if n, isNode := nodeIPs[a]; isNode {
					s += " (NODE IP of " + n + ")"
				}
				if a == d.clusterVIP.String() {
					s += " (the cluster-wide proxy's VIP)"
				}
			}
			shown = append(shown, s)
		}
		switch {
		case r.polls < int(watch/time.Second)/2:
			errs = append(errs, fmt.Sprintf("Ingress %s/%s: only %d of ~%d polls succeeded (%d failed)", ns, ingress, r.polls, int(watch/time.Second), r.errors))
			d.fail("Ingress %s/%s: only %d polls succeeded, too few to tell", ns, ingress, r.polls)
		case len(r.values) != 1 || r.values[0] != want || r.changes > 0:
			errs = append(errs, fmt.Sprintf("Ingress %s/%s: values seen %v, %d changes, want only %s", ns, ingress, shown, r.changes, want))
			d.fail("Ingress %s/%s: %d polls, %d changes, values seen: %s (want only %s)", ns, ingress, r.polls, r.changes, strings.Join(shown, ", "), want)
		default:
			d.ok("Ingress %s/%s: %d polls + a watch (%d updates) over %s, one value seen: %s (never empty, never a node IP)", ns, ingress, r.polls, r.events, watch, want)
		}
		if r.errors > 0 {
			d.say("     (%d polls of %s failed to read; not counted)", r.errors, ns)
		}
	}
	return errs
}

// misinstall applies the fourth proxy while a watcher polls every tenant's Ingress every
// second for watch (from just before the apply) and records every distinct value.
func (d *demo) misinstall(ctx context.Context, watch time.Duration) error {
	var readyErr error
	recs, err := d.watchIngresses(ctx, watch, func(t0 time.Time) error {
		d.misStarted = t0
		if err := d.apply(ctx, "config/demo/misinstalled-proxy"); err != nil {
			return err
		}
		d.say("$ kubectl -n %s get deploy %s -o jsonpath='{.spec.template.spec.containers[0].args}'", operatorNS, proxyName)
		if out, err := d.kubectl(ctx, "-n", operatorNS, "get", "deploy", proxyName, "-o", "jsonpath={.spec.template.spec.containers[0].args}"); err == nil {
			d.indent(out)
		}
		readyErr = d.waitFor(ctx, "misinstalled proxy ready (it serves, and must not publish)", 3*time.Minute, func() error {
			return d.deploymentReady(ctx, operatorNS, proxyName)
		})
		if readyErr == nil {
			d.ok("misinstalled proxy running (%s after the apply)", time.Since(t0).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := d.oneValue(recs, watch)
	if readyErr != nil {
		errs = append(errs, readyErr.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// secondInstall fixes the mistake the way a user would — the cluster-wide proxy as
// config/proxy ships it, with its own LoadBalancer Service and VIP — which makes two valid
// proxies on the class for every tenant Ingress. Watched as the mistake was: each Ingress
// must keep its tenant's VIP (the tenant's proxy wins the arbitration).
func (d *demo) secondInstall(ctx context.Context, watch time.Duration) error {
	var stepErr error
	recs, err := d.watchIngresses(ctx, watch, func(t0 time.Time) error {
		d.secondStarted = t0
		if err := d.apply(ctx, "config/proxy"); err != nil {
			return err
		}
		stepErr = d.waitFor(ctx, "cluster-wide proxy ready with its own VIP", 3*time.Minute, func() error {
			if err := d.deploymentReady(ctx, operatorNS, proxyName); err != nil {
				return err
			}
			svc, err := d.cs.CoreV1().Services(operatorNS).Get(ctx, proxyName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if a, err := netip.ParseAddr(in.IP); err == nil {
					d.clusterVIP = a
					return nil
				}
			}
			return fmt.Errorf("no address yet on Service %s/%s", operatorNS, proxyName)
		})
		if stepErr == nil {
			d.ok("cluster-wide proxy running, Service %s/%s VIP %s (%s after the apply); it serves class metalgate in every namespace", operatorNS, proxyName, d.clusterVIP, time.Since(t0).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := d.oneValue(recs, watch)
	if stepErr != nil {
		errs = append(errs, stepErr.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// yielded shows why the status did not move: the cluster-wide proxy's StatusYielded event on
// each tenant's Ingress (once each, naming the winner and the rule), and that it still
// serves their traffic on its own VIP.
func (d *demo) yielded(ctx context.Context) error {
	if !d.clusterVIP.IsValid() {
		return fmt.Errorf("the cluster-wide proxy has no VIP: nothing to show")
	}
	since := d.secondStarted.Add(-5 * time.Second)
	notes := map[string]string{}
	err := d.waitFor(ctx, "StatusYielded on every Ingress", time.Minute, func() error {
		var missing []string
		for _, ns := range tenants {
			evs, err := d.cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			n := 0
			for _, e := range evs.Items {
				if e.Reason != "StatusYielded" || e.Regarding.Kind != "Ingress" || e.Regarding.Name != ingress || eventLast(&e).Before(since) {
					continue
				}
				n += max(int(e.DeprecatedCount), 1)
				if e.Series != nil {
					n = max(n, int(e.Series.Count))
				}
				notes[ns] = fmt.Sprintf("%-6s %-8s %s (%s ago): %s", ns, e.Type, e.Reason, time.Since(eventLast(&e)).Round(time.Second), e.Note)
			}
			switch {
			case n == 0:
				missing = append(missing, ns)
			case n > 1:
				return fmt.Errorf("%d StatusYielded events on Ingress %s/%s, want one", n, ns, ingress)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("none yet in %v", missing)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.say("$ kubectl get events -A --field-selector reason=StatusYielded   (since the install; earlier runs' are left out)")
	for _, ns := range tenants {
		d.indent(notes[ns])
	}
	for _, ns := range tenants {
		d.ok("Ingress %s/%s: one StatusYielded, from the cluster-wide proxy, naming %s/%s and the rule", ns, ingress, ns, proxyName)
	}
	d.say("$ kubectl get svc -A -l metalgate.io/ingress-proxy -o 'custom-columns=SERVICE:.metadata.name,NAMESPACE:.metadata.namespace,VIP:.status.loadBalancer.ingress[0].ip,WATCHES:.metadata.annotations.metalgate\\.io/proxy-watch-namespaces'")
	if out, err := d.kubectl(ctx, "get", "svc", "-A", "-l", "metalgate.io/ingress-proxy", "-o",
		`custom-columns=SERVICE:.metadata.name,NAMESPACE:.metadata.namespace,VIP:.status.loadBalancer.ingress[0].ip,WATCHES:.metadata.annotations.metalgate\.io/proxy-watch-namespaces`); err == nil {
		d.indent(out)
	}
	// It yields the status, not the traffic (--serve-yielded-ingresses defaults to true).
	ns := tenants[0]
	return d.waitFor(ctx, fmt.Sprintf("curl the cluster-wide VIP %s with Host %s", d.clusterVIP, host(ns)), 90*time.Second, func() error {
		body, code, err := d.curl(ctx, d.clusterVIP, host(ns))
		if err != nil {
			return err
		}
		if code != "200" {
			return fmt.Errorf("HTTP %s: %.200s", code, body)
		}
		d.ok("the cluster-wide VIP %s still serves %s (HTTP 200): it yields the status, not the traffic", d.clusterVIP, host(ns))
		return nil
	})
}

// eventLast is when an event was last seen.
func eventLast(e *eventsv1.Event) time.Time {
	last := e.EventTime.Time
	if e.Series != nil && e.Series.LastObservedTime.After(last) {
		last = e.Series.LastObservedTime.Time
	}
	if e.DeprecatedLastTimestamp.After(last) {
		last = e.DeprecatedLastTimestamp.Time
	}
	return last
}

func show(v string) string {
	if v == "" {
		return "<none>"
	}
	return v
}

// events checks that the misinstalled proxy reported, on every tenant's Ingress, why it writes
// nothing, and prints the proxies' Warning events.
func (d *demo) events(ctx context.Context) error {
	since := d.misStarted.Add(-5 * time.Second)
	err := d.waitFor(ctx, "NoLoadBalancerAddress on every Ingress", time.Minute, func() error {
		var missing []string
		for _, ns := range tenants {
			evs, err := d.cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			found := false
			for _, e := range evs.Items {
				last := e.EventTime.Time
				if e.Series != nil && e.Series.LastObservedTime.After(last) {
					last = e.Series.LastObservedTime.Time
				}
				if e.DeprecatedLastTimestamp.After(last) {
					last = e.DeprecatedLastTimestamp.Time
				}
				if e.Type == corev1.EventTypeWarning && e.Reason == "NoLoadBalancerAddress" &&
					e.Regarding.Kind == "Ingress" && e.Regarding.Name == ingress &&
					strings.Contains(e.Note, misPublish) && !last.Before(since) {
					found = true
				}
			}
			if !found {
				missing = append(missing, ns)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("none yet in %v", missing)
		}
		return nil
	})
	out, kerr := d.kubectl(ctx, "get", "events", "-A", "--field-selector", "type=Warning")
	if kerr != nil {
		return kerr
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var keep []string
	for i, line := range lines {
		if i == 0 {
			keep = append(keep, line)
			continue
		}
		for _, r := range proxyReasons {
			if strings.Contains(line, " "+r+" ") {
				keep = append(keep, line)
				break
			}
		}
	}
	d.indent(strings.Join(keep, "\n"))
	if err != nil {
		return err
	}
	d.ok("the cluster-wide proxy says on every Ingress why it writes nothing (publish Service %s not found)", misPublish)
	return nil
}

func (d *demo) finish(watch time.Duration, complete bool) error {
	d.step("summary")
	if complete {
		for _, ns := range tenants {
			d.say("%-5s Ingress echo (host %s) → VIP %s of its own proxy", ns, host(ns), d.vips[ns])
		}
		d.say("the misinstalled cluster-wide proxy (publish Service %s) wrote nothing for %s: no node IP, no flapping; it says why in Warning events", misPublish, watch)
		if d.clusterVIP.IsValid() {
			d.say("installed properly (own VIP %s) it is a second valid proxy for every tenant Ingress: the tenants' own proxies keep publishing (one value for %s), it yields and says so once per Ingress (StatusYielded), and still serves their traffic", d.clusterVIP, watch)
		}
	}
	if d.mode == modeBGP {
		d.say("announced by BGP: every node advertises each VIP to the lab router, which spreads the traffic over them (ECMP)")
	} else {
		d.say("announced at layer 2: one elected node answers ARP for each VIP (make demo DEMO_MODE=bgp shows BGP)")
	}
	d.say("took %s", time.Since(d.start).Round(time.Second))
	d.say("")
	d.say("The lab stays up. Poke at it:")
	d.say("  export KUBECONFIG=%s", d.l.KubeconfigPath())
	d.say("  %s get svc,ingress -A", d.l.Config.Kubectl())
	d.say("  %s get events -A --field-selector type=Warning", d.l.Config.Kubectl())
	vip := "<VIP>"
	if v, ok := d.vips[tenants[0]]; ok {
		vip = v.String()
	}
	d.say("  ip netns exec %sclient curl -s http://%s/ -H 'Host: %s'", d.l.Prefix, vip, host(tenants[0]))
	if d.mode == modeBGP {
		d.say("  ip netns exec %srouter vtysh --vty_socket %s -c 'show ip bgp'", d.l.Prefix, d.l.FRRDir())
	}
	d.say("Take it down: make demo-down%s", prefixArgs(d.l))
	if len(d.failures) > 0 {
		fmt.Fprintf(d.out, "\nDEMO FAILED: %d check(s) failed:\n", len(d.failures))
		for _, f := range d.failures {
			fmt.Fprintf(d.out, "  - %s\n", f)
		}
		return fmt.Errorf("%d check(s) failed", len(d.failures))
	}
	fmt.Fprintf(d.out, "\nDEMO OK\n")
	return nil
}

// prefixArgs repeats the lab selection for commands the user copies.
func prefixArgs(l *lab.Lab) string {
	if l.Prefix == lab.DefaultPrefix && os.Getenv("LAB_DIR") == "" {
		return ""
	}
	return fmt.Sprintf(" LAB_PREFIX=%s LAB_DIR=%s", l.Prefix, l.Dir)
}

// repoRoot walks up from the working directory to go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the metalgate repository (no go.mod above the working directory)")
		}
		dir = parent
	}
}
