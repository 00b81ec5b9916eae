// Command lab builds and tears down metalgate's hermetic test lab (see e2e/README.md). The
// Make targets lab-up, lab-down, lab-status and lab-load call it; it reads the LAB_PREFIX,
// LAB_DIR, LAB_PORT_BASE, LAB_KUBE_BIN and LAB_IMAGES environment variables.
//
// Usage:
//
//	lab deps      install the missing Debian packages (one apt-get)
//	lab up        bring the lab up (idempotent: a healthy lab only gets changed images)
//	lab down      remove every trace of the lab
//	lab status    show daemons, nodes, BGP; exit 1 when not healthy
//	lab load      import changed images into the running nodes, restart their pods
//	lab env       print shell exports for the lab (eval "$(lab env)")
//	lab soak -runs N -logs DIR -step name=command... [-finally name=command]... [-keep DIR]...
//	              run the steps N times in a row; a table of step times and failures, then
//	              a RESULT line (make lab-soak)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/metalgate/metalgate/e2e/lab"
)

const usage = "usage: lab deps|up|down|status|load|env|soak"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "soak" {
		return runSoak(ctx, args[1:], os.Stdout)
	}
	if len(args) != 1 {
		return fmt.Errorf("%s", usage)
	}
	if args[0] == "deps" {
		return lab.EnsurePackages(ctx, os.Stdout)
	}
	cfg, err := lab.ConfigFromEnv()
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return lab.Up(ctx, cfg, os.Stdout)
	case "down":
		return lab.Down(ctx, cfg, os.Stdout)
	case "status":
		return lab.Status(ctx, cfg, os.Stdout)
	case "load":
		return lab.Load(ctx, cfg, os.Stdout)
	case "env":
		fmt.Printf("export LAB_PREFIX=%s LAB_DIR=%s KUBECONFIG=%s\n", cfg.Prefix, cfg.Dir, cfg.KubeconfigPath())
		return nil
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}
