package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CollectLogs copies everything worth reading after a failure into dir:
//
//	daemons/      control plane, every node's containerd/kubelet/kube-proxy, FRR
//	pods/         `kubectl logs` of every container of every pod (and its previous run)
//	events.txt    kubectl get events -A
//	all.txt       kubectl get all -A -o wide, nodes, and the metalgate objects
//	router.txt    FRR's view: BGP summary, routes, BFD peers
//	network.txt   addresses, routes and neighbours of every lab namespace
//
// It goes on after an error and returns all errors joined.
func (l *Lab) CollectLogs(ctx context.Context, dir string) error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, sub := range []string{"daemons", "pods"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("collect logs: %w", err)
		}
	}
	ents, _ := os.ReadDir(l.logDir())
	for _, e := range ents {
		keep(copyFile(filepath.Join(l.logDir(), e.Name()), filepath.Join(dir, "daemons", e.Name())))
	}
	frrLogs, _ := filepath.Glob(filepath.Join(l.frrDir(), "*.log"))
	for _, f := range frrLogs {
		keep(copyFile(f, filepath.Join(dir, "daemons", "frr-"+filepath.Base(f))))
	}

	write := func(name string, parts ...func() (string, error)) {
		var b strings.Builder
		for _, p := range parts {
			out, err := p()
			b.WriteString(out)
			if err != nil {
				fmt.Fprintf(&b, "\nERROR: %v\n", err)
			}
			b.WriteString("\n")
		}
		keep(os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644))
	}
	kubectl := func(args ...string) func() (string, error) {
		return func() (string, error) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			out, err := l.Kubectl(cctx, args...)
			return "$ kubectl " + strings.Join(args, " ") + "\n" + out, err
		}
	}
	write("events.txt", kubectl("get", "events", "-A", "--sort-by=.lastTimestamp"))
	write("all.txt", kubectl("get", "nodes", "-o", "wide"), kubectl("get", "all", "-A", "-o", "wide"),
		kubectl("get", "endpointslices,leases", "-A"), kubectl("get", "metalgate", "-A", "-o", "yaml"),
		kubectl("get", "services", "-A", "-o", "yaml"))
	vty := func(cmd string) func() (string, error) {
		return func() (string, error) {
			out, err := l.Vtysh(ctx, cmd)
			return "# " + cmd + "\n" + out, err
		}
	}
	write("router.txt", vty("show bgp summary"), vty("show ip route"), vty("show ipv6 route"), vty("show bfd peers"))
	var netParts []func() (string, error)
	for _, h := range Hosts() {
		for _, args := range [][]string{{"ip", "-br", "addr"}, {"ip", "route"}, {"ip", "-6", "route"}, {"ip", "neigh"}} {
			netParts = append(netParts, func() (string, error) {
				out, err := l.Exec(ctx, h.Name, args...)
				return "## " + h.Name + ": " + strings.Join(args, " ") + "\n" + out, err
			})
		}
	}
	write("network.txt", netParts...)
	keep(l.collectPodLogs(ctx, filepath.Join(dir, "pods")))
	return errors.Join(errs...)
}

func (l *Lab) collectPodLogs(ctx context.Context, dir string) error {
	cs, err := l.Clientset()
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var errs []error
	for _, pod := range pods.Items {
		for _, ctr := range pod.Spec.Containers {
			for _, previous := range []bool{false, true} {
				name := fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, ctr.Name)
				if previous {
					if !restarted(&pod, ctr.Name) {
						continue
					}
					name = strings.TrimSuffix(name, ".log") + ".previous.log"
				}
				req := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ctr.Name, Previous: previous})
				rc, err := req.Stream(ctx)
				if err != nil {
					errs = append(errs, fmt.Errorf("logs of %s/%s/%s: %w", pod.Namespace, pod.Name, ctr.Name, err))
					continue
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func restarted(pod *corev1.Pod, container string) bool {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			return st.RestartCount > 0
		}
	}
	return false
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
