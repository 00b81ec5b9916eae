// Command benchalloc measures how fast `metalgate controller` gives addresses to LoadBalancer
// Services against a real kube-apiserver and etcd (envtest assets from KUBEBUILDER_ASSETS).
//
// Each scenario runs on a fresh API server with one IPAddressPool (100.64.0.0/16):
//
//	pre-N   N Services are created first (pending), then the controller binary is started;
//	        the time is from its start until every Service shows an address (start-up, cache
//	        sync and the bootstrap of existing claims included).
//	live-N  the controller runs and has allocated one warm-up Service; then N Services are
//	        created by 32 concurrent clients; the time is from the first create until every
//	        Service shows an address.
//
// After each scenario it checks what the controller promises: every Service holds a distinct
// address (the bench uses no sharing keys) and the IPAddressClaim named after that address
// has that Service (by UID) as its only holder. A violation fails the run.
//
// It prints one row per scenario — rate, API requests per Service by verb (from the
// controller's own rest_client_requests_total), CPU seconds of kube-apiserver, etcd and the
// controller — and ends with
//
//	RESULT alloc_services_per_s=<pre-3000> alloc_services_per_s_300=<pre-300> alloc_services_per_s_live=<live-3000>
//
// Usage (make bench-alloc-api builds the binary and runs this):
//
//	go run ./e2e/cmd/benchalloc -controller bin/metalgate [-n 300,3000] [-live 3000] [-controller-args "--kube-api-qps=50"]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchalloc:", err)
		os.Exit(1)
	}
}

type options struct {
	Controller     string
	ControllerArgs string
	CRDs           string
	Sizes          string
	Live           int
	Workers        int
	Timeout        time.Duration
	Pool           string
	KeepLogs       string
	Profile        string
	ProfileSeconds int
}

// scenario is one measurement: n Services, pending before the controller starts or created
// while it runs.
type scenario struct {
	name string
	n    int
	live bool
}

type result struct {
	scenario
	firstAddr  time.Duration // from t0 to the first Service with an address
	total      time.Duration // from t0 to the last
	createRate float64       // Services created per second by the bench's clients (before t0 unless live)
	requests   map[string]float64
	cpu        map[string]float64 // CPU seconds during the scenario, by process
}

func (r result) rate() float64 { return float64(r.n) / r.total.Seconds() }

// steady is the rate from the first address to the last: start-up excluded.
func (r result) steady() float64 {
	if d := r.total - r.firstAddr; d > 0 && r.n > 1 {
		return float64(r.n-1) / d.Seconds()
	}
	return 0
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("benchalloc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Controller, "controller", "bin/metalgate", "The metalgate binary to run as `metalgate controller`.")
	fs.StringVar(&o.ControllerArgs, "controller-args", "", "Extra flags for the controller, space-separated (e.g. \"--kube-api-qps=50 --kube-api-burst=100\").")
	fs.StringVar(&o.CRDs, "crds", "config/crd/bases", "Directory of the CRD manifests.")
	fs.StringVar(&o.Sizes, "n", "300,3000", "Numbers of pending Services, comma-separated.")
	fs.IntVar(&o.Live, "live", 3000, "Services created while the controller runs (0: skip).")
	fs.IntVar(&o.Workers, "workers", 32, "Concurrent clients creating Services.")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "Give up on a scenario after this long.")
	fs.StringVar(&o.Pool, "pool", "100.64.0.0/16", "Addresses of the one IPAddressPool.")
	fs.StringVar(&o.KeepLogs, "logs", "", "Directory to keep each scenario's controller log in (default: discarded unless it fails).")
	fs.StringVar(&o.Profile, "profile", "", "Directory for a CPU profile of kube-apiserver per scenario, taken from t0 (go tool pprof -top <file>).")
	fs.IntVar(&o.ProfileSeconds, "profile-seconds", 5, "Length of each kube-apiserver CPU profile.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; the controller's log is kept apart
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: it must name the directory with kube-apiserver and etcd (make kube-bin)")
	}
	if _, err := os.Stat(o.Controller); err != nil {
		return fmt.Errorf("-controller %s: %w (make build)", o.Controller, err)
	}
	var scenarios []scenario
	for _, s := range strings.Split(o.Sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-n %q: want positive integers separated by commas", o.Sizes)
		}
		scenarios = append(scenarios, scenario{name: fmt.Sprintf("pre-%d", n), n: n})
	}
	if o.Live > 0 {
		scenarios = append(scenarios, scenario{name: fmt.Sprintf("live-%d", o.Live), n: o.Live, live: true})
	}
	var results []result
	for _, sc := range scenarios {
		fmt.Fprintf(stderr, ">> %s: %d Services\n", sc.name, sc.n)
		r, err := runScenario(ctx, o, sc, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(stderr, "   %d Services in %.2fs: %.0f/s\n", sc.n, r.total.Seconds(), r.rate())
		results = append(results, r)
	}
	printTable(stdout, o, results)
	return nil
}

