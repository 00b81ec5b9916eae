package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// hostSysctls are the host-global sysctls kubelet rewrites (it assumes it owns the machine);
// Up saves them and Down restores them.
var hostSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// requiredCommands must be in PATH (Debian packages, see Packages).
var requiredCommands = []string{"ip", "nsenter", "etcd", "containerd", "containerd-shim-runc-v2", "runc", "ctr",
	"vtysh", "iptables", "nft", "conntrack", "tcpdump", "arping", "ndisc6", "curl"}

// lock takes the lab's exclusive lock (one up/down/load at a time per prefix).
func (c Config) lock() (func(), error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("lab dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock: %w", err)
	}
	return func() { f.Close() }, nil
}

func (c Config) preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root (namespaces, cgroups, mounts)")
	}
	var missing []string
	for _, cmd := range requiredCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, cmd)
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/usr/lib/frr/bgpd"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		if _, err := os.Stat(filepath.Join(c.KubeBin, b)); err != nil {
			missing = append(missing, filepath.Join(c.KubeBin, b))
		}
	}
	for _, img := range Images {
		if _, err := os.Stat(filepath.Join(c.ImageDir, img.File)); err != nil {
			missing = append(missing, filepath.Join(c.ImageDir, img.File))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing (run make lab-up, which installs and builds them): %s", strings.Join(missing, ", "))
	}
	if err := c.checkViewable(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		return errors.New("the lab expects cgroup v1 hierarchies under /sys/fs/cgroup (kubelet 1.35 + containerd 1.6)")
	}
	return nil
}

// allDaemons lists every daemon of the lab in start order.
func (c Config) allDaemons() []daemon {
	ds := c.controlPlaneDaemons()
	for _, n := range Nodes() {
		for _, comp := range Components {
			ds = append(ds, c.nodeDaemon(n, comp))
		}
	}
	for _, name := range frrDaemons {
		ds = append(ds, c.frrDaemon(name))
	}
	return ds
}

// progress prints one line of progress with the time since start.
type progress struct {
	out   io.Writer
	start time.Time
}

