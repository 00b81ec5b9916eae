//go:build e2e && daytwo

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/internal/testenv"
)

// The day-2 install: release, namespaces, pools (inside lab.VIPPool, clear of every other
// test's), the router peering and the Ingress host the load goes to.
const (
	d2Release   = "metalgate"
	d2Namespace = "metalgate-system"
	d2AppNS     = "day2-app"
	d2L2Pool    = "day2-l2"
	d2L2CIDR    = "100.64.25.0/28"
	d2BGPPool   = "day2-bgp"
	d2BGPCIDR   = "100.64.25.16/28"
	d2Host      = "day2.example"
	// d2BGPService is a second LoadBalancer Service in front of the chart's proxy pods, with a
	// VIP from the BGP pool: the proxy is reached through a layer-2 VIP (the chart's own
	// Service, whose VIP the proxy writes into Ingress status) and a BGP VIP.
	d2BGPService = "metalgate-proxy-bgp"

	// d2Rate is the new connections a second, per VIP; d2Timeout bounds each request.
	d2Rate    = 20
	d2Timeout = 2 * time.Second
	// d2FailoverBound is the most a cut link may cost: the longest time without an answer, and
	// the window after the cut outside which no request may fail. The BGP peer's hold time
	// (3 s) is what the router needs to drop the cut node's paths; layer 2 fails over on
	// memberlist's failure detection, faster.
	d2FailoverBound = 3 * time.Second
)

// dayTwoFrom is the previous release, built by make daytwo-from.
type dayTwoFrom struct {
	chart, image, ref, commit string
}

func dayTwoFromEnv(t *testing.T) dayTwoFrom {
	t.Helper()
	f := dayTwoFrom{chart: os.Getenv("DAYTWO_FROM_CHART"), image: os.Getenv("DAYTWO_FROM_IMAGE"),
		ref: os.Getenv("DAYTWO_FROM_REF"), commit: os.Getenv("DAYTWO_FROM_COMMIT")}
	if f.chart == "" || f.image == "" || f.ref == "" {
		t.Fatal("DAYTWO_FROM_CHART, DAYTWO_FROM_IMAGE and DAYTWO_FROM_REF are not set: run make test-daytwo " +
			"(a throwaway lab) or make daytwo-run LAB_PREFIX=<your lab's> (the previous release built, then this test)")
	}
	for _, p := range []string{f.chart, f.image} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("previous release: %v (make daytwo-from builds it)", err)
		}
	}
	return f
}

// splitImageRef splits registry/repository:tag at the first slash and the last colon.
func splitImageRef(t *testing.T, ref string) (registry, repository, tag string) {
	t.Helper()
	i, j := strings.Index(ref, "/"), strings.LastIndex(ref, ":")
	if i < 0 || j < i {
		t.Fatalf("image reference %q is not registry/repository:tag", ref)
	}
	return ref[:i], ref[i+1 : j], ref[j+1:]
}

// d2Values are the Helm values of both releases, but for the image: two pools (one announced at
// layer 2, one by BGP to the lab router, with a 3 s hold time so a lost node's paths go within
// the failover bound and graceful restart so a restarting speaker's stay), the proxy as a
// DaemonSet (a proxy on every node, each replaced in place: with externalTrafficPolicy Local no
// node stops announcing the VIPs during a rollout, so the router's ECMP set never changes and
// no flow is rehashed to another node mid-connection), behind the layer-2 and the BGP VIP.
func d2Values(registry, repository, tag string) string {
	return fmt.Sprintf(`image:
  registry: %s
  repository: %s
  tag: %s
  pullPolicy: Never
pools:
  - name: %s
    spec: {addresses: [%s]}
    l2Advertisement: {}
  - name: %s
    spec: {addresses: [%s]}
    bgpAdvertisement: {}
bgpPeers:
  - name: day2-router
    spec: {myASN: %d, peerASN: %d, peerAddress: %s, holdTime: 3s, keepaliveTime: 1s, enableGracefulRestart: true}
proxy:
  kind: DaemonSet
  service:
    annotations: {metalgate.io/address-pool: %s}
`, registry, repository, tag, d2L2Pool, d2L2CIDR, d2BGPPool, d2BGPCIDR,
		lab.NodeASN, lab.RouterASN, lab.Router.IPv4, d2L2Pool)
}

