//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/metalgate/metalgate/e2e/lab"
)

// TestDemo runs make demo's driver (e2e/cmd/demo) against the lab with a short watch
// (DEMO_WATCH=20s unless set): three tenants with their own proxies and VIPs, curl through each
// VIP from the client, a misinstalled cluster-wide proxy that must not change any Ingress
// address and must say why. On success everything the demo added is removed again.
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
		for _, dir := range []string{"misinstalled-proxy", "one", "two", "three", "pool"} {
			if out, err := l.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-k", "../config/demo/"+dir); err != nil {
				t.Logf("delete config/demo/%s: %v\n%s", dir, err, out)
			}
		}
		if _, err := l.Exec(ctx, "client", "ip", "route", "del", lab.VIPPool.String(), "dev", "eth0"); err != nil {
			t.Logf("remove the client's route: %v", err)
		}
	})
	watch := os.Getenv("DEMO_WATCH")
	if watch == "" {
		watch = "20s"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run")
	cmd.Env = append(os.Environ(), "DEMO_WATCH="+watch)
	out, err := cmd.CombinedOutput()
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatalf("demo run: %v", err)
	}
}
