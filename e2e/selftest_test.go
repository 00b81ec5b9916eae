//go:build e2e

package e2e

// The lab's self-test (make lab-selftest runs the tests named TestLab*): it proves every piece
// of the lab that project tests rely on, before any of them does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/e2e/lab"
)

// echoReply is the part of the echo backend's JSON the tests read.
type echoReply struct {
	Pod        string `json:"pod"`
	Node       string `json:"node"`
	RemoteAddr string `json:"remoteAddr"`
}

// TestLabNodesReady: three nodes, Ready, with the planned dual-stack addresses.
func TestLabNodesReady(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		got[n.Name] = n
	}
	for _, want := range lab.Nodes() {
		n, ok := got[want.Name]
		if !ok {
			t.Errorf("node %s missing", want.Name)
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		var addrs []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addrs = append(addrs, a.Address)
			}
		}
		if !ready || strings.Join(addrs, ",") != want.IPv4.String()+","+want.IPv6.String() {
			t.Errorf("node %s: ready=%v InternalIPs=%v, want ready and %s,%s", n.Name, ready, addrs, want.IPv4, want.IPv6)
		}
	}
}

// TestLabNodeViews: every node's containerd, kubelet and kube-proxy share a mount namespace of
// their own, and every kubelet serves its device-plugin socket from its node's own directory:
// three files, each answered by its own kubelet, none on the host (issue #18: kubelets that
// shared the host's /var/lib/kubelet/device-plugins raced for one socket).
func TestLabNodeViews(t *testing.T) {
	l := openLab(t)
	ctx := context.Background()
	const sock = "/var/lib/kubelet/device-plugins/kubelet.sock"
	rootNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	nodeOfNS := map[string]string{}
	kubelets := map[int]string{}
	for _, n := range lab.Nodes() {
		var nodeNS string
		for _, comp := range lab.Components {
			pid, err := l.PID(n.Name, comp)
			if err != nil {
				t.Fatal(err)
			}
			ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
			if err != nil {
				t.Fatal(err)
			}
			if comp == lab.Containerd {
				nodeNS = ns
			} else if ns != nodeNS {
				t.Errorf("%s of %s runs in mount namespace %s, its containerd in %s", comp, n.Name, ns, nodeNS)
			}
			if err := l.CheckNodeView(n.Name, pid); err != nil {
				t.Error(err)
			}
			if comp == lab.Kubelet {
				kubelets[pid] = n.Name
			}
		}
		if nodeNS == rootNS {
			t.Errorf("%s runs in the root mount namespace", n.Name)
		}
		if other, ok := nodeOfNS[nodeNS]; ok {
			t.Errorf("%s and %s share mount namespace %s", other, n.Name, nodeNS)
		}
		nodeOfNS[nodeNS] = n.Name
	}
	for pid, node := range kubelets {
		// The socket is a file in the node's own dir...
		own, err := l.NodeHostPath(node, sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(own); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("%s's own %s: %v, want a socket", node, own, err)
		}
		// ...and at the fixed path in the node's view (overlayfs binds a socket to its own
		// inode: connect through the view, /proc/<pid>/root) the node's kubelet answers, for
		// the kubelet and for its containerd. With one shared dir, only the kubelet that started
		// last would: each deletes the others' sockets at start.
		ctrd, err := l.PID(node, lab.Containerd)
		if err != nil {
			t.Fatal(err)
		}
		for _, viewer := range []int{pid, ctrd} {
			path := fmt.Sprintf("/proc/%d/root%s", viewer, sock)
			eventually(t, 30*time.Second, node+"'s kubelet serving "+path, func() error {
				peer, err := unixPeerPID(path)
				if err != nil {
					return err
				}
				if peer != pid {
					return fmt.Errorf("%s is served by pid %d (kubelet of %q), want %s's kubelet %d", path, peer, kubelets[peer], node, pid)
				}
				return nil
			})
		}
		// In the node's network namespace ss shows exactly that kubelet listening on the path.
		out, err := l.Exec(ctx, node, "ss", "-xlpn")
		if err != nil {
			t.Fatal(err)
		}
		var listeners []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, sock+" ") {
				listeners = append(listeners, strings.Join(strings.Fields(line), " "))
			}
		}
		if len(listeners) != 1 || !strings.Contains(listeners[0], fmt.Sprintf("pid=%d,", pid)) {
			t.Errorf("ss -xlp in %s: listeners on %s: %q, want one, kubelet pid %d", node, sock, listeners, pid)
		} else {
			t.Logf("%s: %s (file %s)", node, listeners[0], own)
		}
	}
	// The host's path belongs to no lab kubelet (it should not even exist).
	if peer, err := unixPeerPID(sock); err == nil && kubelets[peer] != "" {
		t.Errorf("the host's %s is served by %s's kubelet", sock, kubelets[peer])
	} else if err == nil {
		t.Logf("the host's %s is served by pid %d, not a kubelet of this lab", sock, peer)
	}
}

