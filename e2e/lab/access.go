package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lab is a handle on a running lab for tests.
type Lab struct {
	Config
	rest *rest.Config
}

// Open returns the running lab selected by the LAB_* environment (default prefix mg-). It
// fails when the lab is not up; bring it up with `make lab-up`.
func Open(ctx context.Context) (*Lab, error) {
	c, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(c.stateFile())
	if err != nil {
		return nil, fmt.Errorf("lab %q is not up (no %s): run make lab-up", c.Prefix, c.stateFile())
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read %s: %w", c.stateFile(), err)
	}
	rc, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	l := &Lab{Config: c, rest: rc}
	cs, err := l.Clientset()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("lab %q API server %s not ready: %w", c.Prefix, c.APIServerURL(), err)
	}
	return l, nil
}

func (c Config) restConfig() (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", c.KubeconfigPath(), err)
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "metalgate-lab"
	return rc, nil
}

func (c Config) clientset() (*kubernetes.Clientset, error) {
	rc, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, nil
}

// RESTConfig returns a copy of the admin client configuration.
func (l *Lab) RESTConfig() *rest.Config { return rest.CopyConfig(l.rest) }

// Clientset returns a typed client-go clientset with admin rights.
func (l *Lab) Clientset() (*kubernetes.Clientset, error) {
	cs, err := kubernetes.NewForConfig(l.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, nil
}

// Client returns a controller-runtime client with admin rights that knows the kinds of
// scheme (add the metalgate API to it for typed access; unstructured works regardless).
func (l *Lab) Client(scheme *runtime.Scheme) (client.Client, error) {
	cl, err := client.New(l.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller-runtime client: %w", err)
	}
	return cl, nil
}

// Exec runs a command in a lab namespace ("client", "router", "cp", "n1".."n3") and returns
// its standard output; the error carries standard error. It uses `ip netns exec`, so the
// command sees the namespace's /sys too.
func (l *Lab) Exec(ctx context.Context, host string, cmd ...string) (string, error) {
	if err := l.checkHost(host); err != nil {
		return "", err
	}
	out, err := run(ctx, append([]string{"ip", "netns", "exec", l.Namespace(host)}, cmd...)...)
	if err != nil {
		return out, fmt.Errorf("in %s: %w", host, err)
	}
	return out, nil
}

func (l *Lab) checkHost(host string) error {
	for _, h := range Hosts() {
		if h.Name == host {
			return nil
		}
	}
	return fmt.Errorf("no lab host %q (want router, cp, client, n1..n%d)", host, NodeCount)
}

// Kubectl runs the lab's kubectl with the admin kubeconfig and returns its standard output.
func (l *Lab) Kubectl(ctx context.Context, args ...string) (string, error) {
	return run(ctx, append([]string{l.Config.Kubectl(), "--kubeconfig", l.KubeconfigPath()}, args...)...)
}

// Vtysh runs commands on the router's FRR (vtysh -c each) and returns the output.
func (l *Lab) Vtysh(ctx context.Context, cmds ...string) (string, error) {
	return l.vtysh(ctx, cmds...)
}

// PID returns the process ID of a component on a node.
func (l *Lab) PID(node string, comp Component) (int, error) {
	n, err := NodeByName(node)
	if err != nil {
		return 0, err
	}
	return l.readPid(l.nodeDaemon(n, comp))
}

// Restart stops a component on a node (if it runs) and starts it again with the same command
// line. Containers survive a containerd restart, as on a real node.
func (l *Lab) Restart(ctx context.Context, node string, comp Component) error {
	n, err := NodeByName(node)
	if err != nil {
		return err
	}
	d := l.nodeDaemon(n, comp)
	if err := l.stop(d, 10*time.Second); err != nil {
		return err
	}
	if err := l.start(ctx, d); err != nil {
		return err
	}
	if comp == Containerd {
		return waitFor(ctx, 30*time.Second, "containerd on "+node, func() error {
			_, err := l.ctr(ctx, n, "version")
			return err
		})
	}
	return nil
}

// PodPIDs returns the PIDs of a pod's application processes (not its pause process), found
// through the pod's cgroup on its node.
func (l *Lab) PodPIDs(ctx context.Context, namespace, name string) ([]int, error) {
	cs, err := l.Clientset()
	if err != nil {
		return nil, err
	}
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	n, err := NodeByName(pod.Spec.NodeName)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	// cgroupfs driver: /<root>/kubepods[/<qos>]/pod<uid>/<container id>/cgroup.procs
	root := filepath.Join("/sys/fs/cgroup/pids", l.cgroupName(n.Name), "kubepods")
	var podDir string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "pod"+string(pod.UID) {
			podDir = path
			return filepath.SkipAll
		}
		return nil
	})
	if podDir == "" {
		return nil, fmt.Errorf("pod %s/%s: no cgroup pod%s under %s", namespace, name, pod.UID, root)
	}
	var pids []int
	_ = filepath.WalkDir(podDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" || filepath.Dir(path) == podDir {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			// Skip the sandbox and a container still being set up by `runc init`.
			if args := cmdlineArgs(pid); len(args) == 0 || filepath.Base(args[0]) == "pause" || strings.Contains(args[0], "runc") {
				continue
			}
			pids = append(pids, pid)
		}
		return nil
	})
	if len(pids) == 0 {
		return nil, fmt.Errorf("pod %s/%s: no running processes", namespace, name)
	}
	return pids, nil
}

// SignalPod sends sig to every application process of a pod (SIGSTOP freezes it, SIGKILL
// crashes it; kubelet restarts it per the pod's restartPolicy).
func (l *Lab) SignalPod(ctx context.Context, namespace, name string, sig syscall.Signal) error {
	pids, err := l.PodPIDs(ctx, namespace, name)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("signal pod %s/%s pid %d: %w", namespace, name, pid, err)
		}
	}
	return nil
}

// CutLink takes a host's port on the segment's bridge down (ip link set down on the
// bridge-side veth): no frame passes and the host's eth0 loses carrier, like a pulled cable.
// The host keeps its addresses and processes.
func (l *Lab) CutLink(ctx context.Context, host string) error {
	return l.setPort(ctx, host, "down")
}

// RestoreLink brings a host's bridge port back up.
func (l *Lab) RestoreLink(ctx context.Context, host string) error {
	return l.setPort(ctx, host, "up")
}

func (l *Lab) setPort(ctx context.Context, host, state string) error {
	if err := l.checkHost(host); err != nil {
		return err
	}
	if _, err := run(ctx, "ip", "-n", l.bridgeNS(), "link", "set", "v-"+host, state); err != nil {
		return fmt.Errorf("link of %s %s: %w", host, state, err)
	}
	return nil
}
