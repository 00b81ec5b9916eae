// Package nsexec runs Go code inside a named Linux network namespace (/run/netns/NAME). It is
// the one piece of the netns test kit that programs (the scale benchmark) need too, so it lives
// apart from internal/netnslab, which is built on package testing.
package nsexec

import (
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNS runs f on an OS thread inside namespace ns. Sockets created by f stay in ns. The thread
// is discarded afterwards (never returned to the scheduler in the wrong namespace).
func InNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