// TestDayTwo installs the previous release (DAYTWO_FROM, a fixed earlier commit until there is a
// release tag) with helm install, puts a backend behind an Ingress of its proxy, and runs
// steady load from the client — d2Rate new connections a second through the proxy's layer-2 VIP
// and through its BGP VIP — while it, one phase after the other:
//   - does nothing (the baseline, on the previous release);
//   - upgrades the whole install with helm upgrade to this tree (CRDs applied first, as
//     docs/install.md says);
//   - rolls the proxy DaemonSet, the speaker DaemonSet, the controller Deployment;
//   - freezes the API server (SIGSTOP) for 30 s;
//   - takes the layer-2 VIP owner's link down for 20 s (its routes put back after link-up).
//
// The upgrade comes first, not last, so that every other phase measures this tree and not the
// pinned earlier commit; the upgrade itself measures both (the old pods drain as the old release
// drains). It asserts no failed request in any phase but the link loss, there at most
// d2FailoverBound without an answer and failures only that long after the cut, and that no
// Service or Ingress address changes at any time (every change seen by a watch counts). It
// prints a table per phase and then RESULT day2_failed_requests=… day2_max_gap_ms=…
// day2_assignments_changed=….
func TestDayTwo(t *testing.T) {
	from := dayTwoFromEnv(t)
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run make test-daytwo (the Makefile exports its pinned helm)")
	}
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()
	d := &dayTwo{t: t, l: l, cs: cs, helm: helm, dir: t.TempDir()}
	d.cleanup(ctx) // a failed run's leftovers on a developer's lab
	t.Cleanup(func() {
		if !t.Failed() {
			d.cleanup(context.Background())
		}
	})

	// The previous release.
	if err := l.ImportImage(ctx, from.image); err != nil {
		t.Fatal(err)
	}
	reg, repo, tag := splitImageRef(t, from.ref)
	oldValues := d.writeValues("from", d2Values(reg, repo, tag))
	reg, repo, tag = splitImageRef(t, lab.MetalgateImage.Ref)
	newValues := d.writeValues("tree", d2Values(reg, repo, tag))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d2Namespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", d2Namespace, err)
	}
	t.Logf("helm install %s (commit %s, image %s)", from.chart, from.commit, from.ref)
	d.helmRun(ctx, "install", d2Release, from.chart, "-n", d2Namespace, "-f", oldValues, "--wait", "--timeout", "5m")
	d.waitInstall(from.ref)

	// The backend, its Ingress, the BGP VIP's Service, the client's route to the layer-2 pool.
	vipL2, vipBGP := d.deployApp(ctx)
	t.Logf("layer-2 VIP %s, BGP VIP %s", vipL2, vipBGP)
	targets := []*d2Target{{name: "l2", vip: vipL2}, {name: "bgp", vip: vipBGP}}
	for _, tg := range targets {
		tg.client = d2HTTPClient(l)
		eventually(t, 90*time.Second, "the "+tg.name+" VIP "+tg.vip.String()+" answers 10 requests in a row", func() error {
			for range 10 {
				if err := tg.get(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}

	watcher := d.watchAddresses(ctx)
	load := startLoad(targets)
	var phases []*d2Phase
	phase := func(name string, linkLoss bool, run func(p *d2Phase)) {
		before := d.restartCounts(ctx)
		p := &d2Phase{name: name, start: time.Now(), linkLoss: linkLoss}
		t.Logf("phase %s: start at %s", name, p.start.Format("15:04:05.000"))
		run(p)
		p.end = time.Now()
		p.restarts = restartsSince(before, d.restartCounts(ctx))
		t.Logf("phase %s: done in %s", name, p.end.Sub(p.start).Round(time.Millisecond))
		phases = append(phases, p)
	}
	func() {
		// SIGCONT whatever happens in a phase: a frozen API server fails every later test.
		defer d.thawAPIServer()
		defer load.stop()
		phase("baseline (previous release)", false, func(*d2Phase) { d.hold(10 * time.Second) })
		phase("helm upgrade to this tree", false, func(*d2Phase) {
			// docs/install.md: Helm does not upgrade crds/; apply the new release's first.
			if out, err := l.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", "../charts/metalgate/crds/"); err != nil {
				t.Fatalf("apply this tree's CRDs: %v\n%s", err, out)
			}
			d.helmRun(ctx, "upgrade", d2Release, "../charts/metalgate", "-n", d2Namespace, "-f", newValues, "--wait", "--timeout", "5m")
			d.waitInstall(lab.MetalgateImage.Ref)
			d.hold(10 * time.Second)
		})
		phase("proxy rollout", false, func(*d2Phase) { d.rollout(ctx, "daemonset/"+d2Release+"-proxy", "proxy") })
		phase("speaker rollout", false, func(*d2Phase) { d.rollout(ctx, "daemonset/"+d2Release+"-speaker", "speaker") })
		phase("controller rollout", false, func(*d2Phase) { d.rollout(ctx, "deployment/"+d2Release+"-controller", "controller") })
		phase("API server frozen 30s", false, func(*d2Phase) {
			d.freezeAPIServer()
			d.hold(30 * time.Second)
			d.thawAPIServer()
			d.waitSettled(ctx)
			d.hold(20 * time.Second) // leases expire and are taken again after the thaw
		})
		phase("VIP owner's link down 20s", true, func(p *d2Phase) {
			owner := d.l2Owner(ctx, vipL2)
			p.note = "cut " + owner
			t.Logf("the layer-2 VIP %s is on %s: cutting its link", vipL2, owner)
			p.cut = time.Now()
			if err := l.CutLink(ctx, owner); err != nil {
				t.Fatal(err)
			}
			d.hold(20 * time.Second)
			if err := l.RestoreLink(ctx, owner); err != nil {
				t.Fatal(err)
			}
			// As a CNI would: the kernel dropped the node's routes with its carrier.
			if err := l.RestoreNodeRoutes(ctx, owner); err != nil {
				t.Fatal(err)
			}
			p.restored = time.Now()
			d.waitSettled(ctx)
			d.hold(10 * time.Second)
		})
	}()
	changes := watcher.stop()
	d.checkFinalAddresses(ctx, watcher)

	// Attribute every request to the phase it started in and judge it.
	probes := load.results()
	failed, maxGap := 0, time.Duration(0)
	var rows []string
	rows = append(rows, fmt.Sprintf("%-30s %8s %9s %7s %11s  %-22s %s", "phase", "length", "requests", "failed", "max gap ms", "restarts", "failures"))
	for _, p := range phases {
		st := p.judge(probes, targets)
		failed += st.failed
		maxGap = max(maxGap, st.maxGap)
		rows = append(rows, fmt.Sprintf("%-30s %8s %9d %7d %11d  %-22s %s", p.name, p.end.Sub(p.start).Round(100*time.Millisecond),
			st.requests, st.failed, st.maxGap.Milliseconds(), p.restartSummary(), st.summary()))
		// The proxy is a data plane: it never exits for an API outage or a lost Lease.
		if n := p.restarts["proxy"]; n > 0 {
			t.Errorf("phase %s: proxy containers restarted %d times", p.name, n)
		}
		for _, f := range st.details {
			t.Logf("phase %s: failed: %s", p.name, f)
		}
		for _, problem := range st.problems {
			t.Errorf("phase %s: %s", p.name, problem)
		}
	}
	for _, c := range changes {
		t.Errorf("address changed: %s", c)
	}
	table := strings.Join(rows, "\n")
	result := fmt.Sprintf("RESULT day2_failed_requests=%d day2_max_gap_ms=%d day2_assignments_changed=%d", failed, maxGap.Milliseconds(), len(changes))
	t.Logf("day 2 under %d new connections/s per VIP (%s, %s):\n%s", d2Rate, vipL2, vipBGP, table)
	fmt.Println(table)
	fmt.Println(result)
}

// dayTwo holds the test's lab handles.
type dayTwo struct {
	t    *testing.T
	l    *lab.Lab
	cs   *kubernetes.Clientset
	helm string
	dir  string

	frozenMu sync.Mutex
	frozen   int // the API server's pid while stopped
}

func (d *dayTwo) writeValues(name, content string) string {
	p := filepath.Join(d.dir, name+"-values.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
	return p
}

func (d *dayTwo) helmRun(ctx context.Context, args ...string) string {
	d.t.Helper()
	out, err := d.helmOut(ctx, args...)
	if err != nil {
		d.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (d *dayTwo) helmOut(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.helm, append(args, "--kubeconfig", d.l.KubeconfigPath())...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hold waits a fixed time on purpose: a phase's length under load, not a synchronisation.
func (d *dayTwo) hold(dur time.Duration) { time.Sleep(dur) }

// waitInstall waits until the controller, every speaker and every proxy run image ref,
// updated and ready, with no old pod left terminating.
func (d *dayTwo) waitInstall(ref string) {
	d.t.Helper()
	for _, c := range []string{"controller", "speaker", "proxy"} {
		d.waitComponent(c, ref, 5*time.Minute)
	}
}

// waitComponent waits until every pod of a component runs ref and is ready, the workload is
// fully updated and no pod of it is terminating (a proxy drains for seconds after its
// replacement is ready: its drain belongs to the phase that caused it).
func (d *dayTwo) waitComponent(component, ref string, timeout time.Duration) {
	d.t.Helper()
	ctx := context.Background()
	eventually(d.t, timeout, component+" rolled out on "+ref, func() error {
		var want int32
		name := d2Release + "-" + component
		if component == "speaker" || component == "proxy" {
			ds, err := d.cs.AppsV1().DaemonSets(d2Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ds.Status.ObservedGeneration < ds.Generation || ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled ||
				ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
				return fmt.Errorf("daemonset %s: %d desired, %d updated, %d ready", name, ds.Status.DesiredNumberScheduled,
					ds.Status.UpdatedNumberScheduled, ds.Status.NumberReady)
			}
			want = ds.Status.DesiredNumberScheduled
		} else {
			dep, err := d.cs.AppsV1().Deployments(d2Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := deploymentRolledOut(dep); err != nil {
				return err
			}
			want = *dep.Spec.Replicas
		}
		pods, err := d.cs.CoreV1().Pods(d2Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + d2Release + ",app.kubernetes.io/component=" + component})
		if err != nil {
			return err
		}
		if int32(len(pods.Items)) != want {
			return fmt.Errorf("%s: %d pods (some terminating?), want %d", component, len(pods.Items), want)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s terminating", p.Name)
			}
			if p.Spec.Containers[0].Image != ref {
				return fmt.Errorf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
			if !podReady(&p) {
				return fmt.Errorf("pod %s not ready", p.Name)
			}
		}
		return nil
	})
}

func deploymentRolledOut(dep *appsv1.Deployment) error {
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if dep.Status.ObservedGeneration < dep.Generation || dep.Status.UpdatedReplicas != want ||
		dep.Status.ReadyReplicas != want || dep.Status.Replicas != want {
		return fmt.Errorf("deployment %s: %d/%d ready, %d updated, %d total", dep.Name, dep.Status.ReadyReplicas, want,
			dep.Status.UpdatedReplicas, dep.Status.Replicas)
	}
	return nil
}

// rollout restarts a workload, waits for it and for its old pods to be gone, then holds 5 s.
func (d *dayTwo) rollout(ctx context.Context, workload, component string) {
	d.t.Helper()
	if out, err := d.l.Kubectl(ctx, "-n", d2Namespace, "rollout", "restart", workload); err != nil {
		d.t.Fatalf("rollout restart %s: %v\n%s", workload, err, out)
	}
	if out, err := d.l.Kubectl(ctx, "-n", d2Namespace, "rollout", "status", workload, "--timeout=5m"); err != nil {
		d.t.Fatalf("rollout status %s: %v\n%s", workload, err, out)
	}
	d.waitComponent(component, lab.MetalgateImage.Ref, 3*time.Minute)
	d.hold(5 * time.Second)
}

// waitSettled waits until the API server answers, every node is Ready and the install is whole
// again (after a freeze or a cut link).
func (d *dayTwo) waitSettled(ctx context.Context) {
	d.t.Helper()
	eventually(d.t, 3*time.Minute, "every node Ready", func() error {
		nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
					return fmt.Errorf("node %s: Ready %s (%s)", n.Name, c.Status, c.Reason)
				}
			}
		}
		return nil
	})
	d.waitInstall(lab.MetalgateImage.Ref)
	eventually(d.t, 2*time.Minute, "the router's BGP sessions with every node Established", func() error {
		peers, err := d.l.RouterPeers(ctx)
		if err != nil {
			return err
		}
		up := 0
		for _, p := range peers {
			if p.State == "Established" {
				up++
			}
		}
		if up < lab.NodeCount {
			return fmt.Errorf("%d of %d sessions Established: %+v", up, lab.NodeCount, peers)
		}
		return nil
	})
}

func (d *dayTwo) freezeAPIServer() {
	d.t.Helper()
	pid, err := d.l.APIServerPID()
	if err != nil {
		d.t.Fatal(err)
	}
	d.frozenMu.Lock()
	defer d.frozenMu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		d.t.Fatalf("SIGSTOP kube-apiserver (pid %d): %v", pid, err)
	}
	d.frozen = pid
}

func (d *dayTwo) thawAPIServer() {
	d.frozenMu.Lock()
	defer d.frozenMu.Unlock()
	if d.frozen == 0 {
		return
	}
	if err := syscall.Kill(d.frozen, syscall.SIGCONT); err != nil {
		d.t.Errorf("SIGCONT kube-apiserver (pid %d): %v", d.frozen, err)
	}
	d.frozen = 0
}

// l2Owner returns the node that answers ARP for the layer-2 VIP: the client's neighbour entry
// for it (its traffic keeps the entry fresh) names the node's fixed MAC.
func (d *dayTwo) l2Owner(ctx context.Context, vip netip.Addr) string {
	d.t.Helper()
	var owner string
	eventually(d.t, 30*time.Second, "the client's neighbour entry for "+vip.String(), func() error {
		out, err := d.l.Exec(ctx, "client", "ip", "neigh", "show", vip.String(), "dev", "eth0")
		if err != nil {
			return err
		}
		for _, n := range lab.Nodes() {
			if strings.Contains(out, "lladdr "+n.MAC+" ") && !strings.Contains(out, "FAILED") {
				owner = n.Name
				return nil
			}
		}
		return fmt.Errorf("no node's MAC in %q", strings.TrimSpace(out))
	})
	return owner
}

// deployApp deploys the echo backend (three replicas, one a node) behind an Ingress of the
// proxy, the BGP VIP's Service, and the client's on-link route to the layer-2 pool; it returns
// both VIPs once the Ingress's status names the layer-2 one.
func (d *dayTwo) deployApp(ctx context.Context) (vipL2, vipBGP netip.Addr) {
	t := d.t
	t.Helper()
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d2AppNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", d2AppNS, err)
	}
	eventually(t, 30*time.Second, "default ServiceAccount of "+d2AppNS, func() error {
		_, err := d.cs.CoreV1().ServiceAccounts(d2AppNS).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	labels := map[string]string{"app": "echo"}
	three := int32(3)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: d2AppNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &three,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{echoContainer(8080)},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
				},
			},
		},
	}
	if _, err := d.cs.AppsV1().Deployments(d2AppNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the echo Deployment: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: d2AppNS},
		Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := d.cs.CoreV1().Services(d2AppNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the echo Service: %v", err)
	}
	class := "metalgate"
	rule := ingressRule(d2Host, "/", "echo")
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: d2AppNS, Annotations: map[string]string{
			// A backend on a cut node is given up on fast and the request retried on another.
			"metalgate.io/proxy-connect-timeout": "500ms",
		}},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{rule}},
	}
	if _, err := d.cs.NetworkingV1().Ingresses(d2AppNS).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Ingress: %v", err)
	}
	local := corev1.ServiceExternalTrafficPolicyLocal
	bgp := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: d2BGPService, Namespace: d2Namespace,
			Annotations: map[string]string{"metalgate.io/address-pool": d2BGPPool}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: local,
			Selector: map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/instance": d2Release,
				"app.kubernetes.io/component": "proxy"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := d.cs.CoreV1().Services(d2Namespace).Create(ctx, bgp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service %s: %v", d2BGPService, err)
	}
	if _, err := d.l.Exec(ctx, "client", "ip", "route", "replace", d2L2CIDR, "dev", "eth0"); err != nil {
		t.Fatalf("the client's route to the layer-2 pool: %v", err)
	}
	waitDeploymentReady(t, d.cs, d2AppNS, "echo", 2*time.Minute)
	vipL2 = d.serviceVIP(ctx, d2Namespace, d2Release+"-proxy", d2L2CIDR)
	vipBGP = d.serviceVIP(ctx, d2Namespace, d2BGPService, d2BGPCIDR)
	eventually(t, 60*time.Second, "the Ingress's status names "+vipL2.String(), func() error {
		ing, err := d.cs.NetworkingV1().Ingresses(d2AppNS).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ingressIPs(ing); got != vipL2.String() {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
	return vipL2, vipBGP
}

func (d *dayTwo) serviceVIP(ctx context.Context, ns, name, cidr string) netip.Addr {
	d.t.Helper()
	var vip netip.Addr
	eventually(d.t, 60*time.Second, "Service "+ns+"/"+name+" gets an address in "+cidr, func() error {
		svc, err := d.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return errors.New("no address yet")
		}
		vip, err = netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
		if err != nil {
			return err
		}
		if !netip.MustParsePrefix(cidr).Contains(vip) {
			return fmt.Errorf("address %s is outside %s", vip, cidr)
		}
		return nil
	})
	return vip
}

// cleanup removes what the test installed: the release, its namespaces, the kept pools, the
// client's route, and metalgate's CRDs (with every metalgate object in the lab): helm install
// of the previous release fails on CRDs this tree's kubectl apply --server-side left (a field
// conflict with kubectl over .spec.versions), so a second run on the same lab needs them gone.
// It logs and goes on.
func (d *dayTwo) cleanup(ctx context.Context) {
	defer func() {
		if out, err := d.l.Kubectl(ctx, "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-f", "../charts/metalgate/crds/"); err != nil {
			d.t.Logf("delete metalgate's CRDs: %v\n%s", err, out)
		}
	}()
	if out, err := d.helmOut(ctx, "uninstall", d2Release, "-n", d2Namespace, "--ignore-not-found", "--wait", "--timeout", "3m"); err != nil {
		d.t.Logf("helm uninstall: %v\n%s", err, out)
	}
	for _, ns := range []string{d2AppNS, d2Namespace} {
		err := d.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			d.t.Logf("delete namespace %s: %v", ns, err)
		}
	}
	if _, err := d.l.Exec(ctx, "client", "ip", "route", "del", d2L2CIDR); err != nil && !strings.Contains(err.Error(), "No such process") {
		d.t.Logf("remove the client's route: %v", err)
	}
	err := testenv.PollEvery(time.Second, 2*time.Minute, func() error {
		for _, ns := range []string{d2AppNS, d2Namespace} {
			if _, err := d.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", ns, err)
			}
		}
		return nil
	})
	if err != nil {
		d.t.Logf("cleanup: %v", err)
	}
}

