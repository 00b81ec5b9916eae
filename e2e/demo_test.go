//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metalgate/metalgate/e2e/lab"
)

// TestDemo runs make demo's driver (e2e/cmd/demo) against the lab with a short watch
// (E2E_DEMO_WATCH, default 20s), once per announcement mode: three tenants with their own
// proxies and VIPs, curl through each VIP from the client (on its segment at layer 2, through
// the FRR router with BGP, which must have every VIP from all three nodes), a fourth tenant
// through Gateway API (its own VIP and proxy, curled the same way), a misinstalled
// cluster-wide proxy that must not change any Ingress address and must say why. On success
// everything the demo added is removed again.
func TestDemo(t *testing.T) {
	l := openLab(t)
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/demo").CombinedOutput(); err != nil {
		t.Fatalf("build the demo driver: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return // left for inspection until lab-down
		}
		ctx := context.Background()
		for _, dir := range []string{"misinstalled-proxy", "one", "two", "three", "gateway", "gatewayclass", "l2", "bgp", "pool"} {
			if out, err := l.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-k", "../config/demo/"+dir); err != nil {
				t.Logf("delete config/demo/%s: %v\n%s", dir, err, out)
			}
		}
		if out, _ := l.Exec(ctx, "client", "ip", "route", "show", lab.VIPPool.String()); strings.TrimSpace(out) != "" {
			if _, err := l.Exec(ctx, "client", "ip", "route", "del", lab.VIPPool.String()); err != nil {
				t.Logf("remove the client's route: %v", err)
			}
		}
	})
	// Not DEMO_WATCH: e2e/demo.mk exports that (2m, make demo's default) to every recipe,
	// make test's included, which made each of the four watches here last 2 minutes.
	// TestArbitration is the long watch of the same behaviour.
	watch := os.Getenv("E2E_DEMO_WATCH")
	if watch == "" {
		watch = "20s"
	}
	for _, mode := range []string{"l2", "bgp"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run")
			cmd.Env = append(os.Environ(), "DEMO_WATCH="+watch, "DEMO_MODE="+mode)
			out, err := cmd.CombinedOutput()
			t.Logf("demo output:\n%s", out)
			if err != nil {
				t.Fatalf("demo run (DEMO_MODE=%s): %v", mode, err)
			}
			if mode == "bgp" && !strings.Contains(string(out), "paths, one per node") {
				t.Errorf("the BGP demo did not show the router's paths per node")
			}
		})
	}
}
