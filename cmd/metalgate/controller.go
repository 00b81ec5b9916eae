package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/adminauth"
	"github.com/metalgate/metalgate/internal/leaserelease"
)

// controllerOptions are the flags of `metalgate controller`.
type controllerOptions struct {
	Kubeconfig              string
	MetricsAddr             string
	HealthAddr              string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	LBClass                 string
	Namespace               string
	MemberlistSecret        string
	GatewayProxyImage       string
	GatewayProxySA          string
	QPS                     float64
	Burst                   int
	ServiceWorkers          int
	Zap                     zap.Options
	MemoryLimitRatio        float64

	// Set by tests only: the registry of the controller's own metrics (default
	// metrics.Registry, which /metrics serves) and the leader election timings (default
	// leaseDuration, renewDeadline, retryPeriod).
	registry                          prometheus.Registerer
	leaseDuration, renew, retryPeriod time.Duration
}

// Leader election timings of the controller's Lease.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func (o *controllerOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Default: in-cluster config, else $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Address of /metrics (loopback, or a bearer token authorised for it); \"0\" disables it.")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; \"0\" disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Elect one active controller among replicas with a Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease. Default: the Pod's namespace; out of cluster, default.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "metalgate-controller", "Name of the Lease.")
	fs.StringVar(&o.LBClass, "lb-class", controllers.DefaultLBClass, "spec.loadBalancerClass served, besides Services with no class.")
	fs.StringVar(&o.Namespace, "namespace", controllers.DefaultNamespace, "Namespace of the configuration objects (IPAddressPools, advertisements, peers).")
	fs.StringVar(&o.MemberlistSecret, "memberlist-secret", controllers.MemberlistKeySecret, "Secret in --namespace with the speakers' memberlist key; created with a random key at start when missing.")
	fs.StringVar(&o.GatewayProxyImage, "gateway-proxy-image", gateway.SelfImage, "Image of the proxy Deployment made per Gateway in --namespace (metalgate proxy --gateway=<ns>/<name>). \"self\": the controller's own image, pull policy and pull secrets (read from its Pod, POD_NAMESPACE/POD_NAME; outside a Pod none is made). Empty: none is made (run metalgate proxy --gateway yourself).")
	fs.StringVar(&o.GatewayProxySA, "gateway-proxy-service-account", "", "ServiceAccount of the Gateway proxies (bound to the role in config/rbac/gateway-proxy). Default: the controller's own with \"controller\" replaced by \"gateway-proxy\" (metalgate-gateway-proxy).")
	fs.Float64Var(&o.QPS, "kube-api-qps", defaultControllerQPS, "Requests per second to the API server, all of the controller's clients together (client-side limit; the API server's priority and fairness still applies). Negative: no client-side limit.")
	fs.IntVar(&o.Burst, "kube-api-burst", defaultControllerBurst, "Burst of requests to the API server above --kube-api-qps (client-side limit).")
	fs.IntVar(&o.ServiceWorkers, "concurrent-service-syncs", controllers.DefaultServiceWorkers, "Services reconciled at once. Uniqueness of addresses does not depend on it: every address is claimed on the API server.")
	o.Zap.BindFlags(fs)
	bindMemoryLimit(fs, &o.MemoryLimitRatio)
}

// The client-side limit is high on purpose: allocating one Service takes three writes (claim,
// pool annotation, status) and an Event, so client-go's usual 50/s made about 16 Services/s the
// ceiling (issue #15). The API server protects itself with priority and fairness (APF), which
// queues this client's flow fairly against the others; the client-side bucket only keeps a
// runaway loop from flooding it.
const (
	defaultControllerQPS   = 2000
	defaultControllerBurst = 4000
)

func controllerCommand(ctx context.Context, args []string, stderr io.Writer) error {
	var opts controllerOptions
	if err := parseFlags("controller", args, stderr, opts.bind); err != nil {
		return err
	}
	ctx, err := start(ctx, &opts.Zap, opts.MemoryLimitRatio, stderr)
	if err != nil {
		return err
	}
	return runController(ctx, opts)
}

