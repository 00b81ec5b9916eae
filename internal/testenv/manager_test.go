package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// TestStartManager: what setup registers runs, with the test's logger in its context, and
// stop returns only after it has returned (a test that stops its manager can assert on what
// the manager left behind).
func TestStartManager(t *testing.T) {
	e := Start(t, Options{})
	started, returned := make(chan struct{}, 1), make(chan struct{})
	log := Logger(t, "manager")
	stop := StartManager(t, e.Config, ctrl.Options{Scheme: e.Scheme, Logger: log}, func(ctx context.Context, mgr manager.Manager) error {
		if got := logr.FromContextOrDiscard(ctx); got.GetSink() != log.GetSink() {
			t.Errorf("setup's context carries logger %v, want the one given", got)
		}
		return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // a runnable slow to stop: stop must wait for it
			close(returned)
			return nil
		}))
	})
	Receive(t, time.Minute, "the runnable starts", started)
	stop()
	select {
	case <-returned:
	default:
		t.Fatal("stop returned before the manager's runnable did")
	}
	stop() // a second call (the test's cleanup makes one) returns at once
}