// unixPeerPID connects to a unix socket and returns the PID of the process that listens on it.
func unixPeerPID(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED on %s: %w", path, credErr)
	}
	if cred.Pid <= 0 {
		return 0, errors.New("no peer credentials")
	}
	return int(cred.Pid), nil
}

// TestLabWorkloads: an echo Deployment with a pod on every node behind a dual-stack NodePort
// Service, and a hostNetwork DaemonSet.
func TestLabWorkloads(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()
	ns := testNamespace(t, cs, "lab-selftest")
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(lab.NodeCount)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// One replica per node.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
							TopologyKey:   "kubernetes.io/hostname",
						}},
					}},
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers:      []corev1.Container{echoContainer(8080)},
				},
			},
		},
	}
	dep.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeNodePort,
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
			Selector:       labels,
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create dual-stack Service: %v", err)
	}
	hostLabels := map[string]string{"app": "hostnet"}
	hostPort := int32(18080)
	hostCtr := echoContainer(hostPort, "-lab-endpoints")
	// Root with CAP_NET_RAW: the gratuitous ARP goes out through an AF_PACKET socket, as the
	// speaker's will.
	hostCtr.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), RunAsNonRoot: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_RAW"}}}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: hostLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: hostLabels},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{hostCtr}},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentReady(t, cs, ns, "echo", 90*time.Second)
	pods := podsByNode(t, cs, ns, "app=echo")
	for _, n := range lab.Nodes() {
		if _, ok := pods[n.Name]; !ok {
			t.Fatalf("no echo pod on %s (pods on %v)", n.Name, keys(pods))
		}
	}

	t.Run("NodePortFromClient", func(t *testing.T) {
		port := svc.Spec.Ports[0].NodePort
		for _, n := range lab.Nodes() {
			url := fmt.Sprintf("http://%s:%d/", n.IPv4, port)
			eventually(t, 30*time.Second, "curl "+url+" from the client", func() error {
				_, err := curlEcho(l, "client", url)
				return err
			})
		}
	})

	t.Run("ClusterIPFromNodes", func(t *testing.T) {
		if len(svc.Spec.ClusterIPs) != 2 {
			t.Fatalf("ClusterIPs = %v, want one per family", svc.Spec.ClusterIPs)
		}
		for _, ip := range svc.Spec.ClusterIPs {
			a := netip.MustParseAddr(ip)
			if !lab.ServiceCIDRv4.Contains(a) && !lab.ServiceCIDRv6.Contains(a) {
				t.Errorf("ClusterIP %s outside the service ranges", a)
			}
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(a, 80))
			for _, n := range lab.Nodes() {
				seen := map[string]bool{}
				// kube-proxy picks endpoints at random: ask until two different pods answered.
				eventually(t, 30*time.Second, fmt.Sprintf("curl %s from %s (kube-proxy %s)", url, n.Name, n.ProxyMode), func() error {
					r, err := curlEcho(l, n.Name, url)
					if err != nil {
						return err
					}
					seen[r.Pod] = true
					if len(seen) < 2 {
						return fmt.Errorf("only %v answered so far", keys(seen))
					}
					return nil
				})
			}
		}
	})

	t.Run("HostNetworkDaemonSet", func(t *testing.T) {
		waitDaemonSetReady(t, cs, ns, "hostnet", 60*time.Second)
		hostPods := podsByNode(t, cs, ns, "app=hostnet")
		for _, n := range lab.Nodes() {
			pod, ok := hostPods[n.Name]
			if !ok {
				t.Fatalf("no hostnet pod on %s", n.Name)
			}
			if pod.Status.PodIP != n.IPv4.String() {
				t.Errorf("hostnet pod on %s has IP %s, want the node's %s", n.Name, pod.Status.PodIP, n.IPv4)
			}
			out, err := l.Exec(context.Background(), "client", "curl", "-sS", "--max-time", "3", fmt.Sprintf("http://%s:%d/interfaces", n.IPv4, hostPort))
			if err != nil {
				t.Fatalf("interfaces of the hostnet pod on %s: %v", n.Name, err)
			}
			var ifs []struct {
				Name  string   `json:"name"`
				MAC   string   `json:"mac"`
				Addrs []string `json:"addrs"`
			}
			if err := json.Unmarshal([]byte(out), &ifs); err != nil {
				t.Fatalf("parse interfaces: %v: %s", err, shortErr(out))
			}
			found := false
			for _, i := range ifs {
				if i.Name == "eth0" && i.MAC == n.MAC && contains(i.Addrs, n.IPv4.String()+"/24") {
					found = true
				}
			}
			if !found {
				t.Errorf("hostnet pod on %s does not see eth0 %s with %s/24: %+v", n.Name, n.MAC, n.IPv4, ifs)
			}
		}

		// A gratuitous ARP sent by the pod on n2 reaches the client.
		n2, _ := lab.NodeByName("n2")
		capture, err := l.StartCapture(context.Background(), "client", "eth0", "arp")
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.Kubectl(context.Background(), "-n", ns, "exec", hostPods[n2.Name].Name, "--", "/echo", "garp", "-i", "eth0")
		if err != nil {
			_, _ = capture.Stop(context.Background())
			t.Fatalf("kubectl exec garp: %v", err)
		}
		t.Logf("pod: %s", strings.TrimSpace(out))
		want := "Request who-has " + n2.IPv4.String() + " tell " + n2.IPv4.String()
		var seen []string
		eventually(t, 5*time.Second, "gratuitous ARP captured in the client", func() error {
			r, err := capture.Snapshot(context.Background())
			if err != nil {
				return err
			}
			if seen = r.Matching(n2.MAC, want); len(seen) == 0 {
				return fmt.Errorf("no %q from %s in %q", want, n2.MAC, r.Lines)
			}
			return nil
		})
		if _, err := capture.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		t.Logf("captured: %s", seen[0])
	})
}

