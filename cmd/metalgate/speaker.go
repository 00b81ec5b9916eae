package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/adminauth"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/claims"
	"github.com/metalgate/metalgate/speaker/cluster"
	"github.com/metalgate/metalgate/speaker/config"
	"github.com/metalgate/metalgate/speaker/election"
	"github.com/metalgate/metalgate/speaker/layer2"
	"github.com/metalgate/metalgate/speaker/membership"
)

// speakerOptions are the flags of `metalgate speaker`.
type speakerOptions struct {
	Kubeconfig         string
	NodeName           string
	NodeIP             string
	BGP                bool
	Namespace          string
	LBClass            string
	SpeakerSelector    string
	MemberlistPort     int
	MemberlistKeyDir   string
	MetricsAddr        string
	HealthAddr         string
	StaticConfig       string
	GratuitousCount    int
	GratuitousInterval time.Duration
	QPS                float64
	Burst              int
	L2Hold             time.Duration
	HoldDir            string
	PodName            string
	Zap                zap.Options
	MemoryLimitRatio   float64
}

func (o *speakerOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Default: in-cluster config, else $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "Name of this node (Downward API spec.nodeName). Default: $NODE_NAME.")
	fs.StringVar(&o.NodeIP, "node-ip", os.Getenv("NODE_IP"), "Address memberlist binds to (Downward API status.hostIP). Default: $NODE_IP, else the node's first InternalIP.")
	fs.StringVar(&o.Namespace, "namespace", "metalgate-system", "Namespace of IPAddressPools, L2Advertisements and the speaker Pods.")
	fs.StringVar(&o.LBClass, "lb-class", controllers.DefaultLBClass, "spec.loadBalancerClass served, besides Services with no class.")
	fs.StringVar(&o.SpeakerSelector, "speaker-selector", "app.kubernetes.io/name=metalgate,app.kubernetes.io/component=speaker", "Label selector of the speaker Pods (memberlist peers and quorum base).")
	fs.IntVar(&o.MemberlistPort, "memberlist-port", 7946, "UDP and TCP port of memberlist, the same on every node.")
	fs.StringVar(&o.MemberlistKeyDir, "memberlist-key-dir", "/etc/metalgate/memberlist", "Directory with the speaker cluster's keys: file \"key\" (primary), files \"key-*\" (also accepted); the DaemonSet mounts the Secret metalgate-memberlist here. Re-read every 10s (rotation, docs/speaker.md).")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", fmt.Sprintf(":%d", contract.SpeakerMetricsPort), "Address of /metrics and /debug/announcements: served to a bearer token the API server authorises for the path, loopback included (host network: loopback is any process on the node). With --static-config (no API server) served to loopback only, any process on the node: a lab mode. \"0\" disables it.")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":7473", "Address of /healthz and /readyz; \"0\" disables them.")
	fs.StringVar(&o.StaticConfig, "static-config", "", "Run without the API server from this JSON file (lab and benchmarks; see docs/speaker.md). The metrics port then answers any process on the node (loopback) without a token.")
	fs.IntVar(&o.GratuitousCount, "gratuitous-count", 3, "Gratuitous ARP / unsolicited NA sent per address on takeover.")
	fs.DurationVar(&o.GratuitousInterval, "gratuitous-interval", 100*time.Millisecond, "Interval between gratuitous sends.")
	fs.BoolVar(&o.BGP, "bgp", true, "Advertise BGP VIPs to the BGPPeers selecting this node (not in --static-config mode).")
	fs.Float64Var(&o.QPS, "kube-api-qps", 20, "Requests per second to the API server (client-side limit).")
	fs.IntVar(&o.Burst, "kube-api-burst", 40, "Burst of requests to the API server (client-side limit).")
	fs.DurationVar(&o.L2Hold, "l2-hold", 10*time.Second, fmt.Sprintf("How long this node keeps its layer-2 VIPs when its speaker is replaced by the DaemonSet's rollout (asked of the API server at SIGTERM): nobody takes them over until the new speaker resumes them or this ends. 0 disables it; at most %v.", claims.MaxHold))
	fs.StringVar(&o.HoldDir, "hold-dir", "/var/lib/metalgate/speaker", "Directory on the node (hostPath) where a speaker leaving with a hold writes it for its replacement; \"\" disables the hand-over file (the others still hold, the replacement does not resume).")
	fs.StringVar(&o.PodName, "pod-name", os.Getenv("POD_NAME"), "Name of this speaker's Pod (Downward API metadata.name), in --namespace: read at SIGTERM to tell a rollout from other deletions. Default: $POD_NAME; empty: never a hold.")
	o.Zap.BindFlags(fs)
	bindMemoryLimit(fs, &o.MemoryLimitRatio)
}

