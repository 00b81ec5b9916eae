package testenv

import (
	"context"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager returns a controller-runtime manager on the API server of c for one test. Its
// metrics server and health probes are off unless opts sets them (tests run side by side and
// must not fight over ports); the logger is opts.Logger. An error fails the test.
func NewManager(t testing.TB, c *rest.Config, opts ctrl.Options) manager.Manager {
	t.Helper()
	if opts.Metrics.BindAddress == "" {
		opts.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	mgr, err := ctrl.NewManager(c, opts)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	return mgr
}

// StartManager builds a manager as NewManager does, lets setup register what the test runs
// on it (setup's ctx carries opts.Logger and ends when the manager stops), and runs it until
// the returned stop function is called or the test ends; stop returns once the manager has
// stopped. A setup error fails the test; so does the manager's Start returning one.
func StartManager(t testing.TB, c *rest.Config, opts ctrl.Options, setup func(ctx context.Context, mgr manager.Manager) error) (stop func()) {
	t.Helper()
	mgr := NewManager(t, c, opts)
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), opts.Logger))
	if err := setup(ctx, mgr); err != nil {
		cancel()
		t.Fatalf("set up the manager: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