// TestLabBGP: the router accepts a BGP session from a node and learns its route.
func TestLabBGP(t *testing.T) {
	l := openLab(t)
	ctx := context.Background()
	n1, _ := lab.NodeByName("n1")
	prefix := netip.MustParsePrefix("100.64.255.11/32")
	sp, err := l.StartTestSpeaker(ctx, n1.Name, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sp.Stop(); err != nil {
			t.Errorf("stop test speaker: %v", err)
		}
	})
	eventually(t, 30*time.Second, "BGP session n1 -> router Established with its route", func() error {
		peers, err := l.RouterPeers(ctx)
		if err != nil {
			return err
		}
		for _, p := range peers {
			if p.Address == n1.IPv4.String() && p.Family == "ipv4Unicast" {
				if p.State != "Established" || p.RemoteAS != lab.NodeASN || p.PfxRcd != 1 {
					return fmt.Errorf("peer %+v", p)
				}
				return nil
			}
		}
		return fmt.Errorf("no peer %s in %+v", n1.IPv4, peers)
	})
	// bgpd counts the prefix before zebra has installed it: the route
	// reaches the router's RIB a moment after PfxRcd says 1.
	eventually(t, 10*time.Second, "router RIB has "+prefix.String()+" via n1", func() error {
		out, err := l.Vtysh(ctx, "show ip route "+prefix.String()+" json")
		if err != nil {
			return err
		}
		if !strings.Contains(out, n1.IPv4.String()) {
			return fmt.Errorf("no route via %s: %s", n1.IPv4, shortErr(out))
		}
		return nil
	})
	if err := sp.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "session gone after the speaker stopped", func() error {
		peers, err := l.RouterPeers(ctx)
		if err != nil {
			return err
		}
		for _, p := range peers {
			if p.Address == n1.IPv4.String() && p.State == "Established" {
				return fmt.Errorf("still established: %+v", p)
			}
		}
		return nil
	})
}