func speakerCommand(ctx context.Context, args []string, stderr io.Writer) error {
	var opts speakerOptions
	if err := parseFlags("speaker", args, stderr, opts.bind); err != nil {
		return err
	}
	if opts.NodeName == "" {
		fmt.Fprintln(stderr, "metalgate speaker: --node-name (or $NODE_NAME) is required")
		return errUsage
	}
	if opts.L2Hold < 0 || opts.L2Hold > claims.MaxHold {
		return fmt.Errorf("--l2-hold %v: want 0 (off) up to %v", opts.L2Hold, claims.MaxHold)
	}
	ctx, err := start(ctx, &opts.Zap, opts.MemoryLimitRatio, stderr)
	if err != nil {
		return err
	}
	return runSpeaker(ctx, opts)
}

// staticConfig is the --static-config file: a fixed World for labs and benchmarks.
type staticConfig struct {
	// Speakers are the node names of all speakers (the quorum base); every one may announce.
	Speakers []string `json:"speakers"`
	// Peers are memberlist addresses "ip:port" to join.
	Peers []string `json:"peers"`
	// NodeIPs are this node's addresses for the off-subnet interface fallback.
	NodeIPs []string `json:"nodeIPs,omitempty"`
	// Addresses are the node addresses of every speaker, by name: only these may be members.
	Addresses map[string][]string `json:"addresses"`
	// VIPs are the addresses announced at layer 2.
	VIPs []struct {
		VIP        string   `json:"vip"`
		Service    string   `json:"service"`
		Interfaces []string `json:"interfaces,omitempty"`
	} `json:"vips"`
}

func loadStatic(path string) (speaker.World, []netip.Addr, error) {
	var w speaker.World
	b, err := os.ReadFile(path)
	if err != nil {
		return w, nil, err
	}
	var sc staticConfig
	if err := json.Unmarshal(b, &sc); err != nil {
		return w, nil, fmt.Errorf("parse %s: %w", path, err)
	}
	w.Speakers, w.Peers = sc.Speakers, sc.Peers
	for _, n := range sc.Speakers {
		w.Nodes = append(w.Nodes, election.Node{Name: n})
	}
	if len(sc.Addresses) == 0 {
		return w, nil, fmt.Errorf("%s: addresses: required (node name → addresses of every speaker: who may be a member)", path)
	}
	w.SpeakerAddrs = map[string][]netip.Addr{}
	for n, as := range sc.Addresses {
		for _, s := range as {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return w, nil, fmt.Errorf("%s: addresses: %s: %w", path, n, err)
			}
			w.SpeakerAddrs[n] = append(w.SpeakerAddrs[n], a.Unmap())
		}
	}
	for _, v := range sc.VIPs {
		a, err := netip.ParseAddr(v.VIP)
		if err != nil {
			return w, nil, fmt.Errorf("%s: vip: %w", path, err)
		}
		w.VIPs = append(w.VIPs, speaker.VIP{
			Request: election.Request{VIP: a.Unmap(), AnyReady: true}, Mode: speaker.ModeLayer2,
			Service: v.Service, Params: layer2.Params{Interfaces: v.Interfaces},
		})
	}
	var ips []netip.Addr
	for _, s := range sc.NodeIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return w, nil, fmt.Errorf("%s: nodeIPs: %w", path, err)
		}
		ips = append(ips, a.Unmap())
	}
	return w, ips, nil
}

