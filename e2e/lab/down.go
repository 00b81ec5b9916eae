package lab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down stops every process of the lab and removes every trace of it from the machine:
// processes, containers and their shims, mounts, network namespaces, the user link, cgroups,
// CNI cache files and container log links; it restores the host sysctls kubelet changed. Only
// the logs of the last run stay, in <dir>/logs. Down on a lab that is not up does nothing.
func Down(ctx context.Context, c Config, out io.Writer) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return c.down(ctx, progress{out: out, start: time.Now()})
}

func (c Config) down(ctx context.Context, p progress) error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.step("stopping lab %q", c.Prefix)
	nodes := Nodes()
	// The lab's state is thrown away, so nothing needs a graceful shutdown: short graces.
	keep(c.forNodes(func(n Node) error {
		return errors.Join(c.stop(c.nodeDaemon(n, KubeProxy), 2*time.Second), c.stop(c.nodeDaemon(n, Kubelet), 2*time.Second))
	}))
	// containerd goes before its shims: alive, it would spawn `containerd-shim … delete`
	// cleanups for every task we kill.
	p.step("nodes: kubelet and kube-proxy stopped; stopping containerd, killing containers and shims")
	keep(c.forNodes(func(n Node) error {
		return errors.Join(c.stop(c.nodeDaemon(n, Containerd), 3*time.Second), c.killCgroup(n), c.killShims(n), c.killViewProcs(n))
	}))
	p.step("stopping FRR and the control plane")
	frrStopped := true
	for i := len(frrDaemons) - 1; i >= 0; i-- {
		if err := c.stop(c.frrDaemon(frrDaemons[i]), 2*time.Second); err != nil {
			keep(err)
			frrStopped = false
		}
	}
	if frrStopped {
		keep(c.keepRouterLogs())
	}
	cp := c.controlPlaneDaemons()
	for i := len(cp) - 1; i >= 0; i-- {
		keep(c.stop(cp[i], 3*time.Second))
	}
	p.step("removing mounts, namespaces, cgroups, host files")
	// Whatever else runs in a lab namespace: test helpers, captures, a node's test bgpd.
	for _, ns := range c.namespaces() {
		keep(killNetnsProcs(ctx, ns))
	}
	keep(c.unmountAll())
	keep(c.netDown(ctx))
	for _, n := range nodes {
		keep(c.removeCgroups(n))
	}
	keep(c.removeHostFiles())
	keep(c.restoreSysctls())
	if len(errs) == 0 {
		keep(c.removeState())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	p.step("lab %q is down", c.Prefix)
	return nil
}

// killNetnsProcs kills every process in a network namespace.
func killNetnsProcs(ctx context.Context, ns string) error {
	if !netnsExists(ns) {
		return nil
	}
	for attempt := 0; attempt < 50; attempt++ {
		out, err := run(ctx, "ip", "netns", "pids", ns)
		if err != nil {
			return err
		}
		pids := strings.Fields(out)
		if len(pids) == 0 {
			return nil
		}
		sig := syscall.SIGTERM
		if attempt > 10 {
			sig = syscall.SIGKILL
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, sig)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes survive in namespace %s", ns)
}

// cgroupProcs returns every PID in the node's cgroup tree of the pids hierarchy.
func (c Config) cgroupProcs(n Node) []int {
	var pids []int
	root := filepath.Join("/sys/fs/cgroup/pids", c.cgroupName(n.Name))
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroup kills every process under the node's cgroup root: containers and pause.
func (c Config) killCgroup(n Node) error {
	for attempt := 0; attempt < 50; attempt++ {
		pids := c.cgroupProcs(n)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes survive in cgroup %s", c.cgroupName(n.Name))
}

// killShims kills the containerd shims serving this node's containerd (they carry its socket
// path) and removes their sockets, which containerd keeps in /run/containerd/s named by
// sha256(<containerd address>/<namespace>/<id>).
func (c Config) killShims(n Node) error {
	sock := c.containerdSock(n.Name)
	for attempt := 0; attempt < 30; attempt++ {
		pids := procsMatching("containerd-shim", sock)
		if len(pids) == 0 {
			return nil
		}
		c.killShimPids(sock, pids)
		time.Sleep(100 * time.Millisecond)
	}
	if left := procsMatching("containerd-shim", sock); len(left) > 0 {
		return fmt.Errorf("shims of %s survive: %v", n.Name, left)
	}
	return nil
}

func (c Config) killShimPids(sock string, pids []int) {
	for _, pid := range pids {
		args := cmdlineArgs(pid)
		var id, ns string
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-id":
				id = args[i+1]
			case "-namespace":
				ns = args[i+1]
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 2*time.Second)
		if id != "" && ns != "" {
			sum := sha256.Sum256([]byte(filepath.Join(sock, ns, id)))
			_ = os.Remove(fmt.Sprintf("/run/containerd/s/%x", sum))
		}
	}
}

// mountPoints returns every mount point of the process' mount namespace.
func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mps []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 5 {
			mps = append(mps, unescapeMount(fields[4]))
		}
	}
	return mps
}

