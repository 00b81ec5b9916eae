// Command benchscale measures metalgate at scale with the real binaries against a real
// kube-apiserver and etcd (envtest assets from KUBEBUILDER_ASSETS): by default 10,000
// LoadBalancer Services, 10,000 Ingresses (one per Service) and 100,000 endpoints (one
// EndpointSlice of 10 ready endpoints per Service). It needs root: the speaker and the proxy run
// in a network namespace of their own.
//
// Phases, one after another, every process left running for the next:
//
//	load        the objects are created by -workers concurrent clients (no client-side limit);
//	controller  `metalgate controller` starts; the time until every Service has an address,
//	            then its RSS;
//	speaker     `metalgate speaker` (cluster mode, layer 2 and BGP on as in the DaemonSet, no
//	            BGPPeer) starts in namespace <prefix>scale-n, a node with eth0 on a veth pair
//	            whose peer is in <prefix>scale-c; the time until it announces every address
//	            (metalgate_speaker_announced), then its RSS, and one ARP answer checked from the
//	            peer namespace when arping is installed;
//	proxy       `metalgate proxy` starts in the same namespace; the time from its start until
//	            /readyz answers 200 (first routing table built from the full caches), its RSS,
//	            then -changes endpoint changes of one more Ingress ("probe", its own ClusterIP
//	            Service with one endpoint): each moves the endpoint to a new backend (a
//	            listener on a 10.250.x.y address inside the namespace answering with its name)
//	            and polls the proxy every millisecond until a request for that host reaches it.
//
// The speaker and the proxy reach the API server through a TCP relay listening on the API
// server's own 127.0.0.1 port inside the namespace, so they use the same kubeconfig. Each
// process's Go heap (go_memstats_heap_inuse_bytes) and the runtime's total (go_memstats_sys_bytes)
// are read from its /metrics next to the RSS, to tell cached objects from runtime overhead.
//
// It prints a table of figure, value, goal, met and ends with
//
//	RESULT controller_rss_mib=… speaker_rss_mib=… proxy_rss_mib=… proxy_ready_s=… endpoint_update_p99_ms=… alloc_10k_s=…
//
// Usage (hack/bench-scale.sh builds the binary and runs this as root):
//
//	go run ./e2e/cmd/benchscale -metalgate bin/metalgate [-services 10000] [-ingresses 10000] [-endpoints-per-service 10] [-changes 100]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/nsexec"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

type options struct {
	Metalgate   string
	CRDs        string
	Services    int
	Ingresses   int
	PerService  int
	Changes     int
	Workers     int
	Namespaces  int
	Prefix      string
	Timeout     time.Duration
	Logs        string
	ControlArgs string
	SpeakerArgs string
	ProxyArgs   string
	Hold        time.Duration
}