// runController runs the controller until ctx ends. With --leader-elect it campaigns for the
// Lease and runs the controllers only while it holds it; a lost Lease ends that term, not the
// process (leadTerms).
func runController(ctx context.Context, opts controllerOptions) error {
	logger := logr.FromContextOrDiscard(ctx)
	if err := opts.check(); err != nil {
		return err
	}
	cfg, leCfg, err := controllerClientConfigs(opts)
	if err != nil {
		return err
	}
	reg := opts.registry
	if reg == nil {
		reg = metrics.Registry
	}
	m, err := controllerMetrics(reg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	// term builds a manager with every controller and runs it until ctx ends. Each term has
	// a manager of its own: a manager cannot start twice.
	term := func(ctx context.Context, mopts ctrl.Options) error {
		mgr, err := newControllerManager(cfg, mopts)
		if err != nil {
			return err
		}
		if err := mgr.Add(&controllers.MemberlistKeyEnsurer{Secrets: cs.CoreV1(), Namespace: opts.Namespace,
			Name: opts.MemberlistSecret, Log: logger.WithName("memberlist-key")}); err != nil {
			return fmt.Errorf("add memberlist key ensurer: %w", err)
		}
		// Every term sets the controllers up again under the same names; terms never overlap
		// (leadTerms), so their metrics never do either.
		if err := controllers.Setup(ctx, mgr, controllers.Options{LBClass: opts.LBClass, Namespace: opts.Namespace, Metrics: m,
			ServiceWorkers: opts.ServiceWorkers, SkipNameValidation: true}); err != nil {
			return err
		}
		proxy, err := gatewayProxy(ctx, mgr.GetAPIReader(), opts, logger)
		if err != nil {
			return err
		}
		// Without the Gateway API CRDs in the cluster this registers nothing and logs why.
		if _, err := gateway.Setup(ctx, mgr, gateway.Options{Namespace: opts.Namespace, Proxy: proxy, SkipNameValidation: true}); err != nil {
			return err
		}
		if err := mgr.Start(ctx); err != nil {
			return fmt.Errorf("run manager: %w", err)
		}
		return nil
	}
	logger.Info("starting controller", "version", version.Get().Version, "lbClass", opts.LBClass, "leaderElect", opts.LeaderElect)
	endpoints := managerOptions(opts, logger)
	if !opts.LeaderElect {
		return term(ctx, endpoints)
	}

	restarts := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metalgate_controller_leader_election_restarts_total",
		Help: "Terms that ended because this controller lost its Lease while running: it stopped its controllers and caches and campaigns again in the same process.",
	})
	if err := reg.Register(restarts); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	lock, err := controllerLock(leCfg, opts)
	if err != nil {
		return err
	}
	// The /metrics and probe endpoints outlive the terms: a manager of their own, without
	// controllers, runs for the whole process; each term's manager serves none.
	base, err := newControllerManager(cfg, endpoints)
	if err != nil {
		return err
	}
	quiet := endpoints
	quiet.Metrics = metricsserver.Options{BindAddress: "0"}
	quiet.HealthProbeBindAddress = "0"
	elections := manager.RunnableFunc(func(ctx context.Context) error {
		return leadTerms(ctx, lock, opts.timings(), func(ctx context.Context) error { return term(ctx, quiet) }, func() {
			restarts.Inc()
			logger.Info("lost the Lease: stopped the controllers and their caches; campaigning again", "lease", opts.LeaderElectionID, "identity", lock.Identity())
		})
	})
	if err := base.Add(elections); err != nil {
		return fmt.Errorf("add leader election: %w", err)
	}
	if err := base.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// electionTimings are a Lease's leader election timings.
type electionTimings struct{ lease, renew, retry time.Duration }

func (opts controllerOptions) timings() electionTimings {
	t := electionTimings{leaseDuration, renewDeadline, retryPeriod}
	if opts.leaseDuration > 0 {
		t = electionTimings{opts.leaseDuration, opts.renew, opts.retryPeriod}
	}
	return t
}