// mountsUnderDir returns the mount points below the lab dir, deepest first.
func (c Config) mountsUnderDir() []string {
	var mps []string
	for _, mp := range mountPoints() {
		if mp == c.Dir || strings.HasPrefix(mp, c.Dir+"/") {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount below the lab dir: the files of the nodes' mount
// namespaces (their processes are gone, so this frees the namespaces and every mount in them:
// overlay rootfs, volumes, pod network namespaces, kubelet's shared root, the views' overlays)
// and the private bind under them; and whatever a lab from before the views mounted in the
// root namespace.
func (c Config) unmountAll() error {
	for attempt := 0; attempt < 10; attempt++ {
		mps := c.mountsUnderDir()
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if mps := c.mountsUnderDir(); len(mps) > 0 {
		return fmt.Errorf("mounts survive under %s: %v", c.Dir, mps)
	}
	return nil
}

// removeCgroups removes the node's cgroup tree from every hierarchy, deepest first.
func (c Config) removeCgroups(n Node) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, c.cgroupName(n.Name))
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for try := 0; try < 20; try++ {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeHostFiles removes what the lab's processes write outside the lab dir. The nodes write
// /var/lib and /var/log into their own views (nodeview.go); the /var/log/containers links and
// libcni's result cache are removed here for labs from before the views.
func (c Config) removeHostFiles() error {
	ents, _ := os.ReadDir("/var/log/containers")
	for _, e := range ents {
		p := filepath.Join("/var/log/containers", e.Name())
		if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, c.Dir+"/") {
			_ = os.Remove(p)
		}
	}
	matches, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", c.podNetwork()+"-*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
	// Directories the shims and `ip netns add` create on first use; removed only when empty
	// (no other containerd, lab or namespace uses them).
	_ = os.Remove("/run/containerd/s")
	_ = os.Remove("/run/containerd")
	if ents, err := os.ReadDir("/run/netns"); err == nil && len(ents) == 0 {
		for _, mp := range mountPoints() {
			if mp == "/run/netns" {
				_ = syscall.Unmount("/run/netns", syscall.MNT_DETACH)
			}
		}
		_ = os.Remove("/run/netns")
	}
	return nil
}

// removeState deletes the lab dir except the logs of the last run. It refuses while anything
// is still mounted below the dir: removing through a bind mount would delete host files.
func (c Config) removeState() error {
	if mps := c.mountsUnderDir(); len(mps) > 0 {
		return fmt.Errorf("not removing %s: still mounted: %v", c.Dir, mps)
	}
	ents, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if e.Name() == "logs" || e.Name() == ".lock" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.Dir, e.Name())); err != nil {
			return fmt.Errorf("remove lab state: %w", err)
		}
	}
	return nil
}