// Addresses of the bench. The pool holds the VIPs; the node's eth0 is on the same /15, so every
// VIP is on-link there. Endpoints are 10.64.0.0/14 (never contacted); the probe's backends
// listen on 10.250.0.0/16, local to the namespace's loopback.
const (
	poolCIDR   = "100.64.0.0/16"
	nodeAddr   = "100.65.0.1"
	clientAddr = "100.65.0.2"
	linkPrefix = 15
	backendNet = "10.250.0.1/16"
	nodeName   = "bench-node-1"
	probeNS    = "scale-probe"
	probeHost  = "probe.example.com"
	proxyHTTP  = "127.0.0.1:18080"
	proxyAdmin = "127.0.0.1:18254"
	speakerMet = "127.0.0.1:17472"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("benchscale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Metalgate, "metalgate", "bin/metalgate", "The metalgate binary (controller, speaker and proxy).")
	fs.StringVar(&o.CRDs, "crds", "config/crd/bases", "Directory of the CRD manifests.")
	fs.IntVar(&o.Services, "services", 10000, "LoadBalancer Services.")
	fs.IntVar(&o.Ingresses, "ingresses", -1, "Ingresses, one per Service from the first (default: -services; at most -services).")
	fs.IntVar(&o.PerService, "endpoints-per-service", 10, "Ready endpoints in each Service's EndpointSlice.")
	fs.IntVar(&o.Changes, "changes", 100, "Endpoint changes timed through the proxy.")
	fs.IntVar(&o.Workers, "workers", 64, "Concurrent clients creating the objects.")
	fs.IntVar(&o.Namespaces, "namespaces", 10, "Namespaces the objects are spread over.")
	fs.StringVar(&o.Prefix, "prefix", "bs-", "Prefix of the network namespaces.")
	fs.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "Give up on a phase after this long.")
	fs.StringVar(&o.Logs, "logs", "", "Directory to keep the processes' logs in (default: a temporary directory, printed when a phase fails).")
	fs.StringVar(&o.ControlArgs, "controller-args", "", "Extra flags for the controller, space-separated.")
	fs.StringVar(&o.SpeakerArgs, "speaker-args", "", "Extra flags for the speaker, space-separated.")
	fs.StringVar(&o.ProxyArgs, "proxy-args", "", "Extra flags for the proxy, space-separated.")
	fs.DurationVar(&o.Hold, "hold", 0, "Keep everything running this long after the last phase (to take profiles; SIGINT ends it early).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Ingresses < 0 {
		o.Ingresses = o.Services
	}
	switch {
	case o.Services < 1:
		return fmt.Errorf("-services %d: want at least 1", o.Services)
	case o.Ingresses > o.Services:
		return fmt.Errorf("-ingresses %d: want at most -services (%d): each Ingress routes to its own Service", o.Ingresses, o.Services)
	case o.PerService < 1 || o.PerService > 1000:
		return fmt.Errorf("-endpoints-per-service %d: want 1 to 1000 (one EndpointSlice each)", o.PerService)
	case o.Services*o.PerService > 1<<18:
		return fmt.Errorf("-services × -endpoints-per-service = %d: the endpoint range 10.64.0.0/14 holds %d", o.Services*o.PerService, 1<<18)
	case o.Services > 30000:
		return fmt.Errorf("-services %d: the pool %s and the ClusterIP range hold fewer", o.Services, poolCIDR)
	case o.Changes < 1 || o.Changes > 60000:
		return fmt.Errorf("-changes %d: want 1 to 60000", o.Changes)
	case o.Namespaces < 1:
		return fmt.Errorf("-namespaces %d: want at least 1", o.Namespaces)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: the speaker and the proxy run in a network namespace (sudo hack/bench-scale.sh)")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: it must name the directory with kube-apiserver and etcd (make kube-bin)")
	}
	bin, err := filepath.Abs(o.Metalgate)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("-metalgate %s: %w (make build)", o.Metalgate, err)
	}
	o.Metalgate = bin
	ctrllog.SetLogger(logr.Discard())
	b := &bench{o: o, stderr: stderr}
	defer b.cleanup()
	if err := b.run(ctx); err != nil {
		if b.dir != "" {
			fmt.Fprintf(stderr, "   logs: %s\n", b.dir)
			b.keepDir = true
		}
		return err
	}
	b.print(stdout)
	if o.Hold > 0 {
		b.logf(">> holding for %s (namespace %s, logs %s)", o.Hold, b.nsNode, b.dir)
		select {
		case <-ctx.Done():
		case <-time.After(o.Hold):
		}
	}
	return nil
}

// bench holds what the phases share.
type bench struct {
	o       options
	stderr  io.Writer
	dir     string
	keepDir bool
	env     *envtest.Environment
	c       client.WithWatch
	kubecfg string
	nsNode  string
	nsCli   string
	relay   net.Listener
	procs   []*process
	ns      []string

	// results
	load   time.Duration
	alloc  time.Duration
	first  time.Duration
	ctrl   memInfo
	spk    memInfo
	spkT   time.Duration
	arp    string
	prx    memInfo
	prxMax memInfo
	ready  time.Duration
	lat    []time.Duration
	// write is each change's EndpointSlice update call (part of lat): the API server and
	// etcd's share of a change's latency.
	write []time.Duration
	// appliedP99 is the bucket bound of the proxy's first event → table swapped p99 over the
	// changes (ms; -1 unknown): the proxy's own share.
	appliedP99 float64
	// means over the changes, from the proxy's histograms (ms; -1 unknown)
	builds, applied float64
	// fullBuilds and patches count how the proxy applied the changes (-1 unknown).
	fullBuilds, patches float64
}

// buildLine says where the proxy spent an endpoint change: how many batches were patched
// (the endpoint fast path) and how many built in full, with their means.
func (b *bench) buildLine() string {
	build := "no full build"
	if b.fullBuilds != 0 {
		build = fmt.Sprintf("%.0f full builds, mean %.1f ms", b.fullBuilds, b.builds)
	}
	return fmt.Sprintf("%.0f endpoint patches, %s; mean first event → table swapped %.1f ms (metalgate_proxy_table_patches_total, _builds_total, _build_seconds, _change_applied_seconds)",
		b.patches, build, b.applied)
}

// shareLine splits an endpoint change's latency: the EndpointSlice update call (API server and
// etcd), and the proxy's first event → table swapped (its histogram's p99 bucket bound).
func (b *bench) shareLine() string {
	applied := "unknown"
	if b.appliedP99 >= 0 {
		applied = fmt.Sprintf("≤ %.0f ms", b.appliedP99)
	}
	return fmt.Sprintf("of which the EndpointSlice update call p50 %.1f ms, p99 %.1f ms; the proxy's first event → swapped p99 %s (histogram bucket)",
		pct(b.write, 0.5), pct(b.write, 0.99), applied)
}

