package ticketkeys

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/dataplane"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// replica is one proxy replica's Keeper and what it was last given.
type replica struct {
	k    *Keeper
	mu   sync.Mutex
	keys [][Size]byte
	sets int
}

func (r *replica) set(keys [][Size]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys, r.sets = keys, r.sets+1
}

func (r *replica) inUse() ([][Size]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys, r.sets
}

// logBuffer collects a Keeper's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (b *logBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func setupNamespace(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(testenv.Start(t, testenv.Options{}).Config)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mg"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestKeeper runs replicas' Keepers against a real API server on a clock of the test's: the
// replicas that start together agree on one key; of those that find it due together exactly
// one rotates (the others' Updates conflict, and they read its key); a new key decrypts at
// once and encrypts only once promoted; expired keys go. A person's entries in the Secret,
// malformed or not, are left alone and reported once; a failed read keeps the keys in use.
func TestKeeper(t *testing.T) {
	cs := setupNamespace(t)
	ctx := context.Background()
	id := types.NamespacedName{Namespace: "mg", Name: "metalgate-proxy-tls-tickets"}
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	replicas := make([]*replica, 8)
	for i := range replicas {
		r := &replica{}
		r.k = &Keeper{Secrets: cs.CoreV1(), Secret: id, Policy: defaults, Poll: time.Second, Set: r.set,
			Labels: map[string]string{"app.kubernetes.io/component": "proxy"}, Metrics: metrics, Log: logs.logger(), Now: now}
		replicas[i] = r
	}
	syncAll := func(rs []*replica) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(rs))
		for i, r := range rs {
			wg.Go(func() { errs[i] = r.k.Sync(ctx) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
		}
	}
	secretKeys := func() []Key {
		t.Helper()
		s, err := cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := Parse(s.Data, now())
		return keys
	}
	// every replica uses want (encrypting first), and the Secret holds exactly those keys.
	agree := func(step string, want ...Key) {
		t.Helper()
		for i, r := range replicas {
			keys, _ := r.inUse()
			if len(keys) != len(want) {
				t.Fatalf("%s: replica %d uses %d keys, want %d", step, i, len(keys), len(want))
			}
			for j := range want {
				if keys[j] != want[j].Bytes {
					t.Fatalf("%s: replica %d key %d is not the one wanted (made %s)", step, i, j, want[j].Created)
				}
			}
		}
		if got := secretKeys(); len(got) != len(want) {
			t.Fatalf("%s: the Secret holds %d keys, want %d", step, len(got), len(want))
		}
	}

	syncAll(replicas)
	first := secretKeys()
	if len(first) != 1 {
		t.Fatalf("replicas starting together made %d keys, want 1", len(first))
	}
	agree("start", first[0])
	if got := testutil.ToFloat64(metrics.Rotation); got != 1 {
		t.Errorf("rotations %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.KeyMade); got != float64(first[0].Created.Unix()) {
		t.Errorf("encrypting key made at %v, want %d", got, first[0].Created.Unix())
	}
	s, err := cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
	if err != nil || s.Labels["app.kubernetes.io/component"] != "proxy" || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("the Secret made: %v, labels %v, type %q", err, s.Labels, s.Type)
	}

	advance(61 * time.Minute)
	syncAll(replicas)
	second := secretKeys()
	if len(second) != 2 || second[1] != first[0] {
		t.Fatalf("after the rotation period: keys %v, want a new one before the first", second)
	}
	if got := testutil.ToFloat64(metrics.Rotation); got != 2 {
		t.Errorf("rotations %v, want 2: one replica rotates, the others read its key", got)
	}
	agree("a new key, not promoted yet", first[0], second[0])

	advance(defaults.Promote)
	syncAll(replicas)
	agree("the new key promoted", second[0], first[0])

	// A person's entries: a malformed key and a note.
	s, err = cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["ticket-key-soon"] = []byte("short")
	s.Data["note"] = []byte("do not delete")
	if _, err := cs.CoreV1().Secrets(id.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	syncAll(replicas)
	syncAll(replicas)
	agree("with a person's entries", second[0], first[0])
	if n := logs.count("data.ticket-key-soon: want ticket-key-<Unix seconds>"); n != len(replicas) {
		t.Errorf("the malformed entry was logged %d times, want once per replica (%d)", n, len(replicas))
	}

	advance(12 * time.Hour)
	syncAll(replicas)
	third := secretKeys()
	if len(third) != 1 || third[0] == second[0] {
		t.Fatalf("12h later: keys %v, want one new key (both earlier ones expired)", third)
	}
	agree("the earlier keys expired", third[0])
	s, err = cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["ticket-key-soon"]) != "short" || string(s.Data["note"]) != "do not delete" {
		t.Errorf("a person's entries after rotations: %q, %q; want them as they were", s.Data["ticket-key-soon"], s.Data["note"])
	}

	// A failed read: an error, counted; the keys in use stay, Set is not called.
	_, setsBefore := replicas[0].inUse()
	errorsBefore := testutil.ToFloat64(metrics.Syncs.WithLabelValues("error"))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := replicas[0].k.Sync(cancelled); err == nil || !strings.Contains(err.Error(), id.String()) {
		t.Errorf("Sync with the API server unreachable: %v, want an error naming the Secret", err)
	}
	if keys, sets := replicas[0].inUse(); sets != setsBefore || len(keys) != 1 || keys[0] != third[0].Bytes {
		t.Errorf("after a failed read: %d keys, Set called %d more times; want the keys in use kept", len(keys), sets-setsBefore)
	}
	if got := testutil.ToFloat64(metrics.Syncs.WithLabelValues("error")) - errorsBefore; got != 1 {
		t.Errorf("failed syncs counted %v, want 1", got)
	}

	// While the Secret cannot be read, time still promotes and expires the keys last read.
	advance(61 * time.Minute)
	syncAll(replicas)
	fourth := secretKeys()
	agree("the next rotation", third[0], fourth[0])
	advance(defaults.Promote)
	if err := replicas[0].k.Sync(cancelled); err == nil {
		t.Fatal("Sync with a cancelled context succeeded")
	}
	if keys, _ := replicas[0].inUse(); len(keys) != 2 || keys[0] != fourth[0].Bytes || keys[1] != third[0].Bytes {
		t.Errorf("a new key's promotion while the Secret cannot be read: %d keys in use; want the new key first, then the previous", len(keys))
	}
	advance(12 * time.Hour)
	_, setsBefore = replicas[0].inUse()
	if err := replicas[0].k.Sync(cancelled); err == nil {
		t.Fatal("Sync with a cancelled context succeeded")
	}
	if keys, sets := replicas[0].inUse(); keys != nil || sets != setsBefore+1 {
		t.Errorf("every key read expired, Secret unreadable: %d keys in use (Set called %d more times); want nil (keys of the process's own)", len(keys), sets-setsBefore)
	}
	if got := testutil.ToFloat64(metrics.KeyMade); got != 0 {
		t.Errorf("encrypting key made at %v with no shared key live, want 0", got)
	}
	if logs.count("no shared TLS session ticket key is live") != 1 {
		t.Error("falling back to the process's own keys was not logged once")
	}
	if err := replicas[0].k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, _ := replicas[0].inUse(); len(keys) != 1 || keys[0] != secretKeys()[0].Bytes {
		t.Errorf("back in reach of the Secret: %d keys in use, want its one new key", len(keys))
	}
}