// ---- addresses ---------------------------------------------------------------------------

// addressWatch records every change of a LoadBalancer Service's or an Ingress's addresses, in
// the release's and the app's namespace, from the moment it starts.
type addressWatch struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	baseline map[string]string
	last     map[string]string
	changes  []string
	errs     []string
}

func ingressIPs(ing *networkingv1.Ingress) string {
	var ips []string
	for _, i := range ing.Status.LoadBalancer.Ingress {
		ips = append(ips, i.IP+i.Hostname)
	}
	sort.Strings(ips)
	return strings.Join(ips, ",")
}

func serviceIPs(svc *corev1.Service) string {
	var ips []string
	for _, i := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, i.IP+i.Hostname)
	}
	sort.Strings(ips)
	return strings.Join(ips, ",")
}

func (d *dayTwo) addressSnapshot(ctx context.Context) (map[string]string, error) {
	snap := map[string]string{}
	for _, ns := range []string{d2Namespace, d2AppNS} {
		svcs, err := d.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range svcs.Items {
			if svcs.Items[i].Spec.Type == corev1.ServiceTypeLoadBalancer {
				snap["Service "+ns+"/"+svcs.Items[i].Name] = serviceIPs(&svcs.Items[i])
			}
		}
	}
	ings, err := d.cs.NetworkingV1().Ingresses(d2AppNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range ings.Items {
		snap["Ingress "+d2AppNS+"/"+ings.Items[i].Name] = ingressIPs(&ings.Items[i])
	}
	return snap, nil
}

type watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

func (f watchFunc) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, opts)
}