// bucketQuantile is the upper bound (ms) of the bucket holding quantile q of the observations
// of histogram name between two scrapes; -1 when unknown or none.
func bucketQuantile(before, after, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	read := func(text string) map[string]float64 {
		out := map[string]float64{}
		prefix := name + `_bucket{le="`
		for _, line := range strings.Split(text, "\n") {
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			le, val, ok := strings.Cut(rest, `"} `)
			if !ok {
				continue
			}
			if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				out[le] = v
			}
		}
		return out
	}
	b0, b1 := read(before), read(after)
	var bs []bucket
	for le, n := range b1 {
		v, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		bs = append(bs, bucket{v, n - b0[le]})
	}
	if len(bs) == 0 {
		return -1
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	total := bs[len(bs)-1].n
	if total <= 0 {
		return -1
	}
	for _, bk := range bs {
		if bk.n >= q*total {
			return bk.le * 1000
		}
	}
	return -1
}

// counterDelta is how much counter name grew between two scrapes; -1 when unknown.
func counterDelta(before, after, name string) float64 {
	v0, ok0 := metric(before, name)
	v1, ok1 := metric(after, name)
	if !ok0 || !ok1 {
		return -1
	}
	return v1 - v0
}

// meanDelta is the mean of the observations of histogram name between two scrapes, in ms.
func meanDelta(before, after, name string) float64 {
	s0, ok0 := metric(before, name+"_sum")
	n0, ok1 := metric(before, name+"_count")
	s1, ok2 := metric(after, name+"_sum")
	n1, ok3 := metric(after, name+"_count")
	if !ok0 || !ok1 || !ok2 || !ok3 || n1 <= n0 {
		return -1
	}
	return (s1 - s0) / (n1 - n0) * 1000
}

func (b *bench) logf(format string, a ...any) { fmt.Fprintf(b.stderr, format+"\n", a...) }

func (b *bench) run(ctx context.Context) error {
	var err error
	if b.o.Logs != "" {
		b.dir, b.keepDir = b.o.Logs, true
		err = os.MkdirAll(b.dir, 0o755)
	} else {
		b.dir, err = os.MkdirTemp("", "benchscale-")
	}
	if err != nil {
		return err
	}
	if err := b.startAPIServer(); err != nil {
		return err
	}
	if err := b.startNetns(); err != nil {
		return err
	}
	if err := b.scene(ctx); err != nil {
		return err
	}
	if err := b.loadObjects(ctx); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := b.controllerPhase(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := b.speakerPhase(ctx); err != nil {
		return fmt.Errorf("speaker: %w", err)
	}
	if err := b.proxyPhase(ctx); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	return nil
}

func (b *bench) startAPIServer() error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	b.env = &envtest.Environment{CRDDirectoryPaths: []string{b.o.CRDs}, ErrorIfCRDPathMissing: true, Scheme: scheme}
	// Every Service needs a ClusterIP (envtest's default range is a /24); the Services ask for
	// no node ports (allocateLoadBalancerNodePorts: false), so the node-port range is no bound.
	b.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := b.env.Start()
	if err != nil {
		b.env = nil
		return fmt.Errorf("start API server: %w", err)
	}
	cfg.QPS = -1 // the bench's own client is not the thing measured
	cfg.Timeout = time.Minute
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	b.kubecfg = filepath.Join(b.dir, "kubeconfig")
	return os.WriteFile(b.kubecfg, b.env.KubeConfig, 0o600)
}