// runSpeaker runs the speaker until ctx ends, then hands its addresses over: from the API
// server, or from --static-config (labs and benchmarks).
func runSpeaker(ctx context.Context, opts speakerOptions) error {
	if opts.StaticConfig != "" {
		return runStaticSpeaker(ctx, opts)
	}
	return runClusterSpeaker(ctx, opts)
}

// runClusterSpeaker runs the speaker from the API server: the World is rebuilt on every change
// (speaker/cluster), both modes run (BGP unless --bgp=false or no IPv4 router ID), takeovers are
// Events, and each node writes its entry of BGPPeer.status.
func runClusterSpeaker(ctx context.Context, opts speakerOptions) error {
	ref := &speakerRef{}
	mgr, nodeIPs, err := newSpeakerManager(ctx, &opts, ref)
	if err != nil {
		return err
	}
	env, err := newSpeakerEnv(ctx, &opts, metrics.Registry, nodeIPs, ref)
	if err != nil {
		return err
	}
	mem, keys, err := env.membership(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = mem.Shutdown() }() // a no-op after Run left
	announcers := map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: env.layer2()}
	bs, err := env.bgp()
	if err != nil {
		return err
	}
	if bs != nil {
		announcers[speaker.ModeBGP] = bgp.NewAnnouncer(bs)
	}
	recorder := mgr.GetEventRecorder("metalgate-speaker")
	onTakeover, err := cluster.TakeoverEvents(cluster.TakeoverEventsOptions{
		Client: mgr.GetClient(), Recorder: recorder, Node: opts.NodeName,
		Logger: env.log.WithName("takeover-events"), Registerer: env.reg,
	})
	if err != nil {
		return err
	}
	env.holdOnStop, env.holdDir = holdOnStop(opts, mgr.GetAPIReader(), env.log.WithName("hold")), opts.HoldDir
	sp, err := env.speaker(mem, keys, announcers, onTakeover)
	if err != nil {
		return err
	}
	var bgpStatus *cluster.BGPStatus
	if bs != nil {
		// Each speaker writes its own node's entry of BGPPeer.status.nodes.
		bgpStatus, err = cluster.NewBGPStatus(cluster.BGPStatusOptions{
			Node: opts.NodeName, Namespace: opts.Namespace, Client: mgr.GetClient(), Source: bs,
			Recorder: recorder, Logger: env.log.WithName("bgp-status"), Registerer: env.reg,
		})
		if err == nil {
			err = mgr.Add(bgpStatus)
		}
		if err != nil {
			return fmt.Errorf("bgp status: %w", err)
		}
		ref.status.Store(bgpStatus)
	}
	sel, _ := labels.Parse(opts.SpeakerSelector) // validated in newSpeakerManager
	if err := cluster.Setup(mgr, &cluster.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Speaker: sp, BGPStatus: bgpStatus, Opts: cluster.Options{
		Namespace: opts.Namespace, SpeakerSelector: sel,
		Build: config.Options{LBClass: opts.LBClass, MemberlistPort: opts.MemberlistPort, Node: opts.NodeName},
	}}); err != nil {
		return fmt.Errorf("set up watches: %w", err)
	}
	// The speaker loop runs as a manager runnable: it ends (leave, stop answering) when the
	// manager's context ends, before the manager returns.
	if err := mgr.Add(manager.RunnableFunc(sp.Run)); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// runStaticSpeaker runs the speaker from the --static-config World: layer 2 only, no API