func (d *dayTwo) watchAddresses(ctx context.Context) *addressWatch {
	d.t.Helper()
	snap, err := d.addressSnapshot(ctx)
	if err != nil {
		d.t.Fatalf("addresses at the start: %v", err)
	}
	w := &addressWatch{baseline: snap, last: map[string]string{}}
	for k, v := range snap {
		w.last[k] = v
	}
	keys := make([]string, 0, len(snap))
	for k, v := range snap {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	d.t.Logf("addresses at the start: %s", strings.Join(keys, " "))
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	type source struct {
		kind, ns string
		rv       string
		watch    watchFunc
	}
	var sources []source
	for _, ns := range []string{d2Namespace, d2AppNS} {
		l, err := d.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			d.t.Fatal(err)
		}
		sources = append(sources, source{"Service", ns, l.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return d.cs.CoreV1().Services(ns).Watch(ctx, o)
		}})
	}
	il, err := d.cs.NetworkingV1().Ingresses(d2AppNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	sources = append(sources, source{"Ingress", d2AppNS, il.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return d.cs.NetworkingV1().Ingresses(d2AppNS).Watch(ctx, o)
	}})
	for _, s := range sources {
		rw, err := watchtools.NewRetryWatcherWithContext(wctx, s.rv, s.watch)
		if err != nil {
			d.t.Fatalf("watch %ss in %s: %v", s.kind, s.ns, err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer rw.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case ev, ok := <-rw.ResultChan():
					if !ok {
						w.mu.Lock()
						w.errs = append(w.errs, fmt.Sprintf("the watch of %ss in %s ended early", s.kind, s.ns))
						w.mu.Unlock()
						return
					}
					w.observe(ev)
				}
			}
		}()
	}
	return w
}