func printTable(w io.Writer, o options, results []result) {
	args := o.ControllerArgs
	if args == "" {
		args = "(defaults)"
	}
	fmt.Fprintf(w, "metalgate controller %s; one pool %s; CPU seconds over the scenario\n", args, o.Pool)
	fmt.Fprintf(w, "%-10s | %5s | %8s | %8s | %10s | %8s | %9s | %-38s | %9s | %6s | %10s\n",
		"scenario", "N", "first s", "all s", "Services/s", "steady/s", "created/s", "API requests per Service", "apiserver", "etcd", "controller")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 151))
	for _, r := range results {
		created := fmt.Sprintf("%.0f", r.createRate)
		fmt.Fprintf(w, "%-10s | %5d | %8.2f | %8.2f | %10.0f | %8.0f | %9s | %-38s | %9.1f | %6.1f | %10.1f\n",
			r.name, r.n, r.firstAddr.Seconds(), r.total.Seconds(), r.rate(), r.steady(), created,
			requestSummary(r.requests), r.cpu["kube-apiserver"], r.cpu["etcd"], r.cpu["controller"])
	}
	rate := func(name string) string {
		for _, r := range results {
			if r.name == name {
				return fmt.Sprintf("%.0f", r.rate())
			}
		}
		return "NA"
	}
	fmt.Fprintf(w, "RESULT alloc_services_per_s=%s alloc_services_per_s_300=%s alloc_services_per_s_live=%s\n",
		rate("pre-3000"), rate("pre-300"), rate(fmt.Sprintf("live-%d", o.Live)))
}

// requestSummary shows requests per Service by verb, writes first: "POST 1.0 PUT 1.0 ...".
func requestSummary(m map[string]float64) string {
	order := []string{"POST", "PUT", "PATCH", "DELETE", "GET"}
	var parts []string
	for _, v := range order {
		if m[v] >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", v, m[v]))
		}
	}
	return strings.Join(parts, " ")
}