// server, metrics on their own registry and listener.
func runStaticSpeaker(ctx context.Context, opts speakerOptions) error {
	w, nodeIPs, err := loadStatic(opts.StaticConfig)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	env, err := newSpeakerEnv(ctx, &opts, reg, nodeIPs, &speakerRef{})
	if err != nil {
		return err
	}
	mem, keys, err := env.membership(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = mem.Shutdown() }() // a no-op after Run left
	sp, err := env.speaker(mem, keys, map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: env.layer2()}, nil)
	if err != nil {
		return err
	}
	sp.SetWorld(w)
	defer serveMetrics(opts.MetricsAddr, reg, sp.DebugHandler(), env.log)()
	return sp.Run(ctx)
}

// rolloutDeadline bounds the API reads at SIGTERM that tell a rollout from other deletions
// (the pod's grace period is 5 s; the leave takes up to 1 s after it).
const rolloutDeadline = time.Second

// holdOnStop is speaker.Options.HoldOnStop in a cluster: --l2-hold when the API server says,
// within rolloutDeadline, that this pod is replaced by its DaemonSet's rollout
// (cluster.DetectRollout); 0 (a plain leave) otherwise, and when --l2-hold is 0 or the pod's
// name is unknown.
func holdOnStop(opts speakerOptions, r client.Reader, log logr.Logger) func(context.Context) time.Duration {
	if opts.L2Hold <= 0 || opts.PodName == "" {
		return nil
	}
	return func(ctx context.Context) time.Duration {
		ro, err := cluster.DetectRollout(ctx, r, opts.Namespace, opts.PodName, rolloutDeadline)
		if err != nil {
			log.Error(err, "Could not tell whether a rollout replaces this speaker; leaving without a hold")
			return 0
		}
		log.Info("leaving", "replacedByRollout", ro.Replaced, "reason", ro.Reason)
		if !ro.Replaced {
			return 0
		}
		return opts.L2Hold
	}
}

// speakerRef reaches the Speaker (and the BGP status writer) from the parts built before it:
// the membership's change callback, the layer-2 gate, the debug endpoint, BGP session changes.
// Until they exist it does nothing, answers "no" and 503.
type speakerRef struct {
	sp     atomic.Pointer[speaker.Speaker]
	status atomic.Pointer[cluster.BGPStatus]
}

func (r *speakerRef) membershipChanged() {
	if sp := r.sp.Load(); sp != nil {
		sp.MembershipChanged()
	}
}

func (r *speakerRef) mayAnnounce() bool {
	sp := r.sp.Load()
	return sp != nil && sp.MayAnnounce()
}

func (r *speakerRef) bgpStateChanged(string) {
	if st := r.status.Load(); st != nil {
		st.Kick() // a session changed state: report it now
	}
}

// ServeHTTP serves the Speaker's debug endpoint.
func (r *speakerRef) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sp := r.sp.Load()
	if sp == nil {
		http.Error(w, "speaker not started yet", http.StatusServiceUnavailable)
		return
	}
	sp.DebugHandler().ServeHTTP(w, req)
}

// speakerEnv is what the parts of a speaker are built from, both ways of running.
type speakerEnv struct {
	opts    *speakerOptions
	log     logr.Logger
	reg     metrics.RegistererGatherer
	nodeIPs []netip.Addr
	ref     *speakerRef
	// holdOnStop and holdDir are speaker.Options.HoldOnStop and HoldDir (cluster mode only:
	// the rollout is told by the API server).
	holdOnStop func(context.Context) time.Duration
	holdDir    string
}

// newSpeakerEnv settles the node's addresses: --node-ip defaults to the first of nodeIPs (the
// node's InternalIPs, or the static file's nodeIPs), and nodeIPs to --node-ip.
func newSpeakerEnv(ctx context.Context, opts *speakerOptions, reg metrics.RegistererGatherer, nodeIPs []netip.Addr, ref *speakerRef) (*speakerEnv, error) {
	if opts.NodeIP == "" {
		if len(nodeIPs) == 0 {
			return nil, errors.New("no --node-ip and the node has no InternalIP")
		}
		opts.NodeIP = nodeIPs[0].String()
	}
	if ip, err := netip.ParseAddr(opts.NodeIP); err == nil && len(nodeIPs) == 0 {
		nodeIPs = []netip.Addr{ip.Unmap()}
	}
	if err := version.RegisterBuildInfo(reg); err != nil {
		return nil, err
	}
	return &speakerEnv{opts: opts, log: logr.FromContextOrDiscard(ctx), reg: reg, nodeIPs: nodeIPs, ref: ref}, nil
}

