// Command benchfairness measures how much one tenant of the proxy can hurt another: the built
// `metalgate proxy` in static mode (no API server), on 127.0.0.1 only, with two namespaces:
//
//	victim  v.test   a fast backend, no authentication        steady requests (the measure)
//	        va.test  the same backend, basic auth, bcrypt 5    logins with a wrong password
//	flood   fs.test  a slow backend (answers after -slow)      -slow-clients requests in flight
//	        fa.test  basic auth, bcrypt 12 (the cap)           -auth-clients wrong passwords, no pause
//	        (any)    -idle-conns idle connections held open, and -churn new connections a second
//
// The victim's client runs in this process, paced (open loop: a request every 1/-rps, each on
// its own goroutine, so a slow answer does not delay the next request); the flood runs in a
// child process (this binary again, -role flood), so that the victim's timings do not include
// the flood's own scheduling. Six phases of -duration each: quiet, then under each part of
// the flood alone (slow, auth, conns), then under all of it at once (all), then quiet again;
// a flood phase measures from -warmup after the flood started. It prints a table and, as its
// last line:
//
//	RESULT fairness_victim_p99_ratio=<all p99 / the lower quiet p99 of v.test> fairness_victim_success=<fraction>
//
// The success fraction counts both victim series under the whole flood: v.test answered 200 and
// va.test answered 401 (the wrong password checked), each within -timeout. The goal is a ratio
// ≤ 2 and a success ≥ 0.999. Everything — proxy, backends, both clients — shares the
// machine's cores; the table says what the flood achieved, so a reader can tell a fair proxy
// from a flood that did not flood.
//
// Usage (make bench-fairness builds the binary and runs this):
//
//	go run ./e2e/cmd/benchfairness -metalgate bin/metalgate [-duration 20s] [-proxy-args "--auth-check-slots=2"]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchfairness:", err)
		os.Exit(1)
	}
}

type options struct {
	Role        string
	Metalgate   string
	ProxyArgs   string
	Proxy       string // the flood role: the proxy's address
	Duration    time.Duration
	Warmup      time.Duration
	RPS         int
	LoginRPS    int
	Timeout     time.Duration
	Slow        time.Duration
	SlowClients int
	AuthClients int
	IdleConns   int
	Churn       int
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Role, "role", "bench", "bench (the whole run) or flood (the child that floods -proxy).")
	fs.StringVar(&o.Metalgate, "metalgate", "bin/metalgate", "The metalgate binary.")
	fs.StringVar(&o.ProxyArgs, "proxy-args", "", "More flags for metalgate proxy, space-separated.")
	fs.StringVar(&o.Proxy, "proxy", "", "The flood role: the proxy's HTTP address.")
	fs.DurationVar(&o.Duration, "duration", 12*time.Second, "How long each of the six phases measures the victim.")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "Flood time before the victim is measured under it.")
	fs.IntVar(&o.RPS, "rps", 100, "The victim's steady requests a second (v.test).")
	fs.IntVar(&o.LoginRPS, "login-rps", 10, "The victim's logins a second (va.test, wrong password: a bcrypt check each).")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "A victim request not answered by then failed.")
	fs.DurationVar(&o.Slow, "slow", time.Second, "How long the flood's slow backend takes to answer.")
	fs.IntVar(&o.SlowClients, "slow-clients", 256, "Flood requests in flight to the slow backend.")
	fs.IntVar(&o.AuthClients, "auth-clients", 32, "Flood clients sending wrong passwords (half as unknown users), each as fast as it is answered.")
	fs.IntVar(&o.IdleConns, "idle-conns", 1000, "Idle connections the flood holds open (reopened when the proxy closes them).")
	fs.IntVar(&o.Churn, "churn", 200, "New connections a second the flood opens, one request each (fa.test without credentials).")
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("benchfairness", flag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Role == "flood" {
		return floodRole(ctx, o, stdout)
	}
	deadline := 6*o.Duration + 4*o.Warmup + 30*time.Second // start-up and shut-downs included
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	return bench(ctx, o, stdout)
}

// backends are the benchmark's HTTP servers on 127.0.0.1.
type backends struct {
	fast, slow string // addresses
	close      func()
}

