package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Packages are the Debian packages the lab and its tests use.
var Packages = []string{
	"etcd-server", "containerd", "runc", "containernetworking-plugins", "frr", "arping", "ndisc6",
	"curl", "tcpdump", "conntrack", "iptables", "nftables", "wrk", "nginx-light", "haproxy",
	"iproute2", "util-linux",
}

// EnsurePackages installs the missing Packages with one apt-get, streaming its progress.
func EnsurePackages(ctx context.Context, out io.Writer) error {
	var missing []string
	for _, p := range Packages {
		st, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(st), "install ok installed") {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing Debian packages %s: run as root, or apt-get install them", strings.Join(missing, " "))
	}
	fmt.Fprintf(out, ">> apt-get install %s\n", strings.Join(missing, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	steps := [][]string{
		{"apt-get", "update", "-q"},
		append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "Dpkg::Use-Pty=0"}, missing...),
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Env = env
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(s, " "), err)
		}
		done := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				fmt.Fprintf(out, "   apt: %s\n", sc.Text())
			}
			close(done)
		}()
		err := cmd.Wait()
		pw.Close()
		<-done
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(s, " "), err)
		}
	}
	return nil
}

// Status prints the state of every daemon, the nodes and pods, and the router's BGP summary.
// It returns an error when the lab is not fully healthy.
func Status(ctx context.Context, c Config, out io.Writer) error {
	fmt.Fprintf(out, "lab %q  dir %s  API %s\n", c.Prefix, c.Dir, c.APIServerURL())
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DAEMON\tNAMESPACE\tSTATE")
	for _, d := range c.allDaemons() {
		state := "running"
		if pid, err := c.readPid(d); err != nil {
			state = "DOWN"
		} else {
			state = fmt.Sprintf("running (pid %d)", pid)
			if d.MountNS != "" {
				node := filepath.Base(d.MountNS)
				if err := c.CheckNodeView(node, pid); err != nil {
					state += ", NOT in its node's view"
				} else {
					state += ", in " + node + "'s view"
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Name, d.Netns, state)
	}
	tw.Flush()
	health := c.healthy(ctx)
	if _, err := os.Stat(c.stateFile()); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if cs, err := c.clientset(); err == nil {
			if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
				fmt.Fprintln(out)
				byName := map[string]*corev1.Node{}
				for i, n := range nodes.Items {
					byName[n.Name] = &nodes.Items[i]
					fmt.Fprintf(out, "node %s ready=%v %v\n", n.Name, nodeReady(&n), n.Status.Addresses)
				}
				for _, n := range Nodes() {
					if o := byName[n.Name]; o == nil || !nodeReady(o) {
						fmt.Fprint(out, c.nodeReport(n, o))
					}
				}
			}
			if pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
				fmt.Fprintf(out, "%d pods\n", len(pods.Items))
			}
		}
		if s, err := c.vtysh(ctx, "show bgp summary"); err == nil {
			fmt.Fprintf(out, "\nrouter:%s", s)
		}
	}
	if health != nil {
		return fmt.Errorf("lab %q is not healthy: %w", c.Prefix, health)
	}
	fmt.Fprintf(out, "\nlab %q is healthy. export KUBECONFIG=%s\n", c.Prefix, c.KubeconfigPath())
	return nil
}