// startNetns creates the node namespace (eth0 on a veth pair to the client namespace, the
// backends' /16 on lo) and the relay to the API server inside it.
func (b *bench) startNetns() error {
	node, cli := b.o.Prefix+"scale-n", b.o.Prefix+"scale-c"
	for _, ns := range []string{node, cli} {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			return fmt.Errorf("network namespace %s exists (another run, or a previous one's leftover: ip netns del %s)", ns, ns)
		}
	}
	// Set only now: cleanup deletes b.nsNode and b.nsCli, never another run's namespaces.
	b.nsNode, b.nsCli = node, cli
	cmds := [][]string{
		{"ip", "netns", "add", b.nsNode},
		{"ip", "netns", "add", b.nsCli},
		{"ip", "-n", b.nsNode, "link", "set", "lo", "up"},
		{"ip", "-n", b.nsCli, "link", "set", "lo", "up"},
		// The kernel must not answer ARP for the VIPs itself (the speaker does).
		{"ip", "netns", "exec", b.nsNode, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"},
		{"ip", "-n", b.nsNode, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b.nsCli},
		{"ip", "-n", b.nsNode, "addr", "add", fmt.Sprintf("%s/%d", nodeAddr, linkPrefix), "dev", "eth0"},
		{"ip", "-n", b.nsCli, "addr", "add", fmt.Sprintf("%s/%d", clientAddr, linkPrefix), "dev", "eth0"},
		{"ip", "-n", b.nsNode, "link", "set", "eth0", "up"},
		{"ip", "-n", b.nsCli, "link", "set", "eth0", "up"},
		// A /16 on lo makes every address in it local: each backend binds a new one.
		{"ip", "-n", b.nsNode, "addr", "add", backendNet, "dev", "lo"},
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	u, err := url.Parse(b.env.Config.Host)
	if err != nil {
		return fmt.Errorf("API server address %q: %w", b.env.Config.Host, err)
	}
	api := u.Host
	if err := nsexec.InNS(b.nsNode, func() error {
		var err error
		b.relay, err = net.Listen("tcp", api)
		return err
	}); err != nil {
		return fmt.Errorf("relay to the API server in %s: %w", b.nsNode, err)
	}
	go relay(b.relay, api)
	return nil
}

// relay copies each connection accepted in the namespace to the API server in the host's.
func relay(ln net.Listener, to string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return // closed at cleanup
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", to)
			if err != nil {
				return // the client sees its connection closed
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			cp := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go cp(out, in)
			go cp(in, out)
			<-done
			<-done
		}()
	}
}

// nsClient returns an HTTP client whose connections are made inside namespace ns.
func nsClient(ns string, timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nsexec.InNS(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 4}}
}

func (b *bench) cleanup() {
	for i := len(b.procs) - 1; i >= 0; i-- {
		b.procs[i].stop()
	}
	if b.relay != nil {
		_ = b.relay.Close()
	}
	for _, ns := range []string{b.nsNode, b.nsCli} {
		if ns != "" {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	if b.env != nil {
		if err := b.env.Stop(); err != nil {
			b.logf("!! stop API server: %v", err)
		}
	}
	if b.dir != "" && !b.keepDir {
		_ = os.RemoveAll(b.dir)
	}
}

// scene creates the namespaces, the pool, the L2Advertisement, the IngressClass, the node and
// its speaker Pod (the quorum base), and the memberlist key file.
func (b *bench) scene(ctx context.Context) error {
	for i := range b.o.Namespaces {
		b.ns = append(b.ns, fmt.Sprintf("scale-%02d", i))
	}
	for _, name := range append([]string{controllers.DefaultNamespace, probeNS}, b.ns...) {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	sys := controllers.DefaultNamespace
	objs := []client.Object{
		&v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "bench"},
			Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{poolCIDR}}},
		&v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "all"}},
		&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"},
			Spec: networkingv1.IngressClassSpec{Controller: proxyingress.ControllerName}},
	}
	for _, obj := range objs {
		if err := b.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T: %w", obj, err)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := b.c.Create(ctx, node); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeAddr}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := b.c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "speaker-" + nodeName,
			Labels: map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "speaker"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "speaker", Image: "metalgate"}}},
	}
	if err := b.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("create speaker pod: %w", err)
	}
	pod.Status.Phase, pod.Status.HostIP = corev1.PodRunning, nodeAddr
	if err := b.c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("speaker pod status: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "memberlist"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, "memberlist", "key"), key, 0o600)
}

// svcName and the other names of object i.
func (b *bench) svcNS(i int) string { return b.ns[i%len(b.ns)] }
func svcName(i int) string          { return fmt.Sprintf("s%05d", i) }
func hostName(i int) string         { return fmt.Sprintf("app%05d.example.com", i) }

// endpointAddr is endpoint j of Service i, in 10.64.0.0/14.
func endpointAddr(k int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+k>>16, k>>8&255, k&255)
}

func service(ns, name string, typ corev1.ServiceType) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if typ == corev1.ServiceTypeLoadBalancer {
		no := false
		s.Spec.AllocateLoadBalancerNodePorts = &no
	}
	return s
}

// slice is Service name's EndpointSlice, as the endpointslice controller writes it.
func slice(ns, name string, addrs ...string) *discoveryv1.EndpointSlice {
	port, proto, pname, ready := int32(8080), corev1.ProtocolTCP, "http", true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: table.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

// ingress routes host (paths / and /api) to Service name's port http.
func ingress(ns, name, host string) *networkingv1.Ingress {
	class, prefix := "metalgate", networkingv1.PathTypePrefix
	var paths []networkingv1.HTTPIngressPath
	for _, p := range []string{"/", "/api"} {
		paths = append(paths, networkingv1.HTTPIngressPath{Path: p, PathType: &prefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}})
	}
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}},
	}
}