func startBackends(slow time.Duration) (*backends, error) {
	body := []byte(`{"ok":true}`)
	fast := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	slowH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
		}
		_, _ = w.Write(body)
	})
	var closers []func()
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("backend listener: %w", err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		closers = append(closers, func() { srv.Close() })
		return ln.Addr().String(), nil
	}
	b := &backends{close: func() {
		for _, c := range closers {
			c()
		}
	}}
	var err error
	if b.fast, err = serve(fast); err != nil {
		return nil, err
	}
	if b.slow, err = serve(slowH); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// staticConfig is the proxy's --static-config: the two namespaces' Ingresses, Services,
// EndpointSlices and htpasswd Secrets.
func staticConfig(b *backends) ([]byte, error) {
	victimHash, err := bcrypt.GenerateFromPassword([]byte("alice-password"), 5)
	if err != nil {
		return nil, fmt.Errorf("victim's bcrypt hash: %w", err)
	}
	floodHash, err := bcrypt.GenerateFromPassword([]byte("mallory-password"), table.MaxBcryptCost)
	if err != nil {
		return nil, fmt.Errorf("flood's bcrypt hash: %w", err)
	}
	class := "metalgate"
	objs := []any{&networkingv1.IngressClass{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}}
	service := func(ns, name, addr string) {
		host, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		objs = append(objs,
			&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
			&discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(port))}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}})
	}
	ingress := func(ns, name, host, svc string, secret []byte) {
		ing := &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}},
				}}}}}}}}
		if secret != nil {
			ing.Annotations = map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": name + "-users"}
			objs = append(objs, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-users", UID: types.UID("uid-" + ns + "-" + name)},
				Data:       map[string][]byte{"auth": secret}})
		}
		objs = append(objs, ing)
	}
	service("victim", "fast", b.fast)
	ingress("victim", "v", "v.test", "fast", nil)
	ingress("victim", "va", "va.test", "fast", append([]byte("alice:"), victimHash...))
	service("flood", "slow", b.slow)
	service("flood", "fast", b.fast)
	ingress("flood", "fs", "fs.test", "slow", nil)
	ingress("flood", "fa", "fa.test", "fast", append([]byte("mallory:"), floodHash...))
	var out []byte
	for _, obj := range objs {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("static config: %w", err)
		}
		out = append(append(out, "---\n"...), y...)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// freePort returns a loopback address nothing listens on (for the proxy's flags).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func bench(ctx context.Context, o options, stdout io.Writer) error {
	b, err := startBackends(o.Slow)
	if err != nil {
		return err
	}
	defer b.close()
	conf, err := staticConfig(b)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "benchfairness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	confFile := filepath.Join(dir, "static.yaml")
	if err := os.WriteFile(confFile, conf, 0o600); err != nil {
		return err
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	proxyLog, err := os.Create(filepath.Join(dir, "proxy.log"))
	if err != nil {
		return err
	}
	defer proxyLog.Close()
	args := append([]string{"proxy", "--static-config", confFile, "--http-bind-address", addr, "--https-bind-address", "0", "--admin-bind-address", "0"},
		strings.Fields(o.ProxyArgs)...)
	proxy := exec.CommandContext(ctx, o.Metalgate, args...)
	proxy.Stdout, proxy.Stderr = proxyLog, proxyLog
	proxy.Cancel = func() error { return proxy.Process.Signal(syscall.SIGTERM) }
	proxy.WaitDelay = 10 * time.Second
	if err := proxy.Start(); err != nil {
		return fmt.Errorf("start %s: %w", o.Metalgate, err)
	}
	defer func() { _ = proxy.Cancel(); _ = proxy.Wait() }()

	victim := newVictim(addr, o.Timeout)
	defer victim.client.CloseIdleConnections()
	if err := victim.waitReady(ctx); err != nil {
		log, _ := os.ReadFile(proxyLog.Name())
		return fmt.Errorf("proxy not serving: %w\n%s", err, log)
	}
	fmt.Fprintf(stdout, "proxy %s on %s, %d CPUs; victim %d req/s to v.test + %d logins/s to va.test; each phase %s\n",
		o.Metalgate, addr, runtime.NumCPU(), o.RPS, o.LoginRPS, o.Duration)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	all := floodConfig{"all", o.SlowClients, o.AuthClients, o.IdleConns, o.Churn}
	// Quiet twice, first and last: on a shared machine one quiet phase may catch a stall of
	// its own; the ratio takes the lower of the two (the stricter).
	phases := []floodConfig{{name: "quiet"}, {"slow", o.SlowClients, 0, 0, 0}, {"auth", 0, o.AuthClients, 0, 0},
		{"conns", 0, 0, o.IdleConns, o.Churn}, all, {name: "quiet"}}
	results := make([]phaseResult, len(phases))
	reports := make([]floodReport, len(phases))
	for i, ph := range phases {
		if ph == (floodConfig{name: "quiet"}) {
			results[i] = victim.measure(ctx, o.Duration, o.RPS, o.LoginRPS)
			continue
		}
		if results[i], reports[i], err = floodPhase(ctx, o, self, addr, ph, victim); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("run time bound: %w", ctx.Err())
	}

	w := stdout
	fmt.Fprintf(w, "\n%-7s %-8s %9s %9s %9s %9s %9s %9s  %s\n", "phase", "series", "requests", "success", "p50_ms", "p99_ms", "max_ms", "req/s", "statuses")
	for i, ph := range phases {
		for _, s := range []*series{results[i].steady, results[i].login} {
			fmt.Fprintf(w, "%-7s %-8s %9d %9.4f %9.2f %9.2f %9.2f %9.1f  %s\n", ph.name, s.name, s.n(), s.success(), s.quantile(0.5), s.quantile(0.99), s.quantile(1),
				float64(s.n())/o.Duration.Seconds(), s.statuses())
		}
	}
	fmt.Fprintf(w, "\nwhat the flood did in each phase (from %s before the victim's measure to its end):\n", o.Warmup)
	for i, ph := range phases {
		for _, name := range slices.Sorted(maps.Keys(reports[i].Counts)) {
			fmt.Fprintf(w, "  %-6s %-28s %d\n", ph.name, name, reports[i].Counts[name])
		}
	}
	flooded := results[len(results)-2]
	quietP99 := min(results[0].steady.quantile(0.99), results[len(results)-1].steady.quantile(0.99))
	ratio := flooded.steady.quantile(0.99) / quietP99
	ok := flooded.steady.ok.Load() + flooded.login.ok.Load()
	n := flooded.steady.n() + flooded.login.n()
	success := 0.0
	if n > 0 {
		success = float64(ok) / float64(n)
	}
	fmt.Fprintf(w, "RESULT fairness_victim_p99_ratio=%.2f fairness_victim_success=%.4f\n", ratio, success)
	return nil
}