// TestKeeperResumesAcrossReplicas: two proxies, each with its own Keeper on one Secret,
// serve real TLS on loopback; a client's session made at one resumes at the other, on TLS
// 1.2 and 1.3. A third proxy on another Secret (another proxy installation) does not resume
// it.
func TestKeeperResumesAcrossReplicas(t *testing.T) {
	cs := setupNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(secret string) string {
		t.Helper()
		tab, problems := ingress.Build(ingress.Input{})
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		s, err := dataplane.New(dataplane.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(tab)
		k := &Keeper{Secrets: cs.CoreV1(), Secret: types.NamespacedName{Namespace: "mg", Name: secret}, Policy: defaults, Poll: time.Hour,
			Set: s.SetSessionTicketKeys, Log: logr.Discard()}
		if err := k.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var lns [2]net.Listener
		for i := range lns {
			if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		sctx, stop := context.WithCancel(ctx)
		go func() { done <- s.Serve(sctx, lns[0], lns[1]) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		return lns[1].Addr().String()
	}
	a, b, other := start("shared"), start("shared"), start("another")
	resumed := func(addr string, version uint16, cache tls.ClientSessionCache) bool {
		t.Helper()
		tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{ServerName: "x.example", InsecureSkipVerify: true, //nolint:gosec // the proxy's default certificate is not what is tested
			MinVersion: version, MaxVersion: version, ClientSessionCache: cache}}
		defer tr.CloseIdleConnections()
		// The proxy has no route: 404, after which a TLS 1.3 client has its ticket.
		resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("https://%s/", addr))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d, want 404", resp.StatusCode)
		}
		return resp.TLS.DidResume
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			cache := tls.NewLRUClientSessionCache(1)
			if resumed(a, version, cache) {
				t.Fatal("the first connection resumed a session")
			}
			if !resumed(b, version, cache) {
				t.Error("a session made at one replica was not resumed at the other")
			}
			if resumed(other, version, cache) {
				t.Error("a proxy with another Secret resumed the session")
			}
		})
	}
}

// TestKeeperRunLogsOnce: Run against a Secret it cannot make (its namespace does not exist)
// logs the error once, not every poll, counts every failed read, and says when it reads the
// keys again.
func TestKeeperRunLogsOnce(t *testing.T) {
	cs := setupNamespace(t)
	logs := &logBuffer{}
	logger := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.lines = append(logs.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
	metrics := NewMetrics(prometheus.NewRegistry())
	r := &replica{}
	k := &Keeper{Secrets: cs.CoreV1(), Secret: types.NamespacedName{Namespace: "later", Name: "tickets"}, Policy: defaults,
		Poll: 10 * time.Millisecond, Set: r.set, Metrics: metrics, Log: logger}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	testenv.Eventually(t, 30*time.Second, "five failed reads", func() error {
		if n := testutil.ToFloat64(metrics.Syncs.WithLabelValues("error")); n < 5 {
			return fmt.Errorf("%v failed reads", n)
		}
		return nil
	})
	if n := logs.count("TLS session ticket keys not read"); n != 1 {
		t.Errorf("the lasting failure was logged as an error %d times, want once", n)
	}
	if n := logs.count("still not read"); n < 4 {
		t.Errorf("%d repeats at V(1), want one per further failed read", n)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the keys read again", func() error {
		if logs.count("TLS session ticket keys read again") != 1 {
			return fmt.Errorf("not logged yet")
		}
		if keys, _ := r.inUse(); len(keys) != 1 {
			return fmt.Errorf("%d keys in use", len(keys))
		}
		return nil
	})
}