func (w *addressWatch) observe(ev watch.Event) {
	var key, ips string
	switch o := ev.Object.(type) {
	case *corev1.Service:
		if o.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return
		}
		key, ips = "Service "+o.Namespace+"/"+o.Name, serviceIPs(o)
	case *networkingv1.Ingress:
		key, ips = "Ingress "+o.Namespace+"/"+o.Name, ingressIPs(o)
	default:
		if ev.Type == watch.Error {
			w.mu.Lock()
			w.errs = append(w.errs, fmt.Sprintf("watch error: %v", ev.Object))
			w.mu.Unlock()
		}
		return
	}
	if ev.Type == watch.Deleted {
		ips = "(deleted)"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.last[key]; ok && prev != ips {
		w.changes = append(w.changes, fmt.Sprintf("%s %s: %q -> %q", time.Now().Format("15:04:05.000"), key, prev, ips))
	}
	w.last[key] = ips
}

// stop ends the watches and returns every change seen.
func (w *addressWatch) stop() []string {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.changes...)
}

// checkFinalAddresses compares the addresses at the end with those at the start, so a change
// the watches missed (none should) still fails the test.
func (d *dayTwo) checkFinalAddresses(ctx context.Context, w *addressWatch) {
	d.t.Helper()
	snap, err := d.addressSnapshot(ctx)
	if err != nil {
		d.t.Errorf("addresses at the end: %v", err)
		return
	}
	for k, v := range w.baseline {
		if snap[k] != v {
			d.t.Errorf("%s: %q at the start, %q at the end", k, v, snap[k])
		}
	}
	for _, e := range w.errs {
		d.t.Errorf("address watch: %s", e)
	}
}

