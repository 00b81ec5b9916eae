package controllers_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

// make stress-alloc sets these; make test runs the defaults (a short run).
var (
	stressDuration = flag.Duration("stress.duration", 20*time.Second, "TestStressRivals: how long the churn runs")
	stressRivals   = flag.Int("stress.rivals", 3, "TestStressRivals: controllers running at once, leader election off")
	stressHog      = flag.Int("stress.hog", 2, "TestStressRivals: goroutines burning CPU beside the control plane")
	stressSeed     = flag.Uint64("stress.seed", 0, "TestStressRivals: random seed (0: from the clock; the seed is printed)")
	stressWorkers  = flag.Int("stress.workers", 4, "TestStressRivals: goroutines changing Services at once")
	stressLogDir   = flag.String("stress.logdir", "", "TestStressRivals: also write each rival's whole log to <dir>/rival-N.log")
)

// TestStressRivals runs rival controllers (leader election off, as during a Lease handover, a
// partition or a second install) over a churning set of Services — creates, deletes,
// re-creates, explicit addresses that collide, sharing keys with clashing ports, pool edits —
// while killing and restarting controllers mid-flight and burning CPU beside them. A watch on
// every Service checks invariant 1 at every status change, not only at the end: no address is
// shown by two Services unless they share it by key on disjoint ports. At the end, once quiet,
// every address a Service shows is held by its claim for that Service, and no Service that
// could have an address waits for one. make stress-alloc runs it for minutes and prints
// RESULT double_assignments=… services=… rivals=… kills=….
func TestStressRivals(t *testing.T) {
	kube.Need(t)
	seed := *stressSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("stress: seed=%d duration=%s rivals=%d hog=%d\n", seed, *stressDuration, *stressRivals, *stressHog)
	const prefix = "10.210.0."
	p := pool(t, "stress", nil, prefix+"0/26")
	ns := namespace(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	chk := newInvariantWatch(t, ctx, ns)

	// CPU contention: the API server, etcd and the controllers all share the machine's cores
	// with these.
	var hogs sync.WaitGroup
	hogCtx, stopHogs := context.WithCancel(ctx)
	for range *stressHog {
		hogs.Go(func() {
			x := uint64(1)
			for hogCtx.Err() == nil {
				for range 100000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		})
	}
	defer func() { stopHogs(); hogs.Wait() }()

	logs := make([]*ringLog, 0, 16)
	start := func(i int) func() {
		l := newRingLog(fmt.Sprintf("rival-%d", i), stressLogTail)
		if *stressLogDir != "" {
			f, err := os.Create(filepath.Join(*stressLogDir, l.name+".log"))
			if err != nil {
				t.Fatalf("rival log: %v", err)
			}
			t.Cleanup(func() { _ = f.Close() }) // after the rival has stopped: cleanups run last first
			l.file = f
		}
		logs = append(logs, l)
		return startControllerLogged(t, cfg, controllers.Options{}, l.logger())
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The last lines only: a run kills and starts a dozen rivals, and their whole logs
			// would bury what failed.
			for _, l := range logs {
				t.Logf("%s (last %d lines):\n%s", l.name, stressLogTail, l.tail(stressLogTail))
			}
			t.Logf("the same random choices (not the same timing): make stress-alloc STRESS_SEED=%d STRESS_DURATION=%s", seed, *stressDuration)
		}
	})
	rivals := make([]func(), *stressRivals)
	started := 0
	for i := range rivals {
		rivals[i] = start(started)
		started++
	}

	// Churn: several workers, each with its own Services and random stream; the main loop kills
	// rivals and edits the pool meanwhile.
	workers := make([]*churn, *stressWorkers)
	var wg sync.WaitGroup
	deadline := time.Now().Add(*stressDuration)
	for i := range workers {
		w := &churn{t: t, ns: ns, prefix: prefix, tag: string(rune('a' + i)),
			rng: rand.New(rand.NewPCG(seed+uint64(i), seed^0x9e3779b97f4a7c15)), ops: map[string]int{}, ever: map[string]bool{}}
		workers[i] = w
		wg.Go(func() {
			for time.Now().Before(deadline) && !t.Failed() {
				w.step()
				time.Sleep(time.Duration(w.rng.IntN(10)) * time.Millisecond) // pacing, not synchronisation
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed^1, seed))
	killEvery := max(*stressDuration/8, 2*time.Second)
	kills, edits := 0, 0
	narrow := false
	tick := time.NewTicker(killEvery / 2)
	for time.Now().Before(deadline) && !t.Failed() {
		<-tick.C
		if rng.IntN(2) == 0 {
			// A rival dies mid-flight (its context ends: in-flight API calls are cut off) and a
			// new one, knowing nothing, starts in its place.
			i := rng.IntN(len(rivals))
			rivals[i]()
			rivals[i] = start(started)
			started++
			kills++
			continue
		}
		// Pool edit: the pool shrinks to its first half and grows back. Services whose addresses
		// leave it must move, never to an address someone shows.
		narrow = !narrow
		cidr := prefix + "0/26"
		if narrow {
			cidr = prefix + "0/27"
		}
		if err := editPool(p.Name, cidr); err != nil {
			t.Errorf("edit pool: %v", err)
		}
		edits++
	}
	tick.Stop()
	wg.Wait()
	if narrow {
		if err := editPool(p.Name, prefix+"0/26"); err != nil {
			t.Errorf("edit pool: %v", err)
		}
	}
	stopHogs()

	// Quiet: the rivals settle. Every address shown is held for that Service, and no auto-
	// assigned Service waits while the pool has addresses nobody claims.
	testenv.Eventually(t, 90*time.Second, "the rivals settle", func() error { return settled(ns, prefix) })
	chk.stop()
	violations, events := chk.result()
	ops := map[string]int{"pool edit": edits}
	created := 0
	for _, w := range workers {
		created += len(w.ever)
		for k, n := range w.ops {
			ops[k] += n
		}
	}
	fmt.Printf("stress: %-28s %d\n", "status changes checked", events)
	fmt.Printf("stress: %-28s %d\n", "services created", created)
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Printf("stress: %-28s %d\n", "op "+k, ops[k])
	}
	fmt.Printf("stress: %-28s %d\n", "rival kills", kills)
	fmt.Printf("stress: %-28s %d\n", "double assignments", len(violations))
	fmt.Printf("RESULT double_assignments=%d services=%d rivals=%d kills=%d status_changes=%d seed=%d\n",
		len(violations), created, *stressRivals, kills, events, seed)
	for i, v := range violations {
		if i == 10 {
			t.Errorf("… and %d more", len(violations)-10)
			break
		}
		t.Errorf("double assignment: %s", v)
	}
	assertNoAddressHeldTwice(t)
}

// churn makes random changes to the Services of one namespace.
type churn struct {
	t      *testing.T
	ns     string
	prefix string
	tag    string // in every name this worker makes, so workers never touch each other's
	rng    *rand.Rand
	seq    int
	live   []string
	ever   map[string]bool
	ops    map[string]int
}

func (w *churn) create(kind string, opts ...svcOpt) {
	w.seq++
	name := fmt.Sprintf("%s%s%04d", kind, w.tag, w.seq)
	if _, err := createService(w.ns, name, opts...); err != nil {
		w.t.Errorf("create: %v", err)
		return
	}
	w.live = append(w.live, name)
	w.ever[name] = true
}

func (w *churn) randomAddr() string { return fmt.Sprintf("%s%d", w.prefix, w.rng.IntN(64)) }

func (w *churn) step() {
	n := w.rng.IntN(100)
	switch {
	case len(w.live) < 5 || (n < 35 && len(w.live) < 40):
		w.ops["create"]++
		w.create("a")
	case n < 45 && len(w.live) < 40:
		// An explicit address, often one another Service shows.
		w.ops["create explicit"]++
		w.create("x", withAnnotation(contract.AnnotationLoadBalancerIPs, w.randomAddr()))
	case n < 55 && len(w.live) < 40:
		// A sharing key with one of three ports: some may share, some clash.
		w.ops["create sharing"]++
		key := fmt.Sprintf("k%d", w.rng.IntN(3))
		port := []int32{80, 443, 8080}[w.rng.IntN(3)]
		w.create("s", withAnnotation(contract.AnnotationAllowSharedIP, key), withPort(corev1.ProtocolTCP, port))
	case n < 55:
		return // the set is full: the next step deletes or edits
	case n < 80:
		w.ops["delete"]++
		w.delete(w.rng.IntN(len(w.live)))
	case n < 88:
		// Re-create: the same name again at once, a new UID.
		w.ops["re-create"]++
		i := w.rng.IntN(len(w.live))
		name := w.live[i]
		old := getServiceOrNil(w.ns, name)
		w.delete(i)
		if old != nil {
			old.ResourceVersion, old.UID = "", ""
			old.Status = corev1.ServiceStatus{}
			old.Spec.ClusterIP, old.Spec.ClusterIPs = "", nil
			if err := createWhenGone(old); err != nil {
				w.t.Errorf("re-create %s: %v", name, err)
				return
			}
			w.live = append(w.live, name)
		}
	default:
		// Move an explicit Service to another address, often a taken one.
		w.ops["edit explicit"]++
		var xs []string
		for _, n := range w.live {
			if strings.HasPrefix(n, "x") {
				xs = append(xs, n)
			}
		}
		if len(xs) == 0 {
			return
		}
		name := xs[w.rng.IntN(len(xs))]
		// A merge patch, as kubectl annotate and apply send: no resourceVersion, so the rivals'
		// status writes on the same Service cannot make it conflict (a get-then-update could,
		// over and over on a loaded machine).
		s := &corev1.Service{}
		s.Namespace, s.Name = w.ns, name
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, contract.AnnotationLoadBalancerIPs, w.randomAddr())
		if err := k8sClient.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
			w.t.Errorf("edit %s: %v", name, err)
		}
	}
}

