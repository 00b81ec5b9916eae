package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/adminauth"
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
}

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
	return runController(withLogger(ctx, &opts.Zap, stderr), opts)
}

// runController runs the controller manager until ctx ends.
func runController(ctx context.Context, opts controllerOptions) error {
	logger := logr.FromContextOrDiscard(ctx)
	if err := opts.check(); err != nil {
		return err
	}
	cfg, leCfg, err := controllerClientConfigs(opts)
	if err != nil {
		return err
	}
	mgr, err := newControllerManager(cfg, leCfg, opts, logger)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	if err := mgr.Add(&controllers.MemberlistKeyEnsurer{Secrets: cs.CoreV1(), Namespace: opts.Namespace,
		Name: opts.MemberlistSecret, Log: logger.WithName("memberlist-key")}); err != nil {
		return fmt.Errorf("add memberlist key ensurer: %w", err)
	}
	m, err := controllerMetrics(metrics.Registry)
	if err != nil {
		return err
	}
	if err := controllers.Setup(ctx, mgr, controllers.Options{LBClass: opts.LBClass, Namespace: opts.Namespace, Metrics: m,
		ServiceWorkers: opts.ServiceWorkers}); err != nil {
		return err
	}
	proxy, err := gatewayProxy(ctx, mgr.GetAPIReader(), opts, logger)
	if err != nil {
		return err
	}
	// Without the Gateway API CRDs in the cluster this registers nothing and logs why.
	if _, err := gateway.Setup(ctx, mgr, gateway.Options{Namespace: opts.Namespace, Proxy: proxy}); err != nil {
		return err
	}
	logger.Info("starting controller", "version", version.Get().Version, "lbClass", opts.LBClass, "leaderElect", opts.LeaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
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

// newControllerManager is the manager of the controller: its metrics and probe endpoints,
// cache and leader election (a Lease in --leader-election-namespace, else the Pod's, else
// "default" out of cluster).
//
// A lost Lease ends the process (issue #25): controller-runtime v0.23 makes Start return
// "leader election lost" and offers no option to campaign again (its OnStoppedLeading hook is
// unexported), so the kubelet restarts the controller. That is safe because every address is
// claimed on the API server and a new leader learns every assignment before it assigns one;
// the data plane (speakers, proxies) does not depend on the controller running.
func newControllerManager(cfg, leCfg *rest.Config, opts controllerOptions, logger logr.Logger) (ctrl.Manager, error) {
	scheme, err := controllerScheme()
	if err != nil {
		return nil, err
	}
	leaseNS := opts.LeaderElectionNamespace
	if _, err := os.Stat(inClusterNamespaceFile); leaseNS == "" && err != nil {
		leaseNS = "default" // out of cluster: the namespace every cluster has
	}
	renew, lease, retry := 10*time.Second, 15*time.Second, 2*time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		// /metrics answers loopback and bearer tokens authorised for it (Prometheus).
		Metrics: metricsserver.Options{BindAddress: opts.MetricsAddr,
			FilterProvider: adminauth.FilterProvider(adminGuardOptions(nil, metrics.Registry, logger))},
		HealthProbeBindAddress:        opts.HealthAddr,
		Cache:                         controllers.CacheOptions(opts.Namespace),
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       leaseNS,
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionConfig:          leCfg,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
	})
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