// loadObjects creates every Service, EndpointSlice and Ingress with concurrent clients.
func (b *bench) loadObjects(ctx context.Context) error {
	o := b.o
	b.logf(">> load: %d LoadBalancer Services, %d EndpointSlices (%d endpoints), %d Ingresses; %d clients",
		o.Services, o.Services, o.Services*o.PerService, o.Ingresses, o.Workers)
	start := time.Now()
	n := 2*o.Services + o.Ingresses
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Workers)
	for range o.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				var obj client.Object
				switch i := k / 3; {
				case k >= 3*o.Ingresses: // past the Ingresses: Services and slices only
					i = o.Ingresses + (k-3*o.Ingresses)/2
					if (k-3*o.Ingresses)%2 == 0 {
						obj = service(b.svcNS(i), svcName(i), corev1.ServiceTypeLoadBalancer)
					} else {
						obj = b.sliceOf(i)
					}
				case k%3 == 0:
					obj = service(b.svcNS(i), svcName(i), corev1.ServiceTypeLoadBalancer)
				case k%3 == 1:
					obj = b.sliceOf(i)
				default:
					obj = ingress(b.svcNS(i), svcName(i), hostName(i))
				}
				if err := b.c.Create(ctx, obj); err != nil {
					errs <- fmt.Errorf("create %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
					return
				}
				if d := done.Add(1); d%5000 == 0 {
					b.logf("   %d/%d objects, %.0f/s", d, n, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.load = time.Since(start)
	b.logf("   %d objects in %.1fs (%.0f/s)", n, b.load.Seconds(), float64(n)/b.load.Seconds())
	return nil
}

func (b *bench) sliceOf(i int) *discoveryv1.EndpointSlice {
	addrs := make([]string, b.o.PerService)
	for j := range addrs {
		addrs[j] = endpointAddr(i*b.o.PerService + j)
	}
	return slice(b.svcNS(i), svcName(i), addrs...)
}

// controllerPhase starts the controller and waits until every Service has an address.
func (b *bench) controllerPhase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	w, err := watchAddressed(ctx, b.c)
	if err != nil {
		return err
	}
	defer w.stop()
	metrics := freePort()
	args := []string{"controller", "--kubeconfig", b.kubecfg, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0"}
	b.logf(">> controller: %s", strings.Join(args, " "))
	t0 := time.Now()
	p, err := b.start("controller", "", append(args, strings.Fields(b.o.ControlArgs)...))
	if err != nil {
		return err
	}
	first, last, err := w.waitAll(ctx, b.o.Services, p)
	if err != nil {
		return err
	}
	b.first, b.alloc = first.Sub(t0), last.Sub(t0)
	b.logf("   %d Services have addresses %.1fs after the start (first after %.1fs): %.0f/s",
		b.o.Services, b.alloc.Seconds(), b.first.Seconds(), float64(b.o.Services)/b.alloc.Seconds())
	b.ctrl = p.mem(ctx, http.DefaultClient, "http://"+metrics+"/metrics")
	b.logf("   controller: %s", b.ctrl)
	return nil
}

// speakerPhase starts the speaker in the node namespace and waits until it announces every
// address.
func (b *bench) speakerPhase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	args := []string{"speaker", "--kubeconfig", b.kubecfg, "--node-name", nodeName, "--node-ip", nodeAddr,
		"--memberlist-key-dir", filepath.Join(b.dir, "memberlist"), "--metrics-bind-address", speakerMet,
		"--health-probe-bind-address", "0"}
	b.logf(">> speaker (in %s): %s", b.nsNode, strings.Join(args, " "))
	hc, err := b.speakerScraper(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	p, err := b.start("speaker", b.nsNode, append(args, strings.Fields(b.o.SpeakerArgs)...))
	if err != nil {
		return err
	}
	got := 0
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if m, err := scrape(ctx, hc, "http://"+speakerMet+"/metrics"); err == nil {
			got = strings.Count(m, "\nmetalgate_speaker_announced{")
			if got >= b.o.Services {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d addresses announced: %w", got, b.o.Services, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	b.spkT = time.Since(t0)
	b.logf("   %d addresses announced %.1fs after the start", got, b.spkT.Seconds())
	// The gratuitous ARP bursts (3 per address, 100ms apart) and the takeover Events settle.
	time.Sleep(3 * time.Second)
	b.arp = b.checkARP(ctx)
	b.spk = p.mem(ctx, hc, "http://"+speakerMet+"/metrics")
	b.logf("   speaker: %s; %s", b.spk, b.arp)
	return nil
}

// speakerScraper returns a client of the node namespace that sends every request with the token
// of a ServiceAccount that may get /metrics: the speaker's metrics port is on the node's
// network, where loopback is no credential, so it serves no request without one.
func (b *bench) speakerScraper(ctx context.Context) (*http.Client, error) {
	const name = "benchscale-scraper"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}}
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: name}}},
		sa,
	} {
		if err := b.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("speaker scraper: create %T %s: %w", o, name, err)
		}
	}
	tr := &authenticationv1.TokenRequest{}
	if err := b.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("speaker scraper: TokenRequest: %w", err)
	}
	hc := nsClient(b.nsNode, 10*time.Second)
	hc.Transport = bearerTransport{token: tr.Status.Token, next: hc.Transport}
	return hc, nil
}