func (p progress) step(format string, args ...any) {
	fmt.Fprintf(p.out, ">> [%5.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Up brings the lab up. When it already runs and is healthy, Up only imports images that
// changed (restarting the pods that use them) and returns. Otherwise it removes whatever is
// left of a previous lab with the same prefix and builds a new one.
func Up(ctx context.Context, c Config, out io.Writer) error {
	p := progress{out: out, start: time.Now()}
	if err := c.preflight(); err != nil {
		return err
	}
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()

	if err := c.healthy(ctx); err == nil {
		p.step("lab %q is already up and healthy", c.Prefix)
		if err := c.load(ctx, p); err != nil {
			return err
		}
		c.printUsage(out)
		return nil
	} else if c.anythingLeft() {
		p.step("lab %q is not healthy (%v): rebuilding it", c.Prefix, err)
		if err := c.down(ctx, p); err != nil {
			return err
		}
	}

	if err := c.build(ctx, p); err != nil {
		return err
	}
	p.step("lab %q is up", c.Prefix)
	c.printUsage(out)
	return nil
}

// build builds the lab where none is: directories and PKI, network, control plane, nodes and
// router; it returns when the nodes are Ready, with the lab's state written.
func (c Config) build(ctx context.Context, p progress) error {
	if err := c.saveSysctls(); err != nil {
		return err
	}
	_ = os.RemoveAll(c.logDir())
	for _, d := range []string{c.Dir, c.logDir(), c.runDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("lab dir: %w", err)
		}
	}
	if err := c.writePKI(); err != nil {
		return err
	}
	p.step("network: namespaces %snet, %scp, %srouter, %sn1..n3, %sclient; user link %s", c.Prefix, c.Prefix, c.Prefix, c.Prefix, c.Prefix, c.userLink())
	if err := c.netUp(ctx); err != nil {
		return err
	}
	cs, err := c.controlPlaneUp(ctx, p)
	if err != nil {
		return err
	}
	p.step("nodes: own mount namespaces (views of /var/lib, /var/log), containerd, image import, kubelet, kube-proxy (n3: nftables mode)")
	if err := c.prepareMountNSDir(); err != nil {
		return err
	}
	if err := c.forNodes(func(n Node) error { return c.startNode(ctx, n) }); err != nil {
		return err
	}
	p.step("router: FRR zebra, bfdd, bgpd (AS %d, listening for AS %d on %s and %s)", RouterASN, NodeASN, SegmentV4, SegmentV6)
	if err := c.startRouter(ctx); err != nil {
		return err
	}
	p.step("waiting for %d nodes Ready", NodeCount)
	if err := c.waitNodesReady(ctx, cs, 2*time.Minute); err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, "ServiceAccount default/default", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	return c.writeState()
}

// controlPlaneUp starts etcd and kube-apiserver, waits until the API server is ready, then
// starts kube-controller-manager and kube-scheduler. It returns a client of the API server.
func (c Config) controlPlaneUp(ctx context.Context, p progress) (*kubernetes.Clientset, error) {
	p.step("control plane: etcd, kube-apiserver")
	cp := c.controlPlaneDaemons()
	for _, d := range cp[:2] {
		if err := c.start(ctx, d); err != nil {
			return nil, err
		}
	}
	cs, err := c.clientset()
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 90*time.Second, "kube-apiserver /readyz", func() error {
		if c.exited(cp[1]) {
			return stopWaiting{fmt.Errorf("kube-apiserver exited:\n%s", c.daemonReport(cp[1], "exited"))}
		}
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	p.step("control plane: kube-controller-manager, kube-scheduler")
	for _, d := range cp[2:] {
		if err := c.start(ctx, d); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// forNodes runs f for every node concurrently and joins the errors.
func (c Config) forNodes(f func(Node) error) error {
	nodes := Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitNodesReady waits until every node is Ready, then checks that every node daemon runs in
// its node's view. A daemon that exits ends the wait at once. The error explains every node
// that is not Ready: its Ready condition, its daemons that exited and the last errors of its
// kubelet, with the known causes they match (diagnose.go).
func (c Config) waitNodesReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	objs := map[string]*corev1.Node{} // from the last successful list
	stopped := false                  // a daemon exited
	err := waitFor(ctx, timeout, "nodes Ready", func() error {
		var exited []string
		for _, d := range c.allDaemons() {
			if c.exited(d) {
				exited = append(exited, d.Name)
			}
		}
		if len(exited) > 0 {
			stopped = true
			return stopWaiting{fmt.Errorf("%s exited", strings.Join(exited, ", "))}
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		clear(objs)
		for i := range nodes.Items {
			objs[nodes.Items[i].Name] = &nodes.Items[i]
		}
		var notReady []string
		for _, n := range Nodes() {
			if o := objs[n.Name]; o == nil || !nodeReady(o) {
				notReady = append(notReady, n.Name)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("%d/%d nodes Ready (not ready: %v)", NodeCount-len(notReady), NodeCount, notReady)
		}
		return nil
	})
	if err != nil {
		// The latest state of the nodes (the wait may have ended before it listed any).
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if nodes, lerr := cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{}); lerr == nil {
			clear(objs)
			for i := range nodes.Items {
				objs[nodes.Items[i].Name] = &nodes.Items[i]
			}
		}
		cancel()
		// After a timeout every node that is not Ready; after an exit (the others may still be
		// on their way) the nodes whose daemons exited.
		var b strings.Builder
		for _, n := range Nodes() {
			bad := !stopped && (objs[n.Name] == nil || !nodeReady(objs[n.Name]))
			for _, comp := range Components {
				bad = bad || c.exited(c.nodeDaemon(n, comp))
			}
			if bad {
				b.WriteString(c.nodeReport(n, objs[n.Name]))
			}
		}
		for _, d := range c.controlPlaneDaemons() {
			if c.exited(d) {
				b.WriteString(c.daemonReport(d, "exited"))
			}
		}
		return fmt.Errorf("%w\n%s", err, strings.TrimRight(b.String(), "\n"))
	}
	for _, n := range Nodes() {
		for _, comp := range Components {
			pid, err := c.readPid(c.nodeDaemon(n, comp))
			if err != nil {
				return err
			}
			if err := c.CheckNodeView(n.Name, pid); err != nil {
				return err
			}
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// healthy returns nil when every daemon runs (node daemons in their node's view), the API
// server is ready and all nodes are Ready.
func (c Config) healthy(ctx context.Context) error {
	if _, err := os.Stat(c.stateFile()); err != nil {
		return errors.New("not up")
	}
	for _, d := range c.allDaemons() {
		pid, err := c.readPid(d)
		if err != nil {
			return fmt.Errorf("%s is not running", d.Name)
		}
		// A lab from before the node views (issue #18) is rebuilt.
		if d.MountNS != "" {
			if err := c.CheckNodeView(filepath.Base(d.MountNS), pid); err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
		}
	}
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("API server not ready: %w", err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			ready++
		}
	}
	if ready != NodeCount {
		return fmt.Errorf("%d/%d nodes Ready", ready, NodeCount)
	}
	return nil
}

// anythingLeft reports whether any trace of a lab with this prefix exists on the machine.
func (c Config) anythingLeft() bool {
	if _, err := os.Stat(c.stateFile()); err == nil {
		return true
	}
	for _, ns := range c.namespaces() {
		if netnsExists(ns) {
			return true
		}
	}
	for _, d := range c.allDaemons() {
		if c.running(d) {
			return true
		}
	}
	if _, err := os.Stat("/sys/class/net/" + c.userLink()); err == nil {
		return true
	}
	return len(c.mountsUnderDir()) > 0
}

// Load imports image tarballs that changed since the last import into every running node and
// deletes the pods that run those images, so their controllers recreate them on the new image.
func Load(ctx context.Context, c Config, out io.Writer) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.healthy(ctx); err != nil {
		fmt.Fprintf(out, ">> lab %q is not up (%v); images are imported by lab-up\n", c.Prefix, err)
		return nil
	}
	return c.load(ctx, progress{out: out, start: time.Now()})
}

func (c Config) load(ctx context.Context, p progress) error {
	var mu sync.Mutex
	changed := map[string]bool{}
	err := c.forNodes(func(n Node) error {
		refs, err := c.importImages(ctx, n)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range refs {
			changed[r] = true
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		p.step("images unchanged on all nodes")
		return nil
	}
	refs := make([]string, 0, len(changed))
	for r := range changed {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	p.step("imported into every node: %s", strings.Join(refs, ", "))
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for _, pod := range pods.Items {
		uses := false
		for _, ctr := range pod.Spec.Containers {
			uses = uses || changed[ctr.Image]
		}
		if !uses || len(pod.OwnerReferences) == 0 {
			continue
		}
		p.step("restarting pod %s/%s on the new image", pod.Namespace, pod.Name)
		if err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

// printUsage tells the user how to reach the lab.
func (c Config) printUsage(out io.Writer) {
	n1 := Nodes()[0]
	fmt.Fprintf(out, `
The lab %[1]q is up. API server %[2]s (Kubernetes %[3]s).
  export KUBECONFIG=%[4]s
  %[5]s get nodes -o wide
  ip netns exec %[1]sclient curl http://%[6]s:<nodePort>/       # the client on the segment
  ip netns exec %[1]sclient arping -c1 -I eth0 %[6]s
  ip netns exec %[1]srouter vtysh --vty_socket %[7]s -c 'show bgp summary'
  make lab-status | lab-selftest | lab-load | lab-down          (LAB_PREFIX=%[1]s)
`, c.Prefix, c.APIServerURL(), KubeVersion, c.KubeconfigPath(), c.Kubectl(), n1.IPv4, c.frrDir())
}

// saveSysctls records the host sysctls kubelet changes, unless an earlier Up already did (then
// the file holds the values from before the first lab).
func (c Config) saveSysctls() error {
	if _, err := os.Stat(c.sysctlFile()); err == nil {
		return nil
	}
	vals := map[string]string{}
	for _, k := range hostSysctls {
		b, err := os.ReadFile(sysctlPath(k))
		if err != nil {
			continue
		}
		vals[k] = strings.TrimSpace(string(b))
	}
	b, _ := json.MarshalIndent(vals, "", "  ")
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(c.sysctlFile(), b, 0o644)
}

func (c Config) restoreSysctls() error {
	b, err := os.ReadFile(c.sysctlFile())
	if err != nil {
		return nil
	}
	vals := map[string]string{}
	if err := json.Unmarshal(b, &vals); err != nil {
		return fmt.Errorf("restore sysctls: %w", err)
	}
	var errs []error
	for k, v := range vals {
		if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(c.sysctlFile())
	}
	return errors.Join(errs...)
}

func sysctlPath(k string) string { return "/proc/sys/" + strings.ReplaceAll(k, ".", "/") }