// floodConfig is one flood phase: what the child process sends.
type floodConfig struct {
	name                         string
	slow, auth, idleConns, churn int
}

// floodPhase runs the flood child with fc, measures the victim under it after o.Warmup, and
// stops the child.
func floodPhase(ctx context.Context, o options, self, addr string, fc floodConfig, v *victim) (phaseResult, floodReport, error) {
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	child := exec.CommandContext(floodCtx, self, "-role", "flood", "-proxy", addr, "-slow-clients", strconv.Itoa(fc.slow),
		"-auth-clients", strconv.Itoa(fc.auth), "-idle-conns", strconv.Itoa(fc.idleConns), "-churn", strconv.Itoa(fc.churn))
	child.Cancel = func() error { return child.Process.Signal(syscall.SIGTERM) }
	child.WaitDelay = 10 * time.Second
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return phaseResult{}, floodReport{}, err
	}
	if err := child.Start(); err != nil {
		return phaseResult{}, floodReport{}, fmt.Errorf("start the flood: %w", err)
	}
	report := make(chan floodReport, 1)
	go func() {
		var r floodReport
		_ = json.NewDecoder(bufio.NewReader(out)).Decode(&r)
		report <- r
	}()
	select {
	case <-time.After(o.Warmup):
	case <-ctx.Done():
		return phaseResult{}, floodReport{}, ctx.Err()
	}
	res := v.measure(ctx, o.Duration, o.RPS, o.LoginRPS)
	stopFlood()
	r := <-report
	_ = child.Wait()
	return res, r, nil
}

// victim is the victim tenant's client.
type victim struct {
	addr   string
	client *http.Client
}

func newVictim(addr string, timeout time.Duration) *victim {
	return &victim{addr: addr, client: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
}

func (v *victim) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if code, _ := v.get(ctx, "v.test", false); code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("v.test never answered 200")
		case <-tick.C:
		}
	}
}

// get sends one request; it returns the status (0 for none) and the latency.
func (v *victim) get(ctx context.Context, host string, login bool) (int, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+v.addr+"/", nil)
	if err != nil {
		return 0, 0
	}
	req.Host = host
	if login {
		req.SetBasicAuth("alice", "not-alice-password")
	}
	start := time.Now()
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, time.Since(start)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// series is one kind of victim request's outcomes.
type series struct {
	name string
	want int
	ok   atomic.Int64
	mu   sync.Mutex
	lat  []float64 // ms, every request (failed ones at their time of failure)
	code map[int]int
}