// TestLabNeighbours: ARP and NDP from the client resolve every node to its fixed MAC.
func TestLabNeighbours(t *testing.T) {
	l := openLab(t)
	ctx := context.Background()
	for _, n := range lab.Nodes() {
		out, err := l.Exec(ctx, "client", "arping", "-c", "1", "-w", "3", "-I", "eth0", n.IPv4.String())
		if err != nil {
			t.Errorf("arping %s: %v %s", n.IPv4, err, out)
		} else if !strings.Contains(out, "from "+n.MAC+" ("+n.IPv4.String()+")") {
			t.Errorf("arping %s: want a reply from %s, got %s", n.IPv4, n.MAC, out)
		}
		out, err = l.Exec(ctx, "client", "ndisc6", "-q", "-r", "3", n.IPv6.String(), "eth0")
		if err != nil {
			t.Errorf("ndisc6 %s: %v", n.IPv6, err)
		} else if !strings.EqualFold(strings.TrimSpace(out), n.MAC) {
			t.Errorf("ndisc6 %s = %q, want %s", n.IPv6, strings.TrimSpace(out), n.MAC)
		}
	}
}

// curlEcho fetches url from a lab namespace and decodes the echo backend's reply.
func curlEcho(l *lab.Lab, host, url string) (echoReply, error) {
	var r echoReply
	out, err := l.Exec(context.Background(), host, "curl", "-sS", "-g", "--max-time", "3", url)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Pod == "" {
		return r, fmt.Errorf("not an echo reply from %s: %v: %s", url, err, shortErr(out))
	}
	return r, nil
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestLabControl: the fault-injection handles tests use work — a cut link silences a node, a
// restarted kubelet brings its node back Ready, a killed pod process is restarted by kubelet.
func TestLabControl(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()
	n3, _ := lab.NodeByName("n3")

	t.Run("CutLink", func(t *testing.T) {
		if err := l.CutLink(ctx, n3.Name); err != nil {
			t.Fatal(err)
		}
		restored := false
		t.Cleanup(func() {
			if !restored {
				_ = l.RestoreLink(context.Background(), n3.Name)
			}
		})
		if out, err := l.Exec(ctx, "client", "arping", "-c", "1", "-w", "1", "-I", "eth0", n3.IPv4.String()); err == nil {
			t.Errorf("arping %s answered through a cut link: %s", n3.IPv4, out)
		}
		if err := l.RestoreLink(ctx, n3.Name); err != nil {
			t.Fatal(err)
		}
		restored = true
		eventually(t, 10*time.Second, "arping "+n3.IPv4.String()+" after restore", func() error {
			_, err := l.Exec(ctx, "client", "arping", "-c", "1", "-w", "1", "-I", "eth0", n3.IPv4.String())
			return err
		})
	})

	t.Run("RestartKubelet", func(t *testing.T) {
		restarted := time.Now()
		if err := l.Restart(ctx, "n2", lab.Kubelet); err != nil {
			t.Fatal(err)
		}
		// The new kubelet proves itself by renewing the node's Lease.
		eventually(t, 60*time.Second, "n2's Lease renewed by the restarted kubelet", func() error {
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n2", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(restarted.Truncate(time.Second).Add(time.Second)) {
				return fmt.Errorf("last renewal %v, restart at %v", lease.Spec.RenewTime, restarted)
			}
			return nil
		})
	})

	t.Run("KillPodProcess", func(t *testing.T) {
		ns := testNamespace(t, cs, "lab-control")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{echoContainer(8080)}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "pod ready", func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "echo", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
				return fmt.Errorf("not ready: %+v", p.Status.ContainerStatuses)
			}
			return nil
		})
		if err := l.SignalPod(ctx, ns, "echo", syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "kubelet restarts the killed container", func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "echo", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 || !p.Status.ContainerStatuses[0].Ready {
				return fmt.Errorf("status %+v", p.Status.ContainerStatuses)
			}
			return nil
		})
	})
}
