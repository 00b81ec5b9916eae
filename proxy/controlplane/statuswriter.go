package controlplane

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/metalgate/metalgate/internal/leaserelease"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// Election is the status writer's own Lease (Options.StatusElection). Writing Ingress status
// is the proxy's only leader-only work, so it alone runs under this elector, never the
// process: losing the Lease, or failing to renew it while the API server is away, stops the
// status writer and starts a new campaign; watches, the table and the data plane go on
// (issue #25: a proxy that exited for a lost Lease refused a third of the clients in BGP
// mode until the API server came back).
type Election struct {
	// Namespace and Name of the Lease. Required.
	Namespace, Name string
	// Config is the client configuration of the Lease. Required. Give it a rate limit of its
	// own: a renewal delayed behind other requests is a lost Lease.
	Config *rest.Config
	// Identity of this candidate. Default: the host name (the Pod's name) and a random
	// suffix, as controller-runtime names its candidates.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's
	// (leaderelection.LeaderElectionConfig): how long another candidate waits before it
	// takes a Lease not renewed, how long the writer tries to renew before it stops writing,
	// and how often every candidate tries. Defaults 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (e *Election) defaults() error {
	if e.Namespace == "" || e.Name == "" {
		return fmt.Errorf("controlplane: StatusElection: Namespace and Name of the Lease are required")
	}
	if e.Config == nil {
		return fmt.Errorf("controlplane: StatusElection: Config is required")
	}
	if e.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("controlplane: StatusElection: identity from the host name: %w", err)
		}
		e.Identity = host + "_" + string(uuid.NewUUID())
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&e.LeaseDuration, 15*time.Second)
	def(&e.RenewDeadline, 10*time.Second)
	def(&e.RetryPeriod, 2*time.Second)
	return nil
}

// statusWriter campaigns for the Lease, runs one status publisher per term (a fresh one,
// as a restarted process would) and, when the term ends, stops it and campaigns again.
// It runs on every replica (NeedLeaderElection false): the manager has no election.
//
//	source (the builder's snapshots) ──relay──► last ──► term channel ──► publisher of the term
//	campaign ─► won: publisher starts ─► renew fails or Lease lost: publisher stopped ─► campaign
//
// A snapshot handed over during a term goes to that term's publisher; a new term starts
// with the latest one, so it writes at once without waiting for the next change.
type statusWriter struct {
	election Election
	leases   kubernetes.Interface
	// run runs one term's publisher until ctx ends, reading snapshots from in.
	run    func(ctx context.Context, in chan ingress.Input) error
	source <-chan ingress.Input
	gauge  prometheus.Gauge // nil: not exported
	log    logr.Logger

	writing atomic.Bool // a publisher runs (this replica writes status)

	mu   sync.Mutex
	last *ingress.Input
	term chan ingress.Input // the running term's publisher's input, nil between terms
}

func (w *statusWriter) NeedLeaderElection() bool { return false }

// Writing reports whether this replica is the status writer now.
func (w *statusWriter) Writing() bool { return w.writing.Load() }

// Start campaigns until ctx ends; it never returns for a lost Lease. On the way out it
// gives the Lease up when it holds it, so that another replica writes at once.
func (w *statusWriter) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.relay(ctx) }()
	defer wg.Wait()
	w.set(false, "")
	for {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: w.election.Namespace, Name: w.election.Name},
			Client:     w.leases.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: w.election.Identity},
		}
		t := &term{w: w}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: w.election.LeaseDuration,
			RenewDeadline: w.election.RenewDeadline,
			RetryPeriod:   w.election.RetryPeriod,
			// Not ReleaseOnCancel: client-go releases before it ends the term, and while the
			// API server is away that release waits RenewDeadline more, with the publisher
			// still running past the end of the Lease. The release is ours (release, below).
			ReleaseOnCancel: false,
			Name:            w.election.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: t.started,
				OnStoppedLeading: t.stopped,
				OnNewLeader: func(id string) {
					if id != w.election.Identity {
						w.log.Info("another replica writes status", "holder", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("status writer election (Lease %s/%s): %w", w.election.Namespace, w.election.Name, err)
		}
		le.Run(ctx)
		if ctx.Err() != nil {
			if t.led() {
				w.release(lock)
			}
			return nil
		}
		w.log.Info("campaigning again for the status Lease; serving goes on", "lease", w.election.Namespace+"/"+w.election.Name)
	}
}

// term is one campaign: client-go runs started in a goroutine of its own once the Lease is
// won, and stopped when Run returns (the Lease lost, or never won); stopped may even run
// before started has begun.
type term struct {
	w    *statusWriter
	mu   sync.Mutex
	over bool          // stopped has run: a late started must not write
	done chan struct{} // closed when the term's publisher has returned; nil: none started
}

func (t *term) started(ctx context.Context) {
	t.mu.Lock()
	if t.over {
		t.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.done = done
	t.mu.Unlock()
	defer close(done)
	in := t.w.open()
	t.w.set(true, "won the status Lease: this replica writes Ingress status")
	if err := t.w.run(ctx, in); err != nil {
		t.w.log.Error(err, "status publisher")
	}
}

// stopped waits for the term's publisher to return: no status write follows it.
func (t *term) stopped() {
	t.mu.Lock()
	t.over = true
	done := t.done
	t.mu.Unlock()
	if done == nil {
		return
	}
	<-done
	t.w.close()
	t.w.set(false, "lost the status Lease (or could not renew it): status writing stopped; serving the last table goes on")
}

func (t *term) led() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done != nil
}

// open starts a term's input with the latest snapshot.
func (w *statusWriter) open() chan ingress.Input {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.term = make(chan ingress.Input, 1)
	if w.last != nil {
		w.term <- *w.last
	}
	return w.term
}

func (w *statusWriter) close() {
	w.mu.Lock()
	w.term = nil
	w.mu.Unlock()
}

// relay keeps the builder's latest snapshot and hands it to the running term, replacing
// one not read yet (the only sender to a term channel, under mu).
func (w *statusWriter) relay(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-w.source:
			w.mu.Lock()
			w.last = &in
			if w.term != nil {
				select {
				case <-w.term:
				default:
				}
				w.term <- in
			}
			w.mu.Unlock()
		}
	}
}

func (w *statusWriter) set(writing bool, msg string) {
	w.writing.Store(writing)
	if w.gauge != nil {
		v := 0.0
		if writing {
			v = 1
		}
		w.gauge.Set(v)
	}
	if msg != "" {
		w.log.Info(msg, "lease", w.election.Namespace+"/"+w.election.Name, "identity", w.election.Identity)
	}
}

// release gives the Lease up when this replica still holds it (at shutdown), as client-go's
// ReleaseOnCancel would, reading it again after a conflict (internal/leaserelease).
func (w *statusWriter) release(lock resourcelock.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), w.election.RenewDeadline)
	defer cancel()
	released, err := leaserelease.Release(ctx, lock)
	switch {
	case err != nil:
		w.log.Info("could not release the status Lease; another replica takes it when it expires", "error", err.Error())
	case released:
		w.log.Info("released the status Lease")
	}
}