// controllerLock is the controller's Lease (--leader-election-id in
// --leader-election-namespace, else the Pod's namespace, else "default"), held under this
// process's identity (host name and a random suffix, as controller-runtime names it).
func controllerLock(leCfg *rest.Config, opts controllerOptions) (resourcelock.Interface, error) {
	ns := opts.LeaderElectionNamespace
	if ns == "" {
		if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
			ns = strings.TrimSpace(string(b))
		} else {
			ns = "default" // out of cluster: the namespace every cluster has
		}
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix) // never fails (crypto/rand)
	cs, err := kubernetes.NewForConfig(leCfg)
	if err != nil {
		return nil, fmt.Errorf("create leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, opts.LeaderElectionID, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + hex.EncodeToString(suffix)})
	if err != nil {
		return nil, fmt.Errorf("leader election lock %s/%s: %w", ns, opts.LeaderElectionID, err)
	}
	return lock, nil
}

// leadTerms campaigns for lock until ctx ends. Each time it wins, it runs term with a context
// that ends when the Lease is lost or ctx ends. A lost Lease does not end leadTerms: it waits
// until term has returned — the term's manager has stopped its controllers and caches, so
// nothing of the old term writes any more — calls lost, and campaigns again. controller-runtime's
// own leader election cannot do this: on a lost Lease it skips the graceful stop of its
// runnables and its Start returns while reconcilers may still run, so a new manager could
// overlap the old one.
//
// When ctx ends, the term stops first and the Lease is released only then, so another
// controller cannot lead while this one's reconcilers still run.
//
// A term that fails or ends by itself while it leads (its manager does not start, or its
// runnables do not stop within the manager's grace period) gives the Lease up and ends
// leadTerms with an error: the process exits and the kubelet restarts it, the only safe way
// out of a term that may still be running.
func leadTerms(ctx context.Context, lock resourcelock.Interface, t electionTimings, term func(context.Context) error, lost func()) error {
	for {
		g := &termGate{}
		// The campaign's context ends after the term has stopped: on shutdown, or when the
		// term ends by itself. The Lease is released once the term has stopped (below).
		runCtx, endRun := context.WithCancel(context.WithoutCancel(ctx))
		stopShutdown := context.AfterFunc(ctx, func() {
			g.wait()
			endRun()
		})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: t.lease, RenewDeadline: t.renew, RetryPeriod: t.retry,
			// Not ReleaseOnCancel: client-go's release gives up on the first conflict, which a
			// renewal it gave up on but that still lands on the API server causes; ours reads
			// again (internal/leaserelease).
			ReleaseOnCancel: false, Name: lock.Describe(),
			Callbacks: leaderelection.LeaderCallbacks{
				// tctx ends when the Lease is lost; the term's context also when ctx ends.
				OnStartedLeading: func(tctx context.Context) {
					termCtx, cancel := context.WithCancel(tctx)
					defer cancel()
					stop := context.AfterFunc(ctx, cancel)
					defer stop()
					g.run(termCtx, term, endRun)
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			stopShutdown()
			endRun()
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(runCtx) // returns once the Lease is lost or runCtx ends
		stopShutdown()
		end := g.wait()
		endRun()
		// The term has stopped: give the Lease up if it still names us (shutdown, a term that
		// ended by itself, or a renewal that did not reach the API server in time), so that
		// another controller, or this one's next campaign, leads at once.
		releaseLease(ctx, lock, t.renew)
		switch {
		case end.err != nil:
			return end.err
		case ctx.Err() != nil:
			return nil
		case end.byItself:
			return errors.New("the controllers stopped while this controller held the Lease")
		}
		lost()
	}
}

// releaseLease gives lock's Lease up when it names this identity, within renew.
func releaseLease(ctx context.Context, lock resourcelock.Interface, renew time.Duration) {
	log := logr.FromContextOrDiscard(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), renew)
	defer cancel()
	released, err := leaserelease.Release(rctx, lock)
	switch {
	case err != nil:
		log.Error(err, "could not give the Lease up; another controller leads once it expires", "lease", lock.Describe())
	case released:
		log.Info("gave the Lease up", "lease", lock.Describe(), "identity", lock.Identity())
	}
}

// termGate runs one term and lets the campaign wait for it. LeaderElector.Run starts the term
// on a goroutine of its own and may return before that goroutine runs; wait closes the gate,
// so a term that had not begun by then never begins, and one that had is waited for.
type termGate struct {
	mu       sync.Mutex
	closed   bool
	running  bool
	finished chan struct{}
	end      termEnd // set before finished is closed
}

type termEnd struct {
	err      error
	byItself bool // the term returned while its context was still alive
}

// run runs term unless the gate is closed; a term that returns by itself calls ended.
func (g *termGate) run(ctx context.Context, term func(context.Context) error, ended func()) {
	g.mu.Lock()
	if g.closed || ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	g.running, g.finished = true, make(chan struct{})
	g.mu.Unlock()
	err := term(ctx)
	g.end = termEnd{err: err, byItself: ctx.Err() == nil}
	close(g.finished)
	if g.end.byItself {
		ended()
	}
}

// wait closes the gate and, once the term has returned, says how it ended (zero when no term
// ran). It may be called more than once.
func (g *termGate) wait() termEnd {
	g.mu.Lock()
	g.closed = true
	running, finished := g.running, g.finished
	g.mu.Unlock()
	if !running {
		return termEnd{}
	}
	<-finished
	return g.end
}

// check refuses flag values the controller cannot run with.
func (opts controllerOptions) check() error {
	if opts.ServiceWorkers < 1 {
		return fmt.Errorf("--concurrent-service-syncs %d: want at least 1", opts.ServiceWorkers)
	}
	if opts.QPS == 0 {
		return fmt.Errorf("--kube-api-qps 0: want a positive rate, or a negative one for no client-side limit")
	}
	if opts.QPS > 0 && opts.Burst < 1 {
		return fmt.Errorf("--kube-api-burst %d: want at least 1 with a positive --kube-api-qps", opts.Burst)
	}
	return nil
}

// controllerMetrics registers the controller's metrics, metalgate_build_info among them, with reg.
func controllerMetrics(reg prometheus.Registerer) (*controllers.Metrics, error) {
	if err := version.RegisterBuildInfo(reg); err != nil {
		return nil, err
	}
	return controllers.NewMetrics(reg), nil
}

// controllerClientConfigs are the client configurations of the manager (cfg, rate-limited by
// --kube-api-qps/--kube-api-burst as one bucket) and of leader election (leCfg, a bucket of
// its own).
func controllerClientConfigs(opts controllerOptions) (cfg, leCfg *rest.Config, err error) {
	cfg, err = restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "metalgate-controller/" + version.Get().Version
	// Leader election keeps a bucket of its own, so a burst of allocations never delays a
	// renewal (a late renewal loses the Lease).
	leCfg = rest.CopyConfig(cfg)
	leCfg.QPS, leCfg.Burst = 5, 10
	// One bucket for every client of the manager: client-go otherwise gives each resource's
	// client its own, and --kube-api-qps would limit Services, claims and Events separately.
	cfg.QPS, cfg.Burst = float32(opts.QPS), opts.Burst
	if opts.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(opts.QPS), opts.Burst)
	}
	return cfg, leCfg, nil
}