// runScenario starts an API server, sets the scene, runs the controller and measures.
func runScenario(ctx context.Context, o options, sc scenario, stderr io.Writer) (res result, err error) {
	res.scenario = sc
	bc, err := startBenchCluster(o)
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := bc.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	c, cfg, kubeconfig, dir := bc.c, bc.cfg, bc.kubeconfig, bc.dir
	const ns = "bench"
	if err := setScene(ctx, c, o.Pool, ns); err != nil {
		return res, err
	}

	if !sc.live {
		created, err := createServices(ctx, c, ns, sc.n, o.Workers)
		if err != nil {
			return res, err
		}
		res.createRate = float64(sc.n) / created.Seconds()
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	w, err := watchAddresses(ctx, c, ns)
	if err != nil {
		return res, err
	}
	defer w.stop()

	cpu0 := controlPlaneCPU()
	t0 := time.Now()
	profileDone := func() {}
	if !sc.live {
		profileDone = startProfile(ctx, o, sc, cfg, stderr)
	}
	defer func() { profileDone() }()
	ctrl, err := startController(ctx, o, kubeconfig, dir)
	if err != nil {
		return res, err
	}
	defer func() {
		cpu, stopErr := ctrl.stop()
		if err == nil && stopErr != nil {
			err = stopErr
		}
		if err != nil || o.KeepLogs != "" {
			ctrl.keepLog(o.KeepLogs, sc.name, stderr)
		}
		if res.cpu != nil {
			res.cpu["controller"] = cpu
		}
	}()

	if sc.live {
		if _, err := createServices(ctx, c, "warmup", 1, 1); err != nil {
			return res, err
		}
		if err := waitWarm(ctx, c); err != nil {
			return res, err
		}
		cpu0 = controlPlaneCPU()
		t0 = time.Now()
		profileDone = startProfile(ctx, o, sc, cfg, stderr)
		created, err := createServices(ctx, c, ns, sc.n, o.Workers)
		if err != nil {
			return res, err
		}
		res.createRate = float64(sc.n) / created.Seconds()
	}
	err = measure(ctx, &res, c, w, ctrl, ns, t0, cpu0)
	return res, err
}

// measure waits until all res.n Services of ns have an address and records in res the times
// since t0, the CPU used since cpu0 and the controller's API requests per Service; then it
// checks that no address was given twice.
func measure(ctx context.Context, res *result, c client.Client, w *addressWatch, ctrl *controllerProcess, ns string, t0 time.Time, cpu0 map[string]float64) error {
	first, last, err := w.waitAll(ctx, res.n)
	if err != nil {
		return err
	}
	res.firstAddr, res.total = first.Sub(t0), last.Sub(t0)
	cpu1 := controlPlaneCPU()
	res.cpu = map[string]float64{}
	for k, v := range cpu1 {
		res.cpu[k] = v - cpu0[k]
	}
	if res.requests, err = ctrl.requests(ctx); err != nil {
		return err
	}
	for k, v := range res.requests {
		res.requests[k] = v / float64(res.n)
	}
	return verifyUnique(ctx, c, ns, res.n)
}

// benchCluster is a scenario's API server, the bench's client of it, and a temporary
// directory with its kubeconfig (for the controller).
type benchCluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	c          client.WithWatch
	dir        string
	kubeconfig string
}

// startBenchCluster starts an API server with the CRDs of o, sized for thousands of
// LoadBalancer Services. On error it stops what it started.
func startBenchCluster(o options) (_ *benchCluster, err error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	bc := &benchCluster{env: &envtest.Environment{CRDDirectoryPaths: []string{o.CRDs}, ErrorIfCRDPathMissing: true, Scheme: scheme}}
	// Thousands of Services need thousands of ClusterIPs (envtest's default range is a /24).
	// Thousands of LoadBalancer Services also need thousands of node ports (default 2,768).
	bc.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16").
		Set("service-node-port-range", "20000-32767")
	if bc.cfg, err = bc.env.Start(); err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	defer func() {
		if err != nil {
			_ = bc.stop()
		}
	}()
	bc.cfg.QPS = -1 // the bench's own client is not the thing measured
	bc.cfg.Timeout = time.Minute
	if bc.c, err = client.NewWithWatch(bc.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if bc.dir, err = os.MkdirTemp("", "benchalloc-"); err != nil {
		return nil, err
	}
	bc.kubeconfig = filepath.Join(bc.dir, "kubeconfig")
	if err := os.WriteFile(bc.kubeconfig, bc.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	return bc, nil
}

// stop removes the temporary directory and stops the API server.
func (bc *benchCluster) stop() error {
	if bc.dir != "" {
		_ = os.RemoveAll(bc.dir)
	}
	if err := bc.env.Stop(); err != nil {
		return fmt.Errorf("stop API server: %w", err)
	}
	return nil
}

// setScene creates the namespaces (metalgate's, ns for the measured Services, "warmup") and
// one IPAddressPool of addresses pool.
func setScene(ctx context.Context, c client.Client, pool, ns string) error {
	for _, name := range []string{controllers.DefaultNamespace, ns, "warmup"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	p := &v1alpha1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllers.DefaultNamespace, Name: "bench"},
		Spec:       v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{v1alpha1.AddressRange(pool)}},
	}
	if err := c.Create(ctx, p); err != nil {
		return fmt.Errorf("create pool: %w", err)
	}
	return nil
}

