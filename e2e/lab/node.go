package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Component is a per-node process that tests can kill, stop, continue or restart.
type Component string

// The node components.
const (
	Containerd Component = "containerd"
	Kubelet    Component = "kubelet"
	KubeProxy  Component = "kube-proxy"
)

// Components lists the node components in start order.
var Components = []Component{Containerd, Kubelet, KubeProxy}

// Image is one image the lab imports into every node.
type Image struct {
	// File is the tarball's base name in Config.ImageDir.
	File string
	// Ref is the reference the tarball is tagged with.
	Ref string
}

// The lab's images, built by `make lab-images` with hack/image.
var (
	PauseImage     = Image{File: "pause.tar", Ref: "ghcr.io/metalgate/pause:dev"}
	MetalgateImage = Image{File: "metalgate.tar", Ref: "ghcr.io/metalgate/metalgate:dev"}
	EchoImage      = Image{File: "echo.tar", Ref: "ghcr.io/metalgate/echo:dev"}
	Images         = []Image{PauseImage, MetalgateImage, EchoImage}
)

// ConformanceEchoImage is the Gateway API conformance suite's echo backend, built from its
// source (sigs.k8s.io/gateway-api/conformance v1.5.1, package echo-basic) by
// `make conformance` and tagged with exactly the reference the suite's manifests name, so the
// nodes run it without pulling (imagePullPolicy IfNotPresent). It is optional: a lab imports it
// only when its tarball exists.
var ConformanceEchoImage = Image{File: "conformance-echo-basic.tar",
	Ref: "gcr.io/k8s-staging-gateway-api/echo-basic:v20260204-monthly-2026.01-60-g28382302"}

// importable lists the images to import: every one of Images, and ConformanceEchoImage when
// it has been built.
func (c Config) importable() []Image {
	imgs := append([]Image(nil), Images...)
	if _, err := os.Stat(filepath.Join(c.ImageDir, ConformanceEchoImage.File)); err == nil {
		imgs = append(imgs, ConformanceEchoImage)
	}
	return imgs
}

// nodeDaemon returns the daemon of one component on one node.
func (c Config) nodeDaemon(n Node, comp Component) daemon {
	dir := c.nodeDir(n.Name)
	d := daemon{Name: n.Name + "-" + string(comp), Netns: c.Namespace(n.Name), MountNS: c.mountNS(n.Name)}
	switch comp {
	case Containerd:
		d.Args = []string{"containerd", "--config", filepath.Join(dir, "containerd.toml")}
	case Kubelet:
		d.Args = []string{filepath.Join(c.KubeBin, "kubelet"),
			"--config=" + filepath.Join(dir, "kubelet.yaml"),
			"--kubeconfig=" + filepath.Join(c.pkiDir(), "kubelet-"+n.Name+".kubeconfig"),
			"--hostname-override=" + n.Name,
			"--node-ip=" + n.IPv4.String() + "," + n.IPv6.String(),
			"--root-dir=" + filepath.Join(dir, "kubelet"),
			"--cert-dir=" + filepath.Join(dir, "kubelet", "pki"),
			"--node-labels=lab.metalgate.io/node=" + n.Name,
			"--v=2"}
	case KubeProxy:
		d.Args = []string{filepath.Join(c.KubeBin, "kube-proxy"), "--config=" + filepath.Join(dir, "kube-proxy.yaml"), "--v=2"}
	}
	return d
}

// writeNodeConfig writes containerd, CNI, kubelet and kube-proxy configuration of a node and
// creates its cgroup root in every cgroup v1 hierarchy.
func (c Config) writeNodeConfig(n Node) error {
	dir := c.nodeDir(n.Name)
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "runc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	files := map[string]string{
		"containerd.toml":                  c.containerdConfig(n),
		"cni/net.d/10-lab.conflist":        c.cniConfig(n),
		"kubelet.yaml":                     c.kubeletConfig(n),
		"kube-proxy.yaml":                  c.kubeProxyConfig(n),
		filepath.Join("..", "resolv.conf"): "# the lab has no DNS server\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return c.makeCgroups(n)
}

func (c Config) containerdConfig(n Node) string {
	dir := c.nodeDir(n.Name)
	// restrict_oom_score_adj: this VM lacks CAP_SYS_RESOURCE; without it every sandbox fails
	// with "can't get final child's PID from pipe: EOF". Per-node root, state, socket and runc
	// root keep the nodes (and two labs) apart.
	return fmt.Sprintf(`version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "%[1]s/containerd.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "%[1]s/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni/net.d"
    max_conf_num = 1
`, dir, PauseImage.Ref)
}