// membership joins nothing yet (the Speaker joins the World's peers); it is keyed from
// --memberlist-key-dir, re-read until ctx ends. The caller shuts it down.
func (e *speakerEnv) membership(ctx context.Context) (*membership.Membership, membership.Keys, error) {
	log := e.log.WithName("memberlist")
	keys, err := membership.ReadKeyDir(e.opts.MemberlistKeyDir)
	if err != nil {
		return nil, keys, fmt.Errorf("--memberlist-key-dir: %w (the DaemonSet mounts the Secret metalgate-memberlist, which the controller creates)", err)
	}
	mem, err := membership.New(membership.Options{
		Name: e.opts.NodeName, BindAddr: e.opts.NodeIP, BindPort: e.opts.MemberlistPort, Logger: log,
		Keys: keys, Metrics: membership.NewMetrics(e.reg), OnChange: e.ref.membershipChanged,
	})
	if err != nil {
		return nil, keys, err
	}
	go watchKeys(ctx, e.opts.MemberlistKeyDir, keys, mem, log, 10*time.Second)
	return mem, keys, nil
}

// layer2 returns the ModeLayer2 announcer: it answers only while the Speaker has quorum.
func (e *speakerEnv) layer2() speaker.Announcer {
	return layer2.New(layer2.Options{
		NodeIPs: e.nodeIPs, Logger: e.log.WithName("layer2"), Metrics: layer2.NewMetrics(e.reg),
		GratuitousCount: e.opts.GratuitousCount, GratuitousInterval: e.opts.GratuitousInterval,
		Gate: e.ref.mayAnnounce,
	})
}

// bgp returns the node's BGP speaker, or nil when BGP is off on this node (--bgp=false, or no
// IPv4 address for the router ID). Every node advertises to the BGPPeers that select it; the
// library opens no session before the first SetAdvertisements, which the first Sync makes.
func (e *speakerEnv) bgp() (*bgp.Speaker, error) {
	if !e.opts.BGP {
		return nil, nil
	}
	i := slices.IndexFunc(e.nodeIPs, netip.Addr.Is4)
	if i < 0 {
		e.log.Info("BGP disabled: the node has no IPv4 InternalIP for the router ID")
		return nil, nil
	}
	bs, err := bgp.New(e.log.WithName("bgp"), bgp.Options{RouterID: e.nodeIPs[i], ListenPort: -1, Registerer: e.reg,
		OnStateChange: e.ref.bgpStateChanged})
	if err != nil {
		return nil, fmt.Errorf("bgp: %w", err)
	}
	return bs, nil
}

// speaker returns the Speaker over mem and announcers and makes it reachable through e.ref.
func (e *speakerEnv) speaker(mem *membership.Membership, keys membership.Keys, announcers map[speaker.Mode]speaker.Announcer, onTakeover func(speaker.Takeover)) (*speaker.Speaker, error) {
	o := speaker.Options{
		Node: e.opts.NodeName, Membership: mem, Claims: mem, Logger: e.log.WithName("speaker"), Metrics: speaker.NewMetrics(e.reg),
		Announcers: announcers, OnTakeover: onTakeover, HoldOnStop: e.holdOnStop, HoldDir: e.holdDir,
	}
	sp, err := speaker.New(o)
	if err != nil {
		return nil, err
	}
	e.ref.sp.Store(sp)
	e.log.Info("starting speaker", "version", version.Get().Version, "node", e.opts.NodeName, "nodeIP", e.opts.NodeIP,
		"memberlistPort", e.opts.MemberlistPort, "memberlistKey", membership.Fingerprint(keys.Primary), "static", e.opts.StaticConfig != "")
	return sp, nil
}