// startProfile fetches a CPU profile of kube-apiserver (its /debug/pprof, as the envtest
// admin) into o.Profile in the background; the returned function waits for it.
func startProfile(ctx context.Context, o options, sc scenario, cfg *rest.Config, stderr io.Writer) func() {
	if o.Profile == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := func() error {
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				return err
			}
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), o.ProfileSeconds)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			if err := os.MkdirAll(o.Profile, 0o755); err != nil {
				return err
			}
			dst := filepath.Join(o.Profile, sc.name+"-kube-apiserver.pprof")
			f, err := os.Create(dst)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			fmt.Fprintf(stderr, "   kube-apiserver profile: %s\n", dst)
			return f.Close()
		}()
		if err != nil {
			fmt.Fprintf(stderr, "   kube-apiserver profile failed: %v\n", err)
		}
	}()
	return func() { <-done }
}

// createServices creates Services s00000… with workers concurrent clients and returns how long
// it took.
func createServices(ctx context.Context, c client.Client, ns string, n, workers int) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%05d", i)},
					Spec: corev1.ServiceSpec{
						Type:     corev1.ServiceTypeLoadBalancer,
						Selector: map[string]string{"app": "bench"},
						Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
					},
				}
				if err := c.Create(ctx, s); err != nil {
					errs <- fmt.Errorf("create Service %s/%s: %w", ns, s.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitWarm waits until the warm-up Service has an address: the controller has synced its
// caches, learned the existing claims and allocates.
func waitWarm(ctx context.Context, c client.Client) error {
	for {
		var s corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: "warmup", Name: "s00000"}, &s); err != nil {
			return fmt.Errorf("get warm-up Service: %w", err)
		}
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm-up Service got no address: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// addressWatch records when each Service of a namespace first shows an address.
type addressWatch struct {
	mu       sync.Mutex
	first    time.Time
	last     time.Time
	seen     map[string]bool
	changed  chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
	watchErr error
}

func watchAddresses(ctx context.Context, c client.WithWatch, ns string) (*addressWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &addressWatch{seen: map[string]bool{}, changed: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	var list corev1.ServiceList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		cancel()
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for i := range list.Items {
		if len(list.Items[i].Status.LoadBalancer.Ingress) > 0 {
			cancel()
			return nil, fmt.Errorf("service %s has an address before the controller started", list.Items[i].Name)
		}
	}
	rv := list.ResourceVersion
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, &corev1.ServiceList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				w.fail(fmt.Errorf("watch Services: %w", err))
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					w.fail(fmt.Errorf("watch Services: %v", ev.Object))
					wi.Stop()
					return
				}
				s, ok := ev.Object.(*corev1.Service)
				if !ok {
					continue // a bookmark or another object: nothing to record
				}
				rv = s.ResourceVersion
				if len(s.Status.LoadBalancer.Ingress) > 0 {
					w.saw(s.Name)
				}
			}
		}
	}()
	return w, nil
}

