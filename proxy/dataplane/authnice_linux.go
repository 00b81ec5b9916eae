//go:build linux

package dataplane

import (
	"fmt"
	"syscall"
)

// setThreadNice sets the calling thread's nice value. On Linux a thread is a process to
// setpriority: PRIO_PROCESS with a thread id changes that thread only (setpriority(2),
// "BUGS": the threads of a process do not share a nice value). Raising it needs no
// privilege; lowering it back would (CAP_SYS_NICE), so a thread once raised is never handed
// back to other goroutines (basicAuth.hash).
func setThreadNice(nice int) error {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice); err != nil {
		return fmt.Errorf("set the nice value of thread %d to %d: %w", syscall.Gettid(), nice, err)
	}
	return nil
}
