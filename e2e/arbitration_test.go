//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/e2e/lab"
)

// arbitrationTenants are the demo's tenants (config/demo/<ns>): each its own proxy
// (--watch-namespace=<ns>, own VIP) and an Ingress echo of class metalgate.
var arbitrationTenants = []string{"one", "two", "three"}

// TestArbitration is issue #17 in the lab: the demo's three tenants plus the stock
// cluster-wide proxy (config/proxy: its own LoadBalancer Service and VIP) on the same class
// metalgate. Every tenant Ingress must keep its own tenant's VIP — zero status changes over
// the watch, after a 30-second settle — and the cluster-wide proxy must report that it yields,
// once per Ingress (one StatusYielded event, whatever the back-off). Both install orders:
//   - cluster-wide first: it publishes its VIP until each tenant's proxy has one, then yields;
//   - cluster-wide second (re-installed): not a single change from its install on.
//
// The watch lasts E2E_ARBITRATION_WATCH (default 1m, so that make test stays reasonable; the
// issue's 5 minutes: E2E_ARBITRATION_WATCH=5m).
func TestArbitration(t *testing.T) {
	watchFor := time.Minute
	if v := os.Getenv("E2E_ARBITRATION_WATCH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("E2E_ARBITRATION_WATCH=%q: want a duration such as 5m", v)
		}
		watchFor = d
	}
	const settle = 30 * time.Second
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()
	kubectl := func(args ...string) string {
		t.Helper()
		kctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		out, err := l.Kubectl(kctx, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// What an earlier run (or the demo) left: the cluster-wide proxy and the tenants go, so
	// that the cluster-wide proxy really is first.
	kubectl("delete", "--ignore-not-found", "--wait=true", "-k", "../config/proxy")
	kubectl("delete", "--ignore-not-found", "--wait=true", "-k", "../config/demo/misinstalled-proxy")
	for _, ns := range arbitrationTenants {
		kubectl("delete", "--ignore-not-found", "--wait=true", "-k", "../config/demo/"+ns)
	}
	kubectl("apply", "-k", "../config/demo/pool")
	kubectl("apply", "-k", "../config/demo/l2")
	t.Cleanup(func() {
		if t.Failed() {
			return // left for inspection until lab-down
		}
		for _, dir := range []string{"../config/proxy", "../config/demo/one", "../config/demo/two", "../config/demo/three", "../config/demo/l2", "../config/demo/pool"} {
			if out, err := l.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=true", "--timeout=3m", "-k", dir); err != nil {
				t.Logf("delete %s: %v\n%s", dir, err, out)
			}
		}
	})

	installCluster := func() netip.Addr {
		t.Helper()
		kubectl("apply", "-k", "../config/proxy")
		waitDeploymentReady(t, cs, operatorNamespace, "metalgate-proxy", 4*time.Minute)
		vip := serviceVIP(t, labClient(t, l), operatorNamespace, "metalgate-proxy")
		eventually(t, time.Minute, "the cluster-wide proxy announces itself on its Service", func() error {
			svc, err := cs.CoreV1().Services(operatorNamespace).Get(ctx, "metalgate-proxy", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if svc.Annotations[contract.AnnotationProxyWatchNamespaces] != "*" || svc.Labels[contract.LabelProxy] != "true" {
				return fmt.Errorf("labels %v, annotations %v", svc.Labels, svc.Annotations)
			}
			return nil
		})
		return vip
	}
	tenantVIPs := map[string]string{}
	installTenants := func() {
		t.Helper()
		for _, ns := range arbitrationTenants {
			kubectl("apply", "-k", "../config/demo/"+ns)
		}
		for _, ns := range arbitrationTenants {
			waitDeploymentReady(t, cs, ns, "metalgate-proxy", 4*time.Minute)
			waitDeploymentReady(t, cs, ns, "echo", 4*time.Minute)
			tenantVIPs[ns] = serviceVIP(t, labClient(t, l), ns, "metalgate-proxy").String()
		}
	}
	// yielded waits until the cluster-wide proxy has reported, on every tenant Ingress, that
	// it yields to the tenant's proxy, and checks it did so once.
	yielded := func(since time.Time) {
		t.Helper()
		for _, ns := range arbitrationTenants {
			eventually(t, 2*time.Minute, "StatusYielded on "+ns+"/echo", func() error {
				n, msgs, err := proxyEvents(ctx, cs, ns, "echo", contract.ReasonYielded, since)
				if err != nil {
					return err
				}
				want := fmt.Sprintf("published by metalgate proxy %s/metalgate-proxy (%s), not by this proxy (%s/metalgate-proxy): %s/metalgate-proxy is namespace %s's own proxy",
					ns, tenantVIPs[ns], operatorNamespace, ns, ns)
				if n != 1 || !strings.Contains(strings.Join(msgs, "\n"), want) {
					return fmt.Errorf("%d StatusYielded event(s) %q, want one containing %q", n, msgs, want)
				}
				return nil
			})
		}
	}
	noConflicts := func(since time.Time) {
		t.Helper()
		for _, ns := range arbitrationTenants {
			for _, reason := range []string{contract.ReasonStatusConflict, contract.ReasonForeignWriter} {
				if n, msgs, err := proxyEvents(ctx, cs, ns, "echo", reason, since); err != nil || n != 0 {
					t.Errorf("Ingress %s/echo: %d %s event(s) %q (%v), want none", ns, n, reason, msgs, err)
				}
			}
		}
	}

	t.Run("cluster-wide first", func(t *testing.T) {
		start := time.Now()
		clusterVIP := installCluster()
		t.Logf("cluster-wide proxy: VIP %s", clusterVIP)
		installTenants()
		for _, ns := range arbitrationTenants {
			eventually(t, 2*time.Minute, "Ingress "+ns+"/echo gets its tenant's VIP", func() error {
				ing, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, "echo", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if got := ingressStatus(ing); got != tenantVIPs[ns] {
					return fmt.Errorf("status %q, want %s", got, tenantVIPs[ns])
				}
				return nil
			})
		}
		yielded(start)
		time.Sleep(settle) // the settle the issue asks for before the watch; the watch is the check
		rec := watchIngresses(ctx, t, cs, arbitrationTenants)
		time.Sleep(watchFor)
		rec.check(t, tenantVIPs, watchFor)
		yielded(start) // still one each
		noConflicts(start)
	})

	t.Run("cluster-wide second", func(t *testing.T) {
		kubectl("delete", "--wait=true", "-k", "../config/proxy")
		start := time.Now()
		// From before the install on: not a single change.
		rec := watchIngresses(ctx, t, cs, arbitrationTenants)
		clusterVIP := installCluster()
		t.Logf("cluster-wide proxy re-installed: VIP %s", clusterVIP)
		yielded(start)
		time.Sleep(settle + watchFor)
		rec.check(t, tenantVIPs, settle+watchFor)
		yielded(start)
		noConflicts(start)

		// kubectl metalgate check says who publishes and why the other yields.
		bin := filepath.Join(t.TempDir(), "kubectl-metalgate")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kubectl-metalgate").CombinedOutput(); err != nil {
			t.Fatalf("build the plugin: %v\n%s", err, out)
		}
		out, _ := exec.CommandContext(ctx, bin, "check", "--kubeconfig", l.KubeconfigPath()).CombinedOutput()
		for _, ns := range arbitrationTenants {
			want := fmt.Sprintf("warning: Ingress %s/echo: 2 metalgate proxies serve it: %s/metalgate-proxy publishes its status (%s); %s/metalgate-proxy yields: %s/metalgate-proxy is namespace %s's own proxy",
				ns, ns, tenantVIPs[ns], operatorNamespace, ns, ns)
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl metalgate check lacks %q:\n%s", want, out)
			}
		}
		t.Logf("kubectl metalgate check:\n%s", out)
	})
}

