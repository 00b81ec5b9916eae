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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/internal/testenv"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
)

// TestProxyOutlivesLeaseAndAPIServer runs the proxy (runProxy, as `metalgate proxy` does)
// against an API server of its own, with short Lease timings, through a loopback relay the
// test can cut, and checks that the proxy never exits for its status Lease:
//
//  1. hostile first: the proxy is cut off (the relay stops forwarding) until it stops
//     writing status; meanwhile another holder takes the Lease. After the proxy is back it
//     writes nothing — not the new address of its Service, not a new Ingress — while the
//     other holds the Lease; once that one lets go, the proxy takes the Lease and writes.
//  2. the API server process is stopped (SIGSTOP) for longer than the Lease: the proxy
//     stops writing, says its view is stale (metalgate_proxy_watch_healthy 0), and keeps
//     answering HTTP on its listener throughout; after SIGCONT it is the writer again and a
//     status write happens.
func TestProxyOutlivesLeaseAndAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiserver := apiserverProcess(t, u.Port())
	relay := startRelay(t, u.Host)
	kubeconfig := relayKubeconfig(t, env.Kubeconfig, u.Host, relay.addr())

	const ns, leaseName = "metalgate-system", "metalgate-proxy"
	ip1, ip2, ip3 := "192.0.2.10", "192.0.2.20", "192.0.2.30"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxy"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}, Spec: networkingv1.IngressClassSpec{Controller: proxyingress.ControllerName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "app"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		redirectIngress("a", "a.example"),
		svc,
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	// setAddress gives the proxy's Service an address, as the controller would (the proxy
	// itself patches the Service's annotations: merge-patch the status only).
	setAddress := func(t *testing.T, ip string) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q}]}}}`, ip))
		if err := c.Status().Patch(ctx, svc.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("set the proxy Service's address to %s: %v", ip, err)
		}
	}
	setAddress(t, ip1)

	httpAddr, adminAddr := freeAddr(t), freeAddr(t)
	var opts proxyOptions
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse([]string{"--kubeconfig", kubeconfig, "--http-bind-address", httpAddr, "--https-bind-address", "0",
		"--admin-bind-address", adminAddr, "--publish-service", ns + "/proxy", "--leader-election-namespace", ns,
		"--leader-election-lease-duration", "3s", "--leader-election-renew-deadline", "2s", "--leader-election-retry-period", "250ms",
		"--stale-after", "4s", "--affinity-key-secret", "-", "--shutdown-delay", "0"}); err != nil {
		t.Fatal(err)
	}
	opts.registry = prometheus.NewRegistry()
	rctx, cancel := context.WithCancel(logr.NewContext(ctx, testenv.Logger(t, "proxy")))
	done := make(chan error, 1)
	go func() { done <- runProxy(rctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy returned %v", err)
		}
	})
	running := func(t *testing.T) {
		t.Helper()
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the proxy exited: %v", err)
		default:
		}
	}

	hc := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	// answers checks that the proxy routes host from its table: the Ingress's redirect.
	answers := func(host string) error {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/x", nil)
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://moved.example/" {
			return fmt.Errorf("GET %s/x → %d %s, want the Ingress's 301", host, resp.StatusCode, resp.Header.Get("Location"))
		}
		return nil
	}
	metric := func(line string) func() error {
		return func() error {
			resp, err := hc.Get("http://" + adminAddr + "/metrics")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if sc.Text() == line {
					return nil
				}
			}
			return fmt.Errorf("no metric line %q", line)
		}
	}
	status := func(name string) (string, error) {
		var ing networkingv1.Ingress
		if err := c.Get(ctx, client.ObjectKey{Namespace: "web", Name: name}, &ing); err != nil {
			return "", fmt.Errorf("get Ingress %s: %w", name, err)
		}
		var ips []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			ips = append(ips, lb.IP)
		}
		return strings.Join(ips, ","), nil
	}
	statusIs := func(name, want string) func() error {
		return func() error {
			got, err := status(name)
			if err == nil && got != want {
				err = fmt.Errorf("Ingress web/%s status %q, want %q", name, got, want)
			}
			return err
		}
	}

	testenv.Eventually(t, 60*time.Second, "the proxy answers from its table", func() error { return answers("a.example") })
	testenv.Eventually(t, 30*time.Second, "the proxy is the status writer", metric("metalgate_proxy_status_writer 1"))
	testenv.Eventually(t, 30*time.Second, "the proxy writes the status", statusIs("a", ip1))

	t.Run("another holder takes the Lease while the proxy is cut off", func(t *testing.T) {
		relay.pause()
		testenv.Eventually(t, 30*time.Second, "the cut-off proxy stops writing", metric("metalgate_proxy_status_writer 0"))
		if err := answers("a.example"); err != nil {
			t.Fatalf("cut off from the API server: %v", err)
		}
		ictx, icancel := context.WithCancel(ctx)
		intruderLeads, intruderDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(intruderDone)
			leaderelection.RunOrDie(ictx, leaderelection.LeaderElectionConfig{
				Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: leaseName},
					Client: kubernetes.NewForConfigOrDie(env.Config).CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "intruder"}},
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond, ReleaseOnCancel: true,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(intruderLeads) }, OnStoppedLeading: func() {}},
			})
		}()
		defer func() { icancel(); <-intruderDone }()
		testenv.Receive(t, 30*time.Second, "the other holder takes the Lease", intruderLeads)
		// What a writer would publish at once: a new address, a new Ingress.
		setAddress(t, ip2)
		if err := c.Create(ctx, redirectIngress("b", "b.example")); err != nil {
			t.Fatal(err)
		}
		relay.resume()
		testenv.Eventually(t, 30*time.Second, "the proxy sees the new Ingress again", func() error { return answers("b.example") })
		testenv.Holds(t, 3*time.Second, "the proxy writes no status while the other holds the Lease", func() error {
			if err := statusIs("a", ip1)(); err != nil {
				return fmt.Errorf("written while another replica holds the Lease: %w", err)
			}
			if err := statusIs("b", "")(); err != nil {
				return fmt.Errorf("written while another replica holds the Lease: %w", err)
			}
			return metric("metalgate_proxy_status_writer 0")()
		})
		running(t)
		icancel() // the other lets go (and releases the Lease)
		<-intruderDone
		testenv.Eventually(t, 30*time.Second, "the proxy takes the Lease again", metric("metalgate_proxy_status_writer 1"))
		testenv.Eventually(t, 30*time.Second, "the proxy writes the new address", statusIs("a", ip2))
		testenv.Eventually(t, 30*time.Second, "the proxy writes the new Ingress", statusIs("b", ip2))
	})

	t.Run("API server stopped for longer than the Lease", func(t *testing.T) {
		// A client keeps asking the proxy throughout; every request must be answered.
		var asked, failed atomic.Int64
		var lastErr atomic.Value
		lctx, lcancel := context.WithCancel(ctx)
		loadDone := make(chan struct{})
		go func() {
			defer close(loadDone)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-lctx.Done():
					return
				case <-tick.C:
				}
				asked.Add(1)
				if err := answers("a.example"); err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}
		}()
		stopLoad := func() { lcancel(); <-loadDone }
		defer stopLoad()

		apiserver.stop(t)
		testenv.Eventually(t, 30*time.Second, "the proxy stops writing status", metric("metalgate_proxy_status_writer 0"))
		testenv.Eventually(t, 30*time.Second, "the proxy says its view is stale", func() error {
			if metric(`metalgate_proxy_watch_healthy{kind="Ingress"} 0`)() != nil {
				return errors.New("the Ingress watch is still reported healthy")
			}
			return nil
		})
		running(t)
		apiserver.cont(t)

		testenv.Eventually(t, 60*time.Second, "the proxy is the status writer again", metric("metalgate_proxy_status_writer 1"))
		setAddress(t, ip3)
		testenv.Eventually(t, 30*time.Second, "a status write happens", statusIs("a", ip3))
		testenv.Eventually(t, 30*time.Second, "the view is fresh again", metric(`metalgate_proxy_watch_healthy{kind="Ingress"} 1`))
		stopLoad()
		running(t)
		if n, f := asked.Load(), failed.Load(); n == 0 || f > 0 {
			t.Errorf("%d of %d requests to the proxy failed while the API server was stopped (last: %v)", f, n, lastErr.Load())
		}
	})
}

// redirectIngress is an Ingress of class metalgate for host whose answer comes from the proxy
// itself (a permanent redirect): the API server refuses loopback endpoints, and the answer
// shows the route is in the table.
func redirectIngress(name, host string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name,
		Annotations: map[string]string{"metalgate.io/permanent-redirect": "https://moved.example/"}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptrTo("metalgate"), Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "app", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}}
}

// process is the kube-apiserver this test started.
type process struct{ pid int }

// apiserverProcess finds the kube-apiserver child of this test process that listens on
// port, by its --secure-port.
func apiserverProcess(t *testing.T, port string) *process {
	t.Helper()
	want := "--secure-port=" + port
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to find the API server process: %v", err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !contains(args, want) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
			p := &process{pid: pid}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // never leave it stopped
			return p
		}
	}
	t.Fatalf("no kube-apiserver child of this test with %s", want)
	return nil
}

func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP kube-apiserver: %v", err)
	}
}

func (p *process) cont(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT kube-apiserver: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// relay forwards loopback TCP connections to target; paused, it stops forwarding bytes
// (the connections stay open, as in a network partition), resumed it delivers them.
type relay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	conns  []net.Conn
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	r.cond = sync.NewCond(&r.mu)
	var wg sync.WaitGroup
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); r.pipe(out, in) }()
			go func() { defer wg.Done(); r.pipe(in, out) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.resume()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			for r.paused {
				r.cond.Wait()
			}
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) pause() {
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
}

func (r *relay) resume() {
	r.mu.Lock()
	r.paused = false
	r.cond.Broadcast()
	r.mu.Unlock()
}

// relayKubeconfig writes a copy of kubeconfig whose server (host:port) is the relay's.
func relayKubeconfig(t *testing.T, kubeconfig, host, relayAddr string) string {
	t.Helper()
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), host) {
		t.Fatalf("kubeconfig %s does not name server %s", kubeconfig, host)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), host, relayAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