func (c Config) cniConfig(n Node) string {
	gw4 := n.PodCIDRv4.Addr().Next()
	gw6 := n.PodCIDRv6.Addr().Next()
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q,
              "ranges": [[{"subnet": %q, "gateway": %q}], [{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, c.podNetwork(), filepath.Join(c.nodeDir(n.Name), "cni", "ipam"), n.PodCIDRv4, gw4, n.PodCIDRv6, gw6)
}

func (c Config) kubeletConfig(n Node) string {
	dir := c.nodeDir(n.Name)
	// failCgroupV1: 1.35 refuses cgroup v1 otherwise. Image GC thresholds at 100%: the
	// imported images cannot be pulled again, so they must never be collected.
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s/containerd.sock
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[3]s/ca.crt}
authorization: {mode: AlwaysAllow}
podLogsDir: %[2]s/pod-logs
clusterDomain: cluster.local
resolvConf: %[4]s/resolv.conf
maxPods: 60
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
`, c.cgroupName(n.Name), dir, c.pkiDir(), c.Dir)
}

func (c Config) kubeProxyConfig(n Node) string {
	// conntrack zeros: leave the host-global conntrack sysctls alone.
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: %s
clusterCIDR: %s
hostnameOverride: %s
bindAddress: 0.0.0.0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 0.0.0.0:10256
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, filepath.Join(c.pkiDir(), "kube-proxy.kubeconfig"), n.ProxyMode, c.clusterCIDRs(), n.Name)
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and the unified one, which
// kubelet and runc may also write to).
func cgroupHierarchies() []string {
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	var hs []string
	for _, e := range ents {
		if e.IsDir() {
			hs = append(hs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return hs
}

// makeCgroups pre-creates the node's cgroup root in every hierarchy (kubelet expects it) and
// gives the cpuset one the parent's CPUs and memory nodes.
func (c Config) makeCgroups(n Node) error {
	name := c.cgroupName(n.Name)
	for _, h := range cgroupHierarchies() {
		if strings.HasSuffix(h, "/unified") {
			continue
		}
		if err := os.MkdirAll(filepath.Join(h, name), 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", h, err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", name, f), b, 0o644); err != nil {
			return fmt.Errorf("cgroup cpuset %s: %w", f, err)
		}
	}
	return nil
}

// ctr runs ctr against a node's containerd in the k8s.io namespace.
func (c Config) ctr(ctx context.Context, n Node, args ...string) (string, error) {
	return run(ctx, append([]string{"ctr", "-a", c.containerdSock(n.Name), "-n", "k8s.io"}, args...)...)
}

// importedFile records which tarball (by SHA-256) was last imported into a node.
func (c Config) importedFile(n Node) string {
	return filepath.Join(c.nodeDir(n.Name), "images.json")
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// importImages imports every image whose tarball changed since the last import into the
// node's containerd and returns the references it imported.
func (c Config) importImages(ctx context.Context, n Node) ([]string, error) {
	done := map[string]string{}
	if b, err := os.ReadFile(c.importedFile(n)); err == nil {
		_ = json.Unmarshal(b, &done)
	}
	var imported []string
	for _, img := range c.importable() {
		path := filepath.Join(c.ImageDir, img.File)
		sum, err := fileSHA256(path)
		if err != nil {
			return imported, fmt.Errorf("image %s: %w (build it with make lab-images)", img.Ref, err)
		}
		if done[img.Ref] == sum {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err = c.ctr(ictx, n, "images", "import", path)
		cancel()
		if err != nil {
			return imported, fmt.Errorf("import %s into %s: %w", img.Ref, n.Name, err)
		}
		done[img.Ref] = sum
		imported = append(imported, img.Ref)
	}
	b, _ := json.Marshal(done)
	if err := os.WriteFile(c.importedFile(n), b, 0o644); err != nil {
		return imported, fmt.Errorf("record imports: %w", err)
	}
	return imported, nil
}

// startNode creates the node's view (its own mount namespace), starts containerd in it,
// imports the images, then starts kubelet and kube-proxy in it.
func (c Config) startNode(ctx context.Context, n Node) error {
	if err := c.writeNodeConfig(n); err != nil {
		return err
	}
	if err := c.makeNodeView(ctx, n); err != nil {
		return err
	}
	if err := c.start(ctx, c.nodeDaemon(n, Containerd)); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "containerd on "+n.Name, func() error {
		_, err := c.ctr(ctx, n, "version")
		return err
	}); err != nil {
		return err
	}
	if _, err := c.importImages(ctx, n); err != nil {
		return err
	}
	for _, comp := range []Component{Kubelet, KubeProxy} {
		if err := c.start(ctx, c.nodeDaemon(n, comp)); err != nil {
			return err
		}
	}
	return nil
}
