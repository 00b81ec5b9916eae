package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is a long-running lab process: where it runs, what it runs, where it logs.
type daemon struct {
	// Name is unique in the lab: "etcd", "kube-apiserver", "n1-kubelet", "frr-bgpd".
	Name string
	// Netns is the network namespace the process joins ("" = root namespace).
	Netns string
	// MountNS is the file of the mount namespace the process joins ("" = the root one): a
	// node's view (nodeview.go).
	MountNS string
	// Args is the command line; Args[0] is an absolute path or a name looked up in PATH.
	Args []string
	// Forks marks daemons that fork themselves and write their own pidfile (FRR); PidFile
	// then names that file.
	Forks   bool
	PidFile string
}

func (c Config) pidFile(d daemon) string {
	if d.PidFile != "" {
		return d.PidFile
	}
	return filepath.Join(c.runDir(), d.Name+".pid")
}

func (c Config) logFile(name string) string { return filepath.Join(c.logDir(), name+".log") }

// start runs d in the background, detached from the caller (own session, stdin /dev/null,
// output appended to logs/<name>.log), so it outlives the lab command and never holds a pipe
// of `go test` or make open.
func (c Config) start(ctx context.Context, d daemon) error {
	if err := os.MkdirAll(c.runDir(), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	if err := os.MkdirAll(c.logDir(), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	logf, err := os.OpenFile(c.logFile(d.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== %s lab: starting %s\n", time.Now().Format(time.RFC3339), strings.Join(d.Args, " "))
	args := d.Args
	if d.Netns != "" || d.MountNS != "" {
		// nsenter, not `ip netns exec`: the latter makes a new mount namespace and remounts
		// /sys, which hides the cgroup hierarchies from containerd and kubelet. nsenter execs
		// the program, so the PID we get is the program's.
		ns := []string{"nsenter"}
		if d.Netns != "" {
			ns = append(ns, "--net=/run/netns/"+d.Netns)
		}
		if d.MountNS != "" {
			ns = append(ns, "--mount="+d.MountNS)
		}
		args = append(append(ns, "--"), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(os.Environ(), "LAB_DAEMON="+d.Name)
	if d.Forks {
		_ = os.Remove(c.pidFile(d))
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("start %s: %w: %s", d.Name, err, bytes.TrimSpace(out))
		}
		return waitFor(ctx, 10*time.Second, "pidfile of "+d.Name, func() error {
			_, err := c.readPid(d)
			return err
		})
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(c.pidFile(d), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("start %s: write pidfile: %w", d.Name, err)
	}
	spec, _ := json.Marshal(d)
	_ = os.WriteFile(filepath.Join(c.runDir(), d.Name+".json"), spec, 0o644)
	return nil
}

// readPid returns the PID of d when it runs, or an error saying why not. A PID counts only when
// the process' command line still mentions the lab dir (FRR's: its own dir, frrDir), so a
// recycled PID is never signalled.
func (c Config) readPid(d daemon) (int, error) {
	b, err := os.ReadFile(c.pidFile(d))
	if err != nil {
		return 0, fmt.Errorf("%s: not started: %w", d.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: bad pidfile %q", d.Name, b)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: pid %d gone", d.Name, pid)
	}
	if !bytes.Contains(cmdline, []byte(c.Dir)) && !bytes.Contains(cmdline, []byte(c.frrDir())) {
		return 0, fmt.Errorf("%s: pid %d is another program now", d.Name, pid)
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Field 3 is the state; Z is a zombie that only waits for its parent.
		if f := bytes.Fields(st[bytes.LastIndexByte(st, ')')+1:]); len(f) > 0 && string(f[0]) == "Z" {
			return 0, fmt.Errorf("%s: pid %d exited", d.Name, pid)
		}
	}
	return pid, nil
}

// exited reports whether d is not running although it was started: no pidfile, its PID gone,
// or a zombie. Unlike running it does not check the command line, which is briefly empty while
// a process execs (nsenter execs the daemon), so a daemon that was just started never counts as
// exited; a PID is not recycled within the seconds that lab-up watches it.
func (c Config) exited(d daemon) bool {
	b, err := os.ReadFile(c.pidFile(d))
	if err != nil {
		return true
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := bytes.Fields(st[bytes.LastIndexByte(st, ')')+1:])
	return len(f) > 0 && string(f[0]) == "Z"
}

// running reports whether d runs.
func (c Config) running(d daemon) bool {
	_, err := c.readPid(d)
	return err == nil
}

// stop sends SIGTERM to d, waits up to grace for it to exit, then SIGKILLs it. A daemon that
// is not running is not an error.
func (c Config) stop(d daemon, grace time.Duration) error {
	pid, err := c.readPid(d)
	if err != nil {
		_ = os.Remove(c.pidFile(d))
		return nil
	}
	// A stopped (SIGSTOP) process must be continued to act on SIGTERM.
	_ = syscall.Kill(pid, syscall.SIGCONT)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !waitGone(pid, grace) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitGone(pid, 5*time.Second) {
			return fmt.Errorf("stop %s: pid %d survives SIGKILL", d.Name, pid)
		}
	}
	_ = os.Remove(c.pidFile(d))
	return nil
}

// waitGone polls until pid has exited (or is a zombie) or d passes.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if f := bytes.Fields(st[bytes.LastIndexByte(st, ')')+1:]); len(f) > 0 && string(f[0]) == "Z" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopWaiting wraps an error that no amount of waiting fixes (a daemon exited): waitFor
// returns it at once.
type stopWaiting struct{ error }

func (e stopWaiting) Unwrap() error { return e.error }

// waitFor polls check every 200 ms until it returns nil or a stopWaiting error, ctx ends or
// timeout passes; the error names what it waited for and the last reason.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop stopWaiting
		if errors.As(err, &stop) {
			return fmt.Errorf("wait for %s: %w", what, stop.error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s (%s): %w", what, timeout, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}

// run runs a short command and returns its stdout; the error carries stderr.
func run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// procsMatching returns the PIDs whose command line contains every needle.
func procsMatching(needles ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		ok := true
		for _, n := range needles {
			if !bytes.Contains(b, []byte(n)) {
				ok = false
				break
			}
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cmdlineArgs returns the arguments of a process.
func cmdlineArgs(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
