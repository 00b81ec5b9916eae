// Command demo replays metalgate's story in the lab (make demo; see README.md):
//
//	demo run          deploy the operator and three tenants into the running lab (LAB_* env),
//	                  curl each tenant's VIP from the client, mis-install a fourth proxy and
//	                  watch for DEMO_WATCH (default 2m) that no Ingress address ever changes,
//	                  then install it properly (config/proxy: its own VIP) and watch again:
//	                  the tenants' proxies win the arbitration, it yields and says why;
//	                  DEMO_MODE=l2 (default: ARP) or bgp (the nodes peer with the lab router)
//	demo kind-pool    print an IPAddressPool + L2Advertisement for the top of the given IPv4
//	                  network(s) (make cluster: the kind Docker network)
//
// run exits 1 when any check fails; the lab is left up either way.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = "usage: demo run | demo kind-pool CIDR..."

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		watch := 2 * time.Minute
		if v := os.Getenv("DEMO_WATCH"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				fmt.Fprintf(os.Stderr, "demo: DEMO_WATCH=%q: want a duration such as 2m or 30s\n", v)
				os.Exit(2)
			}
			watch = d
		}
		mode := os.Getenv("DEMO_MODE")
		if mode == "" {
			mode = modeL2
		}
		if err := run(ctx, os.Stdout, mode, watch); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
			os.Exit(1)
		}
	case "kind-pool":
		out, err := kindPool(os.Args[2:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "demo kind-pool: %v\n", err)
			os.Exit(1)
		}
		fmt.Print(out)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
}