func (w *addressWatch) saw(name string) {
	now := time.Now()
	w.mu.Lock()
	if !w.seen[name] {
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

func (w *addressWatch) fail(err error) {
	w.mu.Lock()
	w.watchErr = err
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// waitAll waits until n Services have shown an address and returns when the first and the
// last did.
func (w *addressWatch) waitAll(ctx context.Context, n int) (time.Time, time.Time, error) {
	for {
		w.mu.Lock()
		got, first, last, err := len(w.seen), w.first, w.last, w.watchErr
		w.mu.Unlock()
		if err != nil {
			return first, last, err
		}
		if got >= n {
			return first, last, nil
		}
		select {
		case <-ctx.Done():
			return first, last, fmt.Errorf("%d of %d Services have an address: %w", got, n, ctx.Err())
		case <-w.changed:
		}
	}
}

func (w *addressWatch) stop() {
	w.cancel()
	<-w.done
}

// controllerProcess is a running `metalgate controller`.
type controllerProcess struct {
	cmd         *exec.Cmd
	log         *os.File
	metricsAddr string
}

func startController(ctx context.Context, o options, kubeconfig, dir string) (*controllerProcess, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metricsAddr := l.Addr().String()
	_ = l.Close()
	logf, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	args := []string{"controller", "--kubeconfig", kubeconfig, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", "0"}
	args = append(args, strings.Fields(o.ControllerArgs)...)
	// Not CommandContext: the process gets SIGTERM and a clean shutdown, not SIGKILL.
	cmd := exec.Command(o.Controller, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", o.Controller, err)
	}
	return &controllerProcess{cmd: cmd, log: logf, metricsAddr: metricsAddr}, nil
}

// stop ends the controller with SIGTERM and returns the CPU seconds it used.
func (p *controllerProcess) stop() (float64, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		err = fmt.Errorf("controller did not stop within 30s of SIGTERM: %w", <-done)
	}
	cpu := 0.0
	if st := p.cmd.ProcessState; st != nil {
		cpu = (st.UserTime() + st.SystemTime()).Seconds()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("controller exited: %w", err)
	}
	return cpu, err
}

func (p *controllerProcess) keepLog(dir, name string, stderr io.Writer) {
	_ = p.log.Close()
	if dir == "" {
		dir = os.TempDir()
	}
	dst := filepath.Join(dir, "benchalloc-"+name+"-controller.log")
	data, err := os.ReadFile(p.log.Name())
	if err == nil {
		err = os.WriteFile(dst, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "   could not keep the controller log: %v\n", err)
		return
	}
	fmt.Fprintf(stderr, "   controller log: %s\n", dst)
}

// requests reads the controller's rest_client_requests_total and sums it by verb.
func (p *controllerProcess) requests(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape controller metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape controller metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "rest_client_requests_total{"), "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		for _, l := range strings.Split(labels, ",") {
			if m, ok := strings.CutPrefix(l, `method="`); ok {
				out[strings.TrimSuffix(m, `"`)] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read controller metrics: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("controller metrics have no rest_client_requests_total")
	}
	return out, nil
}

// controlPlaneCPU returns the CPU seconds used so far by this process's kube-apiserver and
// etcd children (envtest starts them).
func controlPlaneCPU() map[string]float64 {
	out := map[string]float64{}
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process directory
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // the process ended while listing
		}
		// pid (comm) state ppid … utime(14) stime(15): comm may hold spaces, so split after ')'.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		j := strings.IndexByte(s, '(')
		if i < 0 || j < 0 || pid == self {
			continue
		}
		comm := s[j+1 : i]
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self || (comm != "kube-apiserver" && comm != "etcd") {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[comm] += (ut + st) / 100 // USER_HZ is 100 on Linux
	}
	return out
}

// verifyUnique checks every Service of ns has one address, no two share one, and the claim
// of each address names that Service alone.
func verifyUnique(ctx context.Context, c client.Client, ns string, n int) error {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return fmt.Errorf("list Services: %w", err)
	}
	var claims v1alpha1.IPAddressClaimList
	if err := c.List(ctx, &claims); err != nil {
		return fmt.Errorf("list IPAddressClaims: %w", err)
	}
	claimed := map[string]v1alpha1.IPAddressClaim{}
	for _, cl := range claims.Items {
		claimed[cl.Name] = cl
	}
	byAddr := map[netip.Addr][]string{}
	var problems []string
	count := 0
	for _, s := range svcs.Items {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if s.Namespace == ns {
			count++
		}
		key := s.Namespace + "/" + s.Name
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			problems = append(problems, fmt.Sprintf("%s has %d addresses", key, len(s.Status.LoadBalancer.Ingress)))
			continue
		}
		a, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s shows %q", key, s.Status.LoadBalancer.Ingress[0].IP))
			continue
		}
		byAddr[a] = append(byAddr[a], key)
		cl, ok := claimed[controllers.ClaimName(a)]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s shows %s but no claim exists", key, a))
		case len(cl.Spec.Holders) != 1 || cl.Spec.Holders[0].UID != s.UID:
			problems = append(problems, fmt.Sprintf("%s shows %s but its claim holds %+v", key, a, cl.Spec.Holders))
		}
	}
	for a, hs := range byAddr {
		if len(hs) > 1 {
			sort.Strings(hs)
			problems = append(problems, fmt.Sprintf("address %s held by %v", a, hs))
		}
	}
	if count != n {
		problems = append(problems, fmt.Sprintf("%d Services in %s, want %d", count, ns, n))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
		}
		return fmt.Errorf("uniqueness check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