// bearerTransport sends each request with an "Authorization: Bearer" token.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// checkARP asks the client namespace's arping for one allocated address.
func (b *bench) checkARP(ctx context.Context) string {
	if _, err := exec.LookPath("arping"); err != nil {
		return "ARP not checked (no arping)"
	}
	var s corev1.Service
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.svcNS(b.o.Services - 1), Name: svcName(b.o.Services - 1)}, &s); err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
		return fmt.Sprintf("ARP not checked (last Service: %v)", err)
	}
	vip := s.Status.LoadBalancer.Ingress[0].IP
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", b.nsCli, "arping", "-c", "1", "-w", "2", "-I", "eth0", vip).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ARP for %s FAILED: %v: %s", vip, err, strings.TrimSpace(string(out)))
	}
	return fmt.Sprintf("ARP for %s answered (arping from the peer namespace)", vip)
}

// proxyPhase starts the proxy in the node namespace, times it to ready, then times endpoint
// changes of the probe Ingress.
func (b *bench) proxyPhase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	be, err := b.startBackend(0)
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{service(probeNS, "probe", corev1.ServiceTypeClusterIP), slice(probeNS, "probe", be.addr), ingress(probeNS, "probe", probeHost)} {
		if err := b.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create probe %T: %w", obj, err)
		}
	}
	args := []string{"proxy", "--kubeconfig", b.kubecfg, "--http-bind-address", proxyHTTP, "--https-bind-address", "0",
		"--admin-bind-address", proxyAdmin, "--leader-elect=false", "--affinity-key-secret=-"}
	b.logf(">> proxy (in %s): %s", b.nsNode, strings.Join(args, " "))
	hc := nsClient(b.nsNode, 10*time.Second)
	t0 := time.Now()
	p, err := b.start("proxy", b.nsNode, append(args, strings.Fields(b.o.ProxyArgs)...))
	if err != nil {
		return err
	}
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if code, _, err := get(ctx, hc, "http://"+proxyAdmin+"/readyz", ""); err == nil && code == http.StatusOK {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("never ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	b.ready = time.Since(t0)
	// Ready means the first table is built from synced caches: the probe routes at once.
	if code, body, err := get(ctx, hc, "http://"+proxyHTTP+"/", probeHost); err != nil || body != be.name {
		return fmt.Errorf("ready after %.1fs but %s is not routed to %s: %d %q %v", b.ready.Seconds(), probeHost, be.name, code, body, err)
	}
	b.prx = p.mem(ctx, hc, "http://"+proxyAdmin+"/metrics")
	b.logf("   ready %.2fs after the start; %s", b.ready.Seconds(), b.prx)

	b.logf(">> %d endpoint changes of %s (poll every 1ms until the new backend answers)", b.o.Changes, probeHost)
	before, _ := scrape(ctx, hc, "http://"+proxyAdmin+"/metrics")
	for g := 1; g <= b.o.Changes; g++ {
		nb, err := b.startBackend(g)
		if err != nil {
			return err
		}
		var s discoveryv1.EndpointSlice
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: probeNS, Name: "probe-x"}, &s); err != nil {
			return err
		}
		s.Endpoints[0].Addresses = []string{nb.addr}
		start := time.Now()
		if err := b.c.Update(ctx, &s); err != nil {
			return fmt.Errorf("change %d: %w", g, err)
		}
		b.write = append(b.write, time.Since(start))
		for {
			if _, body, _ := get(ctx, hc, "http://"+proxyHTTP+"/", probeHost); body == nb.name {
				break
			}
			if time.Since(start) > 30*time.Second {
				return fmt.Errorf("change %d not routed after 30s", g)
			}
			time.Sleep(time.Millisecond)
		}
		b.lat = append(b.lat, time.Since(start))
		be.close()
		be = nb
	}
	be.close()
	after, _ := scrape(ctx, hc, "http://"+proxyAdmin+"/metrics")
	b.builds = meanDelta(before, after, "metalgate_proxy_table_build_seconds")
	b.applied = meanDelta(before, after, "metalgate_proxy_change_applied_seconds")
	b.appliedP99 = bucketQuantile(before, after, "metalgate_proxy_change_applied_seconds", 0.99)
	b.fullBuilds = counterDelta(before, after, "metalgate_proxy_table_builds_total")
	b.patches = counterDelta(before, after, "metalgate_proxy_table_patches_total")
	b.prxMax = p.mem(ctx, hc, "http://"+proxyAdmin+"/metrics")
	b.logf("   endpoint update p50 %.1f ms, p99 %.1f ms; proxy: %s; after the changes: %s", pct(b.lat, 0.5), pct(b.lat, 0.99), b.buildLine(), b.prxMax)
	b.logf("   %s", b.shareLine())
	return nil
}