func (s *series) add(code int, d time.Duration) {
	if code == s.want {
		s.ok.Add(1)
	}
	s.mu.Lock()
	s.lat = append(s.lat, float64(d.Microseconds())/1000)
	s.code[code]++
	s.mu.Unlock()
}

func (s *series) n() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.lat))
}

func (s *series) success() float64 {
	if n := s.n(); n > 0 {
		return float64(s.ok.Load()) / float64(n)
	}
	return 0
}

// quantile is the q-quantile of the latencies (nearest rank); NaN for none.
func (s *series) quantile(q float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lat) == 0 {
		return math.NaN()
	}
	l := slices.Clone(s.lat)
	slices.Sort(l)
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[max(i, 0)]
}

func (s *series) statuses() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, c := range slices.Sorted(func(yield func(int) bool) {
		for k := range s.code {
			if !yield(k) {
				return
			}
		}
	}) {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "error"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", name, s.code[c]))
	}
	return strings.Join(parts, " ")
}

type phaseResult struct{ steady, login *series }

// measure sends the victim's requests for d, paced: rps to v.test (want 200), loginRPS to
// va.test (want 401), each request on its own goroutine; it returns when all are answered.
func (v *victim) measure(ctx context.Context, d time.Duration, rps, loginRPS int) phaseResult {
	r := phaseResult{steady: &series{name: "v.test", want: http.StatusOK, code: map[int]int{}},
		login: &series{name: "va.test", want: http.StatusUnauthorized, code: map[int]int{}}}
	var wg sync.WaitGroup
	pace := func(perSecond int, s *series, host string, login bool) {
		if perSecond <= 0 {
			return
		}
		interval := time.Second / time.Duration(perSecond)
		start := time.Now()
		for i := 0; ; i++ {
			at := start.Add(time.Duration(i) * interval)
			if at.Sub(start) >= d {
				return
			}
			select {
			case <-time.After(time.Until(at)):
			case <-ctx.Done():
				return
			}
			wg.Go(func() { code, lat := v.get(ctx, host, login); s.add(code, lat) })
		}
	}
	var pacers sync.WaitGroup
	pacers.Go(func() { pace(rps, r.steady, "v.test", false) })
	pacers.Go(func() { pace(loginRPS, r.login, "va.test", true) })
	pacers.Wait()
	wg.Wait()
	return r
}

// floodReport is what the flood child did, by outcome.
type floodReport struct {
	Counts map[string]int64 `json:"counts"`
}

// floodRole floods the proxy until ctx ends (SIGTERM from the parent), then prints its
// floodReport as JSON.
func floodRole(ctx context.Context, o options, stdout io.Writer) error {
	var mu sync.Mutex
	counts := map[string]int64{}
	count := func(k string) { mu.Lock(); counts[k]++; mu.Unlock() }
	status := func(prefix string, code int, err error) {
		if err != nil {
			if ctx.Err() == nil {
				count(prefix + " error")
			}
			return
		}
		count(prefix + " " + strconv.Itoa(code))
	}
	do := func(c *http.Client, host, user string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.Proxy+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, "wrong")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	keepAlive := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.SlowClients + o.AuthClients}}
	var wg sync.WaitGroup
	for range o.SlowClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, err := do(keepAlive, "fs.test", "")
				status("slow backend", code, err)
			}
		})
	}
	for i := range o.AuthClients {
		user := "mallory"
		if i%2 == 1 {
			user = fmt.Sprintf("nobody%d", i)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				code, err := do(keepAlive, "fa.test", user)
				status("wrong password", code, err)
			}
		})
	}
	for range o.IdleConns {
		wg.Go(func() {
			var d net.Dialer
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", o.Proxy)
				if err != nil {
					status("idle connection", 0, err)
					return
				}
				count("idle connection opened")
				go func() { <-ctx.Done(); c.Close() }()
				_, _ = c.Read(make([]byte, 1)) // until the proxy closes it (read header timeout)
				c.Close()
			}
		})
	}
	if o.Churn > 0 {
		churn := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		wg.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(o.Churn))
			defer tick.Stop()
			var inflight sync.WaitGroup
			defer inflight.Wait()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				inflight.Go(func() {
					code, err := do(churn, "fa.test", "")
					status("new connection", code, err)
				})
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return json.NewEncoder(stdout).Encode(floodReport{Counts: counts})
}