// proxyEvents counts the events of reason on Ingress ns/name last seen at or after since
// (events.k8s.io: a series counts its repeats) and returns their notes.
func proxyEvents(ctx context.Context, cs kubernetes.Interface, ns, name, reason string, since time.Time) (int, []string, error) {
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	n := 0
	var notes []string
	for _, e := range evs.Items {
		if e.Reason != reason || e.Regarding.Kind != "Ingress" || e.Regarding.Name != name {
			continue
		}
		last := e.EventTime.Time
		if e.Series != nil && e.Series.LastObservedTime.After(last) {
			last = e.Series.LastObservedTime.Time
		}
		if e.DeprecatedLastTimestamp.After(last) {
			last = e.DeprecatedLastTimestamp.Time
		}
		if last.Before(since.Add(-time.Second)) {
			continue
		}
		c := max(int(e.DeprecatedCount), 1)
		if e.Series != nil {
			c = max(c, int(e.Series.Count))
		}
		n += c
		notes = append(notes, e.Note)
	}
	return n, notes, nil
}

func ingressStatus(ing *networkingv1.Ingress) string {
	var out []string
	for _, in := range ing.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else {
			out = append(out, in.Hostname)
		}
	}
	return strings.Join(out, ",")
}

// ingressRecorder records every committed status value of Ingress echo in each namespace,
// from a watch (which sees a change even when it is reverted within a second) and a poll
// every second (as a user with kubectl would).
type ingressRecorder struct {
	mu     sync.Mutex
	values map[string][]string // namespace → distinct values, in order
	polls  map[string]int
}