// ---- load --------------------------------------------------------------------------------

// d2Target is one VIP the load goes to.
type d2Target struct {
	name   string
	vip    netip.Addr
	client *http.Client
}

// d2HTTPClient opens a new connection from the lab client's namespace for every request.
func d2HTTPClient(l *lab.Lab) *http.Client {
	ns := clientNetns(l)
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialInNetns(ctx, ns, network, addr)
			},
			DisableKeepAlives: true,
		},
		Timeout: d2Timeout,
	}
}

// get sends one request through the target's VIP to the Ingress host and wants the echo
// backend's 200.
func (tg *d2Target) get(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d2Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+tg.vip.String()+"/day2", nil)
	if err != nil {
		return err
	}
	req.Host = d2Host
	resp, err := tg.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	var reply struct{ Pod string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &reply) != nil || !strings.HasPrefix(reply.Pod, "echo-") {
		return fmt.Errorf("status %d: %.80s", resp.StatusCode, body)
	}
	return nil
}

// d2Probe is one request of the load.
type d2Probe struct {
	target     string
	start, end time.Time
	err        error
}

type d2Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	probes []d2Probe
}

// startLoad sends d2Rate requests a second to each target, each on a new connection, each
// started on its tick whatever the ones before are doing.
func startLoad(targets []*d2Target) *d2Load {
	ctx, cancel := context.WithCancel(context.Background())
	ld := &d2Load{cancel: cancel}
	for _, tg := range targets {
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			tick := time.NewTicker(time.Second / d2Rate)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				ld.wg.Add(1)
				go func() {
					defer ld.wg.Done()
					start := time.Now()
					err := tg.get(context.Background())
					ld.mu.Lock()
					ld.probes = append(ld.probes, d2Probe{target: tg.name, start: start, end: time.Now(), err: err})
					ld.mu.Unlock()
				}()
			}
		}()
	}
	return ld
}