// backend is an HTTP server in the node namespace answering with its name.
type backend struct {
	name, addr string
	srv        *http.Server
}

func (be *backend) close() { _ = be.srv.Close() }

func (b *bench) startBackend(gen int) (*backend, error) {
	addr := fmt.Sprintf("10.250.%d.%d", 1+gen/250, 1+gen%250)
	var ln net.Listener
	if err := nsexec.InNS(b.nsNode, func() error {
		var err error
		ln, err = net.Listen("tcp", addr+":8080")
		return err
	}); err != nil {
		return nil, fmt.Errorf("backend %s: %w", addr, err)
	}
	be := &backend{name: fmt.Sprintf("gen%d", gen), addr: addr}
	be.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, be.name)
	})}
	go func() { _ = be.srv.Serve(ln) }()
	return be, nil
}

// get sends GET u (with Host host unless empty) and returns the status and the body.
func get(ctx context.Context, hc *http.Client, u, host string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20)) // /metrics of 10,000 announcements: megabytes
	return resp.StatusCode, string(body), err
}

func scrape(ctx context.Context, hc *http.Client, u string) (string, error) {
	code, body, err := get(ctx, hc, u, "")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%s: status %d", u, code)
	}
	return "\n" + body, err
}

// addressWatch counts the Services that have an address, in every namespace.
type addressWatch struct {
	mu      sync.Mutex
	seen    map[string]bool
	first   time.Time
	last    time.Time
	err     error
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchAddressed(ctx context.Context, c client.WithWatch) (*addressWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &addressWatch{seen: map[string]bool{}, changed: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	var list corev1.ServiceList
	if err := c.List(ctx, &list); err != nil {
		cancel()
		return nil, fmt.Errorf("list Services: %w", err)
	}
	rv := list.ResourceVersion
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, &corev1.ServiceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				w.note("", fmt.Errorf("watch Services: %w", err))
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					w.note("", fmt.Errorf("watch Services: %v", ev.Object))
					wi.Stop()
					return
				}
				if s, ok := ev.Object.(*corev1.Service); ok {
					rv = s.ResourceVersion
					if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) > 0 {
						w.note(s.Namespace+"/"+s.Name, nil)
					}
				}
			}
		}
	}()
	return w, nil
}

func (w *addressWatch) note(name string, err error) {
	now := time.Now()
	w.mu.Lock()
	if err != nil {
		w.err = err
	} else if !w.seen[name] {
		w.seen[name] = true
		if w.first.IsZero() {
			w.first = now
		}
		w.last = now
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// waitAll waits until n Services have an address, or p exits.
func (w *addressWatch) waitAll(ctx context.Context, n int, p *process) (time.Time, time.Time, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.mu.Lock()
		got, first, last, err := len(w.seen), w.first, w.last, w.err
		w.mu.Unlock()
		if err != nil {
			return first, last, err
		}
		if got >= n {
			return first, last, nil
		}
		if err := p.exited(); err != nil {
			return first, last, err
		}
		select {
		case <-ctx.Done():
			return first, last, fmt.Errorf("%d of %d Services have an address: %w", got, n, ctx.Err())
		case <-w.changed:
		case <-tick.C:
		}
	}
}

func (w *addressWatch) stop() {
	w.cancel()
	<-w.done
}

// process is a running metalgate subcommand.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// start runs the metalgate binary with args, inside network namespace ns unless "".
func (b *bench) start(name, ns string, args []string) (*process, error) {
	logf, err := os.Create(filepath.Join(b.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	argv := append([]string{b.o.Metalgate}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...) // exec'd: the pid is metalgate's
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.procs = append(b.procs, p)
	return p, nil
}

// exited returns an error once the process has ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v (log %s)", p.name, p.err, p.log.Name())
	default:
		return nil
	}
}

func (p *process) stop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = p.log.Close()
}

// memInfo is a process's memory at one moment: RSS and its peak from /proc, the Go heap in use
// and the runtime's total from the process's own metrics.
type memInfo struct {
	rss, hwm, anon, file, heap, sys float64 // MiB; heap and sys -1 when not scraped
}

func (m memInfo) String() string {
	s := fmt.Sprintf("VmRSS %.1f MiB (peak %.1f; anonymous %.1f, file-backed %.1f)", m.rss, m.hwm, m.anon, m.file)
	if m.heap >= 0 {
		s += fmt.Sprintf(", Go heap in use %.1f MiB, Go runtime total %.1f MiB", m.heap, m.sys)
	}
	return s
}

