// Command pause is the lab's pod sandbox ("infra") container: it holds the pod's namespaces
// open, reaps the zombies of processes that share its PID namespace, and exits on SIGTERM or
// SIGINT. containerd runs it as the sandbox_image of every lab node; it stands in for
// registry.k8s.io/pause, which the lab cannot pull.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; WNOHANG keeps the loop from blocking.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