func (w *churn) delete(i int) {
	name := w.live[i]
	w.live = slices.Delete(w.live, i, i+1)
	s := &corev1.Service{}
	s.Namespace, s.Name = w.ns, name
	if err := k8sClient.Delete(context.Background(), s); err != nil && !apierrors.IsNotFound(err) {
		w.t.Errorf("delete %s: %v", name, err)
	}
}

func getServiceOrNil(ns, name string) *corev1.Service {
	var s corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil
	}
	return &s
}

// createWhenGone creates s once the API server has finished deleting the Service of its name.
// It returns an error rather than failing the test: the churn workers call it from their
// goroutines.
func createWhenGone(s *corev1.Service) error {
	var final error // the answer that ended the wait: nil, or an error other than AlreadyExists
	err := testenv.PollEvery(10*time.Millisecond, 10*time.Second, func() error {
		err := k8sClient.Create(context.Background(), s)
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		final = err
		return nil
	})
	return errors.Join(err, final)
}

// editPool sets the pool's addresses with a merge patch, as kubectl apply and patch do: no
// resourceVersion, so the rivals' pool status writes cannot make it conflict.
func editPool(name, cidr string) error {
	p := &v1alpha1.IPAddressPool{}
	p.Namespace, p.Name = controllers.DefaultNamespace, name
	patch := fmt.Sprintf(`{"spec":{"addresses":[%q]}}`, cidr)
	return k8sClient.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// settled reports why the namespace's Services and the claims do not agree yet: an address
// shown without its claim holding that Service, or an automatically assigned Service waiting
// while the pool has unclaimed addresses.
func settled(ns, prefix string) error {
	var svcs corev1.ServiceList
	if err := k8sClient.List(context.Background(), &svcs, client.InNamespace(ns)); err != nil {
		return err
	}
	var claims v1alpha1.IPAddressClaimList
	if err := k8sClient.List(context.Background(), &claims); err != nil {
		return err
	}
	byName := map[string]v1alpha1.IPAddressClaim{}
	claimed := 0
	for _, c := range claims.Items {
		byName[c.Name] = c
		if strings.HasPrefix(c.Spec.Address, prefix) {
			claimed++
		}
	}
	waiting := 0
	for _, s := range svcs.Items {
		shown := s.Status.LoadBalancer.Ingress
		if len(shown) == 0 && strings.HasPrefix(s.Name, "a") && s.DeletionTimestamp == nil {
			waiting++
		}
		for _, ing := range shown {
			c, ok := byName[controllers.ClaimName(netip.MustParseAddr(ing.IP))]
			if !ok {
				return fmt.Errorf("%s shows %s, which has no claim", s.Name, ing.IP)
			}
			if !slices.ContainsFunc(c.Spec.Holders, func(h v1alpha1.ClaimHolder) bool {
				return h.Name == s.Name && h.UID == s.UID && !h.Releasing
			}) {
				return fmt.Errorf("%s shows %s, whose claim holds %+v", s.Name, ing.IP, c.Spec.Holders)
			}
		}
	}
	if free := 64 - claimed; waiting > 0 && free > 0 {
		return fmt.Errorf("%d automatically assigned Services wait while %d addresses are unclaimed", waiting, free)
	}
	return nil
}

// invariantWatch checks invariant 1 at every status change a watch on the namespace's
// Services delivers: the events come in the API server's order, so each check sees one state
// the cluster was in.
type invariantWatch struct {
	mu         sync.Mutex
	svcs       map[string]shownBy
	violations []string
	events     int
	stop       func()
}

type shownBy struct {
	addrs []string
	key   string
	ports []string
}

func newInvariantWatch(t *testing.T, ctx context.Context, ns string) *invariantWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c, err := ctrlcache.New(cfg, ctrlcache.Options{Scheme: scheme, DefaultNamespaces: map[string]ctrlcache.Config{ns: {}}})
	if err != nil {
		t.Fatalf("watch cache: %v", err)
	}
	inf, err := c.GetInformer(ctx, &corev1.Service{})
	if err != nil {
		t.Fatalf("watch informer: %v", err)
	}
	w := &invariantWatch{svcs: map[string]shownBy{}}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.seen(o, false) },
		UpdateFunc: func(_, o any) { w.seen(o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			w.seen(o, true)
		},
	})
	if err != nil {
		t.Fatalf("watch handler: %v", err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("watch did not sync")
	}
	w.stop = cancel
	return w
}