func watchIngresses(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespaces []string) *ingressRecorder {
	t.Helper()
	r := &ingressRecorder{values: map[string][]string{}, polls: map[string]int{}}
	record := func(ns, v string, poll bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if vs := r.values[ns]; len(vs) == 0 || vs[len(vs)-1] != v {
			r.values[ns] = append(vs, v)
		}
		if poll {
			r.polls[ns]++
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Add(2)
		go func() { // the watch, from a read's resourceVersion; again after an error
			defer wg.Done()
			for wctx.Err() == nil {
				ing, err := cs.NetworkingV1().Ingresses(ns).Get(wctx, "echo", metav1.GetOptions{})
				if err != nil {
					sleepCtx(wctx, time.Second)
					continue
				}
				record(ns, ingressStatus(ing), false)
				w, err := cs.NetworkingV1().Ingresses(ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=echo", ResourceVersion: ing.ResourceVersion})
				if err != nil {
					sleepCtx(wctx, time.Second)
					continue
				}
				for ev := range w.ResultChan() {
					if ing, ok := ev.Object.(*networkingv1.Ingress); ok && ev.Type != watch.Deleted && ev.Type != watch.Bookmark {
						record(ns, ingressStatus(ing), false)
					} else if ev.Type == watch.Error {
						break
					}
				}
				w.Stop()
			}
		}()
		go func() { // the poll
			defer wg.Done()
			for wctx.Err() == nil {
				if ing, err := cs.NetworkingV1().Ingresses(ns).Get(wctx, "echo", metav1.GetOptions{}); err == nil {
					record(ns, ingressStatus(ing), true)
				}
				sleepCtx(wctx, time.Second)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	eventually(t, 30*time.Second, "the status watchers have read every Ingress", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, ns := range namespaces {
			if len(r.values[ns]) == 0 {
				return fmt.Errorf("nothing read from %s/echo yet", ns)
			}
		}
		return nil
	})
	return r
}

// check: every Ingress held exactly its tenant's VIP all along.
func (r *ingressRecorder) check(t *testing.T, want map[string]string, over time.Duration) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes := map[string]string{}
	for _, n := range lab.Nodes() {
		nodes[n.IPv4.String()] = n.Name
	}
	for ns, w := range want {
		vs := r.values[ns]
		if len(vs) != 1 || vs[0] != w {
			for i, v := range vs {
				if n, ok := nodes[v]; ok {
					vs[i] = v + " (node IP of " + n + ")"
				}
			}
			t.Errorf("Ingress %s/echo over %s: values %q (%d changes), want only %s", ns, over, vs, max(len(vs)-1, 0), w)
			continue
		}
		if least := int(over/time.Second) / 2; r.polls[ns] < least {
			t.Errorf("Ingress %s/echo: only %d polls over %s, too few to tell", ns, r.polls[ns], over)
		}
		t.Logf("Ingress %s/echo: one value %s over %s (%d polls and a watch)", ns, w, over, r.polls[ns])
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