func (p *process) mem(ctx context.Context, hc *http.Client, metricsURL string) memInfo {
	m := memInfo{heap: -1, sys: -1}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err == nil {
		m.rss, m.hwm = statusMiB(string(st), "VmRSS:"), statusMiB(string(st), "VmHWM:")
		// RssFile is mostly the executable's own pages (a 50 MiB binary), shared with every
		// other process running it; RssAnon is the process's own memory.
		m.anon, m.file = statusMiB(string(st), "RssAnon:"), statusMiB(string(st), "RssFile:")
	}
	if text, err := scrape(ctx, hc, metricsURL); err == nil {
		if v, ok := metric(text, "go_memstats_heap_inuse_bytes"); ok {
			m.heap = v / (1 << 20)
		}
		if v, ok := metric(text, "go_memstats_sys_bytes"); ok {
			m.sys = v / (1 << 20)
		}
	}
	return m
}

func statusMiB(status, field string) float64 {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kib / 1024
		}
	}
	return 0
}

// metric returns the value of an unlabelled sample.
func metric(text, name string) (float64, bool) {
	i := strings.Index(text, "\n"+name+" ")
	if i < 0 {
		return 0, false
	}
	line := text[i+len(name)+2:]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	return v, err == nil
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:18472"
	}
	defer l.Close()
	return l.Addr().String()
}

// pct is the q-quantile of d in milliseconds (nearest rank).
func pct(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s)) + 0.5)
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

func (b *bench) print(w io.Writer) {
	o := b.o
	fmt.Fprintf(w, "\n%d LoadBalancer Services, %d Ingresses, %d endpoints (%d per EndpointSlice); real kube-apiserver + etcd (envtest); load phase %.1fs (%d clients)\n",
		o.Services, o.Ingresses, o.Services*o.PerService, o.PerService, b.load.Seconds(), o.Workers)
	p50, p99 := pct(b.lat, 0.5), pct(b.lat, 0.99)
	type row struct {
		figure, value, goal string
		met                 string
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	rows := []row{
		{fmt.Sprintf("controller: all %d Services allocated (s from start)", o.Services), fmt.Sprintf("%.1f", b.alloc.Seconds()), "-", "-"},
		{"controller RSS after allocating all (MiB)", fmt.Sprintf("%.1f", b.ctrl.rss), "-", "-"},
		{fmt.Sprintf("speaker RSS, %d VIPs announced (MiB)", o.Services), fmt.Sprintf("%.1f", b.spk.rss), "< 64", yes(b.spk.rss < 64)},
		{"proxy RSS, ready with the full table (MiB)", fmt.Sprintf("%.1f", b.prx.rss), "< 256", yes(b.prx.rss < 256)},
		{"proxy RSS peak, after the changes (MiB)", fmt.Sprintf("%.1f", b.prxMax.hwm), "< 256", yes(b.prxMax.hwm < 256)},
		{"proxy start → /readyz 200 (s)", fmt.Sprintf("%.2f", b.ready.Seconds()), "-", "-"},
		{fmt.Sprintf("endpoint change → routed, p50 of %d (ms)", len(b.lat)), fmt.Sprintf("%.1f", p50), "-", "-"},
		{fmt.Sprintf("endpoint change → routed, p99 of %d (ms)", len(b.lat)), fmt.Sprintf("%.1f", p99), "< 50", yes(p99 < 50)},
	}
	fmt.Fprintf(w, "%-52s | %9s | %6s | %s\n", "figure", "value", "goal", "met")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 80))
	for _, r := range rows {
		fmt.Fprintf(w, "%-52s | %9s | %6s | %s\n", r.figure, r.value, r.goal, r.met)
	}
	fmt.Fprintf(w, "memory detail: controller %s\n               speaker    %s\n               proxy      %s\n               proxy end  %s\n",
		b.ctrl, b.spk, b.prx, b.prxMax)
	fmt.Fprintf(w, "endpoint changes: %s\n", b.buildLine())
	fmt.Fprintf(w, "endpoint change latency: %s\n", b.shareLine())
	fmt.Fprintf(w, "speaker: all announced %.1fs after its start; %s\n", b.spkT.Seconds(), b.arp)
	fmt.Fprintf(w, "RESULT controller_rss_mib=%.0f speaker_rss_mib=%.0f proxy_rss_mib=%.0f proxy_ready_s=%.2f endpoint_update_p99_ms=%.1f alloc_10k_s=%.1f\n",
		b.ctrl.rss, b.spk.rss, b.prx.rss, b.ready.Seconds(), p99, b.alloc.Seconds())
}