// stop ends the load and waits for the requests in flight.
func (ld *d2Load) stop() {
	ld.cancel()
	ld.wg.Wait()
}

func (ld *d2Load) results() []d2Probe {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	out := append([]d2Probe(nil), ld.probes...)
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// ---- phases ------------------------------------------------------------------------------

type d2Phase struct {
	name       string
	start, end time.Time
	note       string
	// linkLoss phases may fail requests within d2FailoverBound of cut.
	linkLoss      bool
	cut, restored time.Time
	// restarts counts container restarts of the release's pods during the phase, by component.
	restarts map[string]int32
}

func (p *d2Phase) restartSummary() string {
	var parts []string
	for _, c := range []string{"controller", "speaker", "proxy"} {
		if n := p.restarts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// restartCounts maps each pod of the release (component/name) to its containers' restarts; nil
// when the API server does not answer.
func (d *dayTwo) restartCounts(ctx context.Context) map[string]int32 {
	var pods *corev1.PodList
	err := testenv.PollEvery(time.Second, time.Minute, func() error {
		var err error
		pods, err = d.cs.CoreV1().Pods(d2Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + d2Release})
		return err
	})
	if err != nil {
		d.t.Logf("restart counts: %v", err)
		return nil
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			out[p.Labels["app.kubernetes.io/component"]+"/"+p.Name] += c.RestartCount
		}
	}
	return out
}

// restartsSince sums, per component, the restarts of each pod since before (a pod new since then:
// all of its restarts).
func restartsSince(before, after map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			out[strings.SplitN(k, "/", 2)[0]] += d
		}
	}
	return out
}