func (w *invariantWatch) seen(o any, deleted bool) {
	s, ok := o.(*corev1.Service)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.svcs[s.Name]
	if deleted {
		delete(w.svcs, s.Name)
		return
	}
	cur := shownBy{key: s.Annotations[contract.AnnotationAllowSharedIP]}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		cur.addrs = append(cur.addrs, ing.IP)
	}
	for _, p := range s.Spec.Ports {
		cur.ports = append(cur.ports, fmt.Sprintf("%s/%d", p.Protocol, p.Port))
	}
	w.svcs[s.Name] = cur
	if slices.Equal(prev.addrs, cur.addrs) {
		return
	}
	w.events++
	for _, a := range cur.addrs {
		for name, other := range w.svcs {
			if name == s.Name || !slices.Contains(other.addrs, a) {
				continue
			}
			if cur.key != "" && cur.key == other.key && !slices.ContainsFunc(cur.ports, func(p string) bool { return slices.Contains(other.ports, p) }) {
				continue // shared by key on disjoint ports
			}
			w.violations = append(w.violations, fmt.Sprintf("%s shown by %s (key %q, ports %v) and %s (key %q, ports %v) at resourceVersion %s",
				a, s.Name, cur.key, cur.ports, name, other.key, other.ports, s.ResourceVersion))
		}
	}
}

func (w *invariantWatch) result() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.violations), w.events
}

// ringLog keeps the last lines a controller logged, to print when the test fails.
type ringLog struct {
	name  string
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
	file  *os.File // every line, when -stress.logdir is set
}

func newRingLog(name string, n int) *ringLog { return &ringLog{name: name, lines: make([]string, n)} }

func (r *ringLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines[r.next] = time.Now().Format("15:04:05.000") + " " + prefix + " " + args
		if r.file != nil {
			_, _ = fmt.Fprintln(r.file, r.lines[r.next])
		}
		r.next = (r.next + 1) % len(r.lines)
		r.full = r.full || r.next == 0
	}, funcr.Options{Verbosity: 1})
}

// stressLogTail is how many of each rival's last lines a failed run prints.
const stressLogTail = 200

// tail returns the last n lines logged, oldest first.
func (r *ringLog) tail(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if r.full {
		out = append(out, r.lines[r.next:]...)
	}
	out = append(out, r.lines[:r.next]...)
	return strings.Join(out[max(0, len(out)-n):], "\n")
}