// controllerScheme has the types the controller reads and writes: Kubernetes', metalgate's
// and Gateway API's (v1, and v1beta1 for ReferenceGrant).
func controllerScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register metalgate types: %w", err)
	}
	if err := gwv1.Install(scheme); err != nil {
		return nil, fmt.Errorf("register Gateway API types: %w", err)
	}
	if err := gwv1beta1.Install(scheme); err != nil {
		return nil, fmt.Errorf("register Gateway API v1beta1 types (ReferenceGrant): %w", err)
	}
	return scheme, nil
}

// managerOptions are the options of the controller's managers: scheme, metrics and probe
// endpoints, cache. There is no manager leader election: runController campaigns itself
// (leadTerms), so a lost Lease ends a term instead of the process.
func managerOptions(opts controllerOptions, logger logr.Logger) ctrl.Options {
	return ctrl.Options{
		Logger: logger,
		// /metrics answers loopback and bearer tokens authorised for it (Prometheus).
		Metrics: metricsserver.Options{BindAddress: opts.MetricsAddr,
			FilterProvider: adminauth.FilterProvider(adminGuardOptions(nil, metrics.Registry, logger))},
		HealthProbeBindAddress: opts.HealthAddr,
		Cache:                  controllers.CacheOptions(opts.Namespace),
	}
}

// newControllerManager is a manager of the controller with mopts (managerOptions) and its
// health and readiness checks.
func newControllerManager(cfg *rest.Config, mopts ctrl.Options) (ctrl.Manager, error) {
	scheme, err := controllerScheme()
	if err != nil {
		return nil, err
	}
	mopts.Scheme = scheme
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readyz: %w", err)
	}
	return mgr, nil
}

// inClusterNamespaceFile names the Pod's namespace when running in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// restConfig loads the kubeconfig named by the flag, else the usual chain.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("find a kubeconfig (set --kubeconfig): %w", err)
	}
	return cfg, nil
}

// gatewayProxy is what the Gateway controller runs as each Gateway's proxy: with
// --gateway-proxy-image=self, the image, pull policy and pull secrets of the controller's own
// container; outside a Pod (no POD_NAME), no proxies, said in the log. Inside one, a Pod it
// cannot read is an error: Gateways would get addresses that nothing serves.
func gatewayProxy(ctx context.Context, r client.Reader, opts controllerOptions, logger logr.Logger) (gateway.ProxyOptions, error) {
	p := gateway.ProxyOptions{Image: opts.GatewayProxyImage, ServiceAccount: opts.GatewayProxySA}
	if p.Image == "" {
		return p, nil
	}
	podNS, podName := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if p.Image == gateway.SelfImage && podName == "" {
		logger.Info("no proxies are made for Gateways: --gateway-proxy-image=self, and POD_NAME is not set (not running in a Pod); give an image to make them")
		return gateway.ProxyOptions{}, nil
	}
	if p.Image != gateway.SelfImage && (p.ServiceAccount != "" || podName == "") {
		return p, nil // everything given, or nothing to learn from a Pod
	}
	p, err := gateway.ProxyFromPod(ctx, r, podNS, podName, "controller", p)
	if err != nil {
		return p, fmt.Errorf("--gateway-proxy-image: %w", err)
	}
	logger.Info("Gateway proxies", "image", p.Image, "serviceAccount", p.ServiceAccount)
	return p, nil
}
