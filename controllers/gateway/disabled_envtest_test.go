package gateway_test

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestSetupWithoutGatewayAPI: on an API server without the Gateway API CRDs, Setup registers
// nothing and returns no error, so `metalgate controller` runs as before (a cluster, a lab or
// a test that installs only metalgate's CRDs keeps working).
func TestSetupWithoutGatewayAPI(t *testing.T) {
	needAPIServer(t)
	c := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}, Scheme: scheme}).Config
	mgr, err := ctrl.NewManager(c, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	enabled, err := gateway.Setup(context.Background(), mgr, gateway.Options{SkipNameValidation: true})
	if err != nil || enabled {
		t.Fatalf("Setup without Gateway API: enabled %v, error %v; want disabled, no error", enabled, err)
	}
	// And with it (the package's API server), enabled.
	mgr2, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if enabled, err := gateway.Setup(context.Background(), mgr2, gateway.Options{SkipNameValidation: true}); err != nil || !enabled {
		t.Fatalf("Setup with Gateway API: enabled %v, error %v", enabled, err)
	}
}