// newSpeakerManager creates the controller-runtime manager (no leader election: every node
// runs) and returns the node's InternalIPs, read once with an uncached client.
func newSpeakerManager(ctx context.Context, opts *speakerOptions, debug http.Handler) (manager.Manager, []netip.Addr, error) {
	sel, err := labels.Parse(opts.SpeakerSelector)
	if err != nil {
		return nil, nil, fmt.Errorf("--speaker-selector: %w", err)
	}
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = float32(opts.QPS), opts.Burst
	cfg.UserAgent = "metalgate-speaker/" + version.Get().Version
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("register metalgate types: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logr.FromContextOrDiscard(ctx),
		// /metrics and /debug/announcements answer bearer tokens authorised for the path only
		// (Prometheus; kubectl metalgate with a metalgate-debug-reader token): speakerGuardOptions.
		Metrics: metricsserver.Options{BindAddress: opts.MetricsAddr,
			ExtraHandlers:  map[string]http.Handler{contract.DebugAnnouncementsPath: debug},
			FilterProvider: adminauth.FilterProvider(speakerGuardOptions(metrics.Registry, logr.FromContextOrDiscard(ctx)))},
		HealthProbeBindAddress: opts.HealthAddr,
		Cache:                  cluster.CacheOptions(cluster.Options{Namespace: opts.Namespace, SpeakerSelector: sel}),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, fmt.Errorf("add readyz: %w", err)
	}
	var node corev1.Node
	if err := mgr.GetAPIReader().Get(ctx, types.NamespacedName{Name: opts.NodeName}, &node); err != nil {
		return nil, nil, fmt.Errorf("get node %s: %w", opts.NodeName, err)
	}
	var ips []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			ips = append(ips, ip.Unmap())
		}
	}
	return mgr, ips, nil
}

// speakerGuardOptions guard the cluster speaker's metrics port. The speaker runs on the host
// network, where loopback is every process on the node (and every host-network pod): no
// loopback bypass, every caller needs a token the API server authorises for the path.
func speakerGuardOptions(reg prometheus.Registerer, log logr.Logger) adminauth.Options {
	opts := adminGuardOptions(nil, reg, log)
	opts.HostNetwork = true
	return opts
}

// serveMetrics serves /metrics from reg and the debug endpoint on addr for --static-config
// (labs and benchmarks): no API server to check tokens with, so it answers loopback — on the
// host network, any process on the node — and refuses everyone else. The returned func stops
// it.
func serveMetrics(addr string, reg metrics.RegistererGatherer, debug http.Handler, log logr.Logger) func() {
	if addr == "" || addr == "0" {
		return func() {}
	}
	guard, err := adminGuard(nil, nil, reg, log)
	if err != nil {
		log.Error(err, "Metrics listener failed")
		return func() {}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle(contract.DebugAnnouncementsPath, debug)
	srv := &http.Server{Addr: addr, Handler: guard.Wrap(mux), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error(err, "Metrics listener failed")
		return func() {}
	}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}

// watchKeys re-reads the key directory every interval until ctx ends and hands changed keys to
// the membership: the kubelet updates a mounted Secret in place, so a rotation needs no
// restart (docs/speaker.md, "Rotating the key"). A directory that cannot be read keeps the
// keys in use.
func watchKeys(ctx context.Context, dir string, cur membership.Keys, mem *membership.Membership, log logr.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k, err := membership.ReadKeyDir(dir)
		if err != nil {
			log.Error(err, "Reading the memberlist keys failed; keeping the keys in use")
			continue
		}
		if k.Equal(cur) {
			continue
		}
		if err := mem.SetKeys(k); err != nil {
			log.Error(err, "Installing the memberlist keys failed; keeping the keys in use")
			continue
		}
		var others []string
		for _, o := range k.Others {
			others = append(others, membership.Fingerprint(o))
		}
		log.Info("memberlist keys changed", "primary", membership.Fingerprint(k.Primary), "accepted", others)
		cur = k
	}
}