type d2Stats struct {
	requests, failed int
	maxGap           time.Duration
	errs             map[string]int
	problems         []string
	note             string
	// details are the first failures: wall-clock start, target, error (to match the logs).
	details []string
}

// judge counts the requests that started in the phase and finds the longest time, per target,
// between two successful requests (the second started in the phase).
func (p *d2Phase) judge(probes []d2Probe, targets []*d2Target) d2Stats {
	st := d2Stats{errs: map[string]int{}, note: p.note}
	in := func(ts time.Time) bool { return !ts.Before(p.start) && ts.Before(p.end) }
	for _, tg := range targets {
		var lastOK time.Time
		gap, failed := time.Duration(0), 0
		var firstFail, lastFail time.Time
		for _, pr := range probes {
			if pr.target != tg.name {
				continue
			}
			if pr.err == nil {
				if in(pr.start) && !lastOK.IsZero() {
					gap = max(gap, pr.start.Sub(lastOK))
				}
				lastOK = pr.start
				continue
			}
			if !in(pr.start) {
				continue
			}
			failed++
			st.errs[tg.name+": "+classify(pr.err)]++
			if len(st.details) < 20 {
				st.details = append(st.details, fmt.Sprintf("%s %s after %s: %v", pr.start.Format("15:04:05.000"), tg.name,
					pr.end.Sub(pr.start).Round(time.Millisecond), pr.err))
			}
			if firstFail.IsZero() {
				firstFail = pr.start
			}
			lastFail = pr.start
			if p.linkLoss && (pr.start.Before(p.cut.Add(-d2Timeout)) || pr.start.After(p.cut.Add(d2FailoverBound))) {
				st.problems = append(st.problems, fmt.Sprintf("%s: a request started %s after the cut failed, outside the failover window of %s: %v",
					tg.name, pr.start.Sub(p.cut).Round(time.Millisecond), d2FailoverBound, pr.err))
			}
		}
		for _, pr := range probes {
			if pr.target == tg.name && in(pr.start) {
				st.requests++
			}
		}
		st.failed += failed
		st.maxGap = max(st.maxGap, gap)
		if failed > 0 {
			st.note = strings.TrimSpace(st.note + fmt.Sprintf(" %s failed %s..%s after the phase began", tg.name,
				firstFail.Sub(p.start).Round(100*time.Millisecond), lastFail.Sub(p.start).Round(100*time.Millisecond)))
		}
		switch {
		case !p.linkLoss && failed > 0:
			st.problems = append(st.problems, fmt.Sprintf("%s: %d failed requests (want 0), %s without an answer", tg.name, failed, gap.Round(time.Millisecond)))
		case p.linkLoss && gap > d2FailoverBound:
			st.problems = append(st.problems, fmt.Sprintf("%s: %s without an answer (at most %s)", tg.name, gap.Round(time.Millisecond), d2FailoverBound))
		}
	}
	// More than a handful of lines about the same window says nothing new.
	if len(st.problems) > 6 {
		n := len(st.problems)
		st.problems = append(st.problems[:5], fmt.Sprintf("… and %d more", n-5))
	}
	return st
}

func (st d2Stats) summary() string {
	keys := make([]string, 0, len(st.errs))
	for k := range st.errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", st.errs[k], k))
	}
	if st.note != "" {
		parts = append(parts, "("+st.note+")")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// classify names a request's failure in a few words: refused, reset, timeout, or the status.
func classify(err error) string {
	s := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(s, "Client.Timeout"), strings.Contains(s, "i/o timeout"):
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed without an answer"
	case strings.HasPrefix(s, "status "):
		if i := strings.Index(s, ":"); i > 0 {
			return s[:i]
		}
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}
