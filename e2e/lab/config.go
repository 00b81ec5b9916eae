package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// Environment variables that select a lab. The Make targets set them; a test run by hand
// finds the default lab without them.
const (
	EnvPrefix   = "LAB_PREFIX"    // name prefix; default DefaultPrefix
	EnvDir      = "LAB_DIR"       // work dir; default <repo>/_out/lab-<prefix>
	EnvPortBase = "LAB_PORT_BASE" // port base; default derived from the prefix
	EnvKubeBin  = "LAB_KUBE_BIN"  // Kubernetes binaries; default <repo>/bin/k8s-<KubeVersion>
	EnvImageDir = "LAB_IMAGES"    // image tarballs; default <repo>/_out/images
)

// DefaultPrefix names the lab when LAB_PREFIX is unset.
const DefaultPrefix = "mg-"

// KubeVersion is the Kubernetes release the lab runs (the last minor that supports cgroup v1
// with containerd 1.x; see hack/k8s/go.mod).
const KubeVersion = "v1.35.4"

// Config says which lab to build or open and where its files are. The zero value is not
// usable; get one from ConfigFromEnv or Open.
type Config struct {
	// Prefix starts the name of every namespace, root-namespace link and cgroup of the lab.
	Prefix string `json:"prefix"`
	// Dir holds the lab's state: configs, certificates, pidfiles, logs, containerd roots.
	Dir string `json:"dir"`
	// PortBase is the API server port and picks the /64 of the user link, so two labs with
	// different bases never clash. Between 20000 and 60000.
	PortBase int `json:"portBase"`
	// KubeBin holds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
	// kube-proxy and kubectl.
	KubeBin string `json:"kubeBin"`
	// ImageDir holds the image tarballs (pause.tar, metalgate.tar, echo.tar).
	ImageDir string `json:"imageDir"`
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,6}-?$`)

// ConfigFromEnv builds the Config from the LAB_* variables and defaults. The repository root
// is found by walking up from the working directory to go.mod.
func ConfigFromEnv() (Config, error) {
	c := Config{Prefix: DefaultPrefix}
	if v, ok := os.LookupEnv(EnvPrefix); ok {
		c.Prefix = v
	}
	if !prefixRE.MatchString(c.Prefix) {
		return Config{}, fmt.Errorf("%s=%q: want 1-7 lower-case letters or digits, starting with a letter, optionally ending in '-' (link names are limited to 15 bytes)", EnvPrefix, c.Prefix)
	}
	root, err := repoRoot()
	if err != nil && (os.Getenv(EnvDir) == "" || os.Getenv(EnvKubeBin) == "" || os.Getenv(EnvImageDir) == "") {
		return Config{}, err
	}
	c.Dir = envOr(EnvDir, filepath.Join(root, "_out", "lab-"+c.Prefix))
	c.KubeBin = envOr(EnvKubeBin, filepath.Join(root, "bin", "k8s-"+KubeVersion))
	c.ImageDir = envOr(EnvImageDir, filepath.Join(root, "_out", "images"))
	if v := os.Getenv(EnvPortBase); v != "" {
		if c.PortBase, err = strconv.Atoi(v); err != nil {
			return Config{}, fmt.Errorf("%s=%q: %w", EnvPortBase, v, err)
		}
	} else {
		h := fnv.New32a()
		h.Write([]byte(c.Prefix))
		c.PortBase = 20000 + int(h.Sum32()%4000)*10
	}
	if c.PortBase < 20000 || c.PortBase >= 60000 {
		return Config{}, fmt.Errorf("%s=%d: want 20000 <= base < 60000", EnvPortBase, c.PortBase)
	}
	for _, p := range []*string{&c.Dir, &c.KubeBin, &c.ImageDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return Config{}, fmt.Errorf("absolute path: %w", err)
		}
	}
	return c, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: set LAB_DIR, LAB_KUBE_BIN and LAB_IMAGES")
		}
		dir = parent
	}
}

// stateFile is where Up records the Config of a running lab, for Open and Down.
func (c Config) stateFile() string { return filepath.Join(c.Dir, "lab.json") }

func (c Config) writeState() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.stateFile(), append(b, '\n'), 0o644)
}

// Addresses and ranges of every lab. Only documentation ranges (RFC 5737, RFC 3849) and the
// VIP pool (shared address space, RFC 6598) appear; nothing here is routed beyond the lab.
var (
	// SegmentV4 and SegmentV6 are the layer-2 segment of router, control plane, nodes and client.
	SegmentV4 = netip.MustParsePrefix("198.51.100.0/24")
	SegmentV6 = netip.MustParsePrefix("2001:db8::/64")
	// ServiceCIDRv4 and ServiceCIDRv6 are the ClusterIP ranges (dual-stack Services work).
	ServiceCIDRv4 = netip.MustParsePrefix("203.0.113.0/25")
	ServiceCIDRv6 = netip.MustParsePrefix("2001:db8:2::/112")
	// PodCIDRv4 and PodCIDRv6 hold every node's pod range: a /27 and a /64 each. Not
	// 192.0.2.0/24: machines of this workplace use it for their uplink.
	PodCIDRv4 = netip.MustParsePrefix("203.0.113.128/25")
	PodCIDRv6 = netip.MustParsePrefix("2001:db8:1::/48")
	// VIPPool is the range the tests hand to IPAddressPools.
	VIPPool = netip.MustParsePrefix("100.64.0.0/16")
	// APIServiceIP is the ClusterIP of the kubernetes Service (first address of the range).
	APIServiceIP = netip.MustParseAddr("203.0.113.1")
)

// BGP autonomous systems: the router's, and the one the nodes' speakers use.
const (
	RouterASN = 64500
	NodeASN   = 64512
)

// NodeCount is the number of Kubernetes nodes.
const NodeCount = 3

// Host is one namespace on the segment.
type Host struct {
	// Name is the short name ("router", "cp", "client", "n1"); the namespace is Prefix+Name.
	Name string
	// IPv4 and IPv6 are the host's addresses on eth0.
	IPv4, IPv6 netip.Addr
	// MAC is eth0's fixed hardware address, 02:00:00:00:00:<last IPv4 octet>.
	MAC string
}

// Node is a Kubernetes node of the lab.
type Node struct {
	Host
	// Index is 1, 2 or 3.
	Index int
	// PodCIDRv4 and PodCIDRv6 are the node's pod ranges.
	PodCIDRv4, PodCIDRv6 netip.Prefix
	// ProxyMode is kube-proxy's mode on this node: "iptables" or "nftables".
	ProxyMode string
}

func host(name string, octet byte) Host {
	return Host{
		Name: name,
		IPv4: netip.AddrFrom4([4]byte{198, 51, 100, octet}),
		// Same digits as IPv4 (2001:db8::11 for .11); they read as hex, which is fine.
		IPv6: netip.MustParseAddr(fmt.Sprintf("2001:db8::%d", octet)),
		MAC:  fmt.Sprintf("02:00:00:00:00:%02x", octet),
	}
}

// Router, ControlPlane and Client are the non-node hosts on the segment.
var (
	Router       = host("router", 1)
	ControlPlane = host("cp", 2)
	Client       = host("client", 100)
)

// Nodes returns the lab's nodes n1..n3. Node 3 runs kube-proxy in nftables mode, the others in
// iptables mode, so both data planes are exercised.
func Nodes() []Node {
	nodes := make([]Node, NodeCount)
	for i := range nodes {
		idx := i + 1
		mode := "iptables"
		if idx == 3 {
			mode = "nftables"
		}
		nodes[i] = Node{
			Host:      host(fmt.Sprintf("n%d", idx), byte(10+idx)),
			Index:     idx,
			PodCIDRv4: netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(128 + 32*i)}), 27),
			PodCIDRv6: netip.MustParsePrefix(fmt.Sprintf("2001:db8:1:%d::/64", idx)),
			ProxyMode: mode,
		}
	}
	return nodes
}

// NodeByName returns the node called name ("n1").
func NodeByName(name string) (Node, error) {
	for _, n := range Nodes() {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("no lab node %q (have n1..n%d)", name, NodeCount)
}

// Hosts returns every host on the segment: router, control plane, nodes, client.
func Hosts() []Host {
	hs := []Host{Router, ControlPlane}
	for _, n := range Nodes() {
		hs = append(hs, n.Host)
	}
	return append(hs, Client)
}

// Namespace returns the network namespace name of a host ("client" -> "mg-client").
func (c Config) Namespace(hostName string) string { return c.Prefix + hostName }

// bridgeNS is the namespace that owns the segment's bridge.
func (c Config) bridgeNS() string { return c.Prefix + "net" }

// userLink is the root-namespace end of the veth to the control plane.
func (c Config) userLink() string { return c.Prefix + "api" }

// userNet is the /64 of the user link: 2001:db8:ffff:<PortBase as hex>::/64.
func (c Config) userNet() netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("2001:db8:ffff:%x::/64", c.PortBase))
}

// UserAPIAddr is the API server's address as seen from the root namespace.
func (c Config) UserAPIAddr() netip.Addr {
	a := c.userNet().Addr().As16()
	a[15] = 2
	return netip.AddrFrom16(a)
}

func (c Config) userRootAddr() netip.Addr {
	a := c.userNet().Addr().As16()
	a[15] = 1
	return netip.AddrFrom16(a)
}

// APIPort is the API server's secure port.
func (c Config) APIPort() int { return c.PortBase }

// APIServerURL is the API server URL for the root namespace (kubectl, tests).
func (c Config) APIServerURL() string {
	return fmt.Sprintf("https://[%s]:%d", c.UserAPIAddr(), c.APIPort())
}

// inClusterAPIServerURL is the API server URL that nodes use, on the segment.
func (c Config) inClusterAPIServerURL() string {
	return fmt.Sprintf("https://%s:%d", ControlPlane.IPv4, c.APIPort())
}

// KubeconfigPath is the admin kubeconfig for the user and the tests.
func (c Config) KubeconfigPath() string { return filepath.Join(c.Dir, "kubeconfig") }

// Kubectl is the path of the lab's kubectl (the one built with the cluster's version).
func (c Config) Kubectl() string { return filepath.Join(c.KubeBin, "kubectl") }

// cgroupName is the kubelet cgroup root of a node in every v1 hierarchy.
func (c Config) cgroupName(node string) string { return c.Prefix + node }

// podNetwork is the CNI network name of the lab's pods; it names CNI cache files too.
func (c Config) podNetwork() string { return c.Prefix + "pods" }

func (c Config) pkiDir() string             { return filepath.Join(c.Dir, "pki") }
func (c Config) logDir() string             { return filepath.Join(c.Dir, "logs") }
func (c Config) runDir() string             { return filepath.Join(c.Dir, "run") }
func (c Config) nodeDir(node string) string { return filepath.Join(c.Dir, node) }

// frrRunRoot holds every lab's FRR directory.
const frrRunRoot = "/run/metalgate-lab"

// frrDir holds the router's FRR configuration, sockets, pid files and logs. It is not in the
// lab dir: FRR runs as user frr, which cannot reach a lab dir below a private directory (a
// clone in /root, or in a `mktemp -d` directory, both mode 0700).
func (c Config) frrDir() string { return filepath.Join(frrRunRoot, c.Prefix+"frr") }

// FRRDir is the router's FRR directory: vtysh --vty_socket FRRDir.
func (c Config) FRRDir() string { return c.frrDir() }

// frrLog is the log file of one FRR daemon (in frrDir, for the same reason).
func (c Config) frrLog(daemon string) string { return filepath.Join(c.frrDir(), daemon+".log") }
func (c Config) sysctlFile() string          { return filepath.Join(c.Dir, "host-sysctls.json") }
func (c Config) containerdSock(n string) string {
	return filepath.Join(c.nodeDir(n), "containerd.sock")
}
