package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A node's view of the host: its own mount namespace (issue #18).
//
// kubelet writes some host paths that --root-dir does not move: the device-plugin registry
// socket /var/lib/kubelet/device-plugins/kubelet.sock (and the device manager's checkpoint
// beside it) and the /var/log/containers links; containerd's CNI plugins keep their result
// cache in /var/lib/cni. Three kubelets in the host's mount namespace share these paths. At
// start a kubelet deletes everything in device-plugins and then binds kubelet.sock, so two
// kubelets starting together race: the loser gets "bind: address already in use", its
// ContainerManager fails, it exits and the node never becomes Ready. A kubelet that starts
// later (a restart) deletes the sockets of those already running, silently.
//
// So every node's containerd, kubelet and kube-proxy run in one mount namespace of their own,
// in which /var/lib and /var/log are overlays whose upper layer is the node's own directory:
//
//	root mount namespace                    node n1's mount namespace (slave of the root's)
//	/var/lib  (the host's)                  /var/lib = overlay, lower: the host's /var/lib (read only)
//	                                                            upper: <dir>/n1/host/var/lib
//	/var/log  (the host's)                  /var/log = overlay, lower: the host's /var/log
//	                                                            upper: <dir>/n1/host/var/log
//	<dir>/mntns/n1 (nsfs)  keeps the namespace without a process; lab-down unmounts it
//
// The node reads the host's files and writes its own: n1's device-plugin socket is the file
// <dir>/n1/host/var/lib/kubelet/device-plugins/kubelet.sock, n2's another file, and the host
// gets nothing. Overlays rather than bind mounts of the node's dirs over the fixed paths: a
// bind needs its mount point to exist, and /var/lib/kubelet must not be created on the host.
//
// Propagation slave: the root namespace's mounts and unmounts still reach the node (`ip netns
// del` under the shared /run/netns frees the network namespace everywhere), the node's never
// reach the root namespace: container rootfs overlays, volumes, pod network namespaces and
// kubelet's rshared --root-dir stay in the node's namespace and vanish with it. containerd,
// its shims and kubelet share the namespace, so kubelet's volume mounts are what runc binds
// into containers. /proc, /sys and the cgroup hierarchies are the host's (nsenter, unlike `ip
// netns exec`, remounts nothing). Namespace files given to nsenter (--net=/run/netns/…) are
// opened in the root namespace before it switches.
//
// What stays shared, on purpose: /run/xtables.lock (iptables' lock: sharing it only
// serialises), and /run/containerd/s, where each shim's socket is named by a hash of its
// containerd's address, so nodes never collide there.

// viewRoots are the host directories each node sees as its own overlay.
var viewRoots = []string{"/var/lib", "/var/log"}

// mountNSDir holds the nsfs files of the nodes' mount namespaces. It is a private bind mount
// of itself: a mount namespace file cannot be bind-mounted below a shared mount (systemd makes
// / shared), as `ip netns` does for /run/netns.
func (c Config) mountNSDir() string { return filepath.Join(c.Dir, "mntns") }

// mountNS is the file that holds a node's mount namespace: nsenter --mount=<it>.
func (c Config) mountNS(node string) string { return filepath.Join(c.mountNSDir(), node) }

// viewUpper is the node's own copy of a view root: everything the node wrote below root.
func (c Config) viewUpper(node, root string) string {
	return filepath.Join(c.nodeDir(node), "host", root)
}

// viewWork is overlayfs' work dir for a view root (same filesystem as the upper dir).
func (c Config) viewWork(node, root string) string {
	return filepath.Join(c.nodeDir(node), "host", ".work", strings.ReplaceAll(strings.Trim(root, "/"), "/", "-"))
}

// NodeHostPath returns where a node's own copy of a host path lives in the lab dir, for paths
// below /var/lib and /var/log ("/var/lib/kubelet/device-plugins/kubelet.sock" on n1 ->
// <dir>/n1/host/var/lib/kubelet/device-plugins/kubelet.sock). The file exists there only if
// the node wrote it; what the node merely reads comes from the host. A unix socket cannot be
// connected to at that path (overlayfs binds it to the overlay's inode): connect through the
// view, /proc/<pid of a node daemon>/root/<hostPath>.
func (c Config) NodeHostPath(node, hostPath string) (string, error) {
	if _, err := NodeByName(node); err != nil {
		return "", err
	}
	for _, r := range viewRoots {
		if strings.HasPrefix(hostPath, r+"/") {
			return filepath.Join(c.nodeDir(node), "host", hostPath), nil
		}
	}
	return "", fmt.Errorf("%s is not in a node's own view (%v)", hostPath, viewRoots)
}

// checkViewable refuses lab dirs that the views cannot work with: overlayfs options are
// separated by ',' and ':', and a lab dir below a view root would put the overlay's upper
// layer inside its own lower layer (and containerd's overlays on top of overlayfs).
func (c Config) checkViewable() error {
	if strings.ContainsAny(c.Dir, ",:\\") {
		return fmt.Errorf("lab dir %q: ',', ':' and '\\' cannot be used in overlayfs options; set LAB_DIR to another path", c.Dir)
	}
	for _, r := range viewRoots {
		if c.Dir == r || strings.HasPrefix(c.Dir, r+"/") {
			return fmt.Errorf("lab dir %q is below %s, which every node sees as its own overlay; set LAB_DIR to another path", c.Dir, r)
		}
	}
	return nil
}

// isMountPoint reports whether path is a mount point of the process' mount namespace.
func isMountPoint(path string) bool { return slices.Contains(mountPoints(), path) }

// prepareMountNSDir makes mountNSDir a private bind mount of itself (once per lab).
func (c Config) prepareMountNSDir() error {
	dir := c.mountNSDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node views: %w", err)
	}
	if !isMountPoint(dir) {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("node views: bind %s: %w", dir, err)
		}
	}
	if err := syscall.Mount("", dir, "", syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("node views: make %s private: %w", dir, err)
	}
	return nil
}

// makeNodeView creates the node's mount namespace with its overlays. It needs
// prepareMountNSDir first; a namespace left from an earlier run is replaced.
func (c Config) makeNodeView(ctx context.Context, n Node) error {
	ns := c.mountNS(n.Name)
	if isMountPoint(ns) {
		if err := syscall.Unmount(ns, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("node view of %s: unmount the old namespace: %w", n.Name, err)
		}
	}
	if err := os.WriteFile(ns, nil, 0o644); err != nil {
		return fmt.Errorf("node view of %s: %w", n.Name, err)
	}
	for _, r := range viewRoots {
		for _, d := range []string{c.viewUpper(n.Name, r), c.viewWork(n.Name, r)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("node view of %s: %w", n.Name, err)
			}
		}
	}
	if _, err := run(ctx, "unshare", "--mount="+ns, "--propagation", "slave", "true"); err != nil {
		return fmt.Errorf("node view of %s: %w", n.Name, err)
	}
	for _, r := range viewRoots {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", r, c.viewUpper(n.Name, r), c.viewWork(n.Name, r))
		if _, err := run(ctx, "nsenter", "--mount="+ns, "--", "mount", "-t", "overlay", "overlay", "-o", opts, r); err != nil {
			return fmt.Errorf("node view of %s: %w", n.Name, err)
		}
	}
	return nil
}

// nsInode returns the inode of a namespace file (/proc/<pid>/ns/mnt or a bind of one): two
// processes share a namespace when these are equal.
func nsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// procsInMountNS returns the processes in the mount namespace with inode ino (nsInode): a
// node's containerd, kubelet, kube-proxy and containerd's shims (containers have namespaces of
// their own).
func procsInMountNS(ino uint64) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid := 0
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if got, err := nsInode(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && got == ino {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killViewProcs SIGKILLs whatever still runs in the node's mount namespace once its daemons
// are stopped, so unmounting the namespace file frees the namespace and all its mounts.
func (c Config) killViewProcs(n Node) error {
	ino, err := nsInode(c.mountNS(n.Name))
	if err != nil || !isMountPoint(c.mountNS(n.Name)) {
		return nil // no view (a lab from before views, or already down)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := procsInMountNS(ino)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes survive in the mount namespace of %s: %v", n.Name, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			waitGone(pid, time.Second)
		}
	}
}

// ErrNoView is returned by CheckNodeView for a process that does not see its node's view.
var ErrNoView = errors.New("not in its node's view")

// CheckNodeView verifies that process pid sees the node's own view: its mountinfo has an
// overlay on every view root whose upper dir is the node's.
func (c Config) CheckNodeView(node string, pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return fmt.Errorf("view of %s: %w", node, err)
	}
	if err := c.checkMountinfo(node, b); err != nil {
		return fmt.Errorf("pid %d on %s: %w", pid, node, err)
	}
	return nil
}

// checkMountinfo checks a mountinfo (proc(5)) for the node's overlays.
func (c Config) checkMountinfo(node string, mountinfo []byte) error {
	for _, r := range viewRoots {
		want := "upperdir=" + c.viewUpper(node, r)
		found := false
		for _, line := range strings.Split(string(mountinfo), "\n") {
			// id parent major:minor root mountpoint options [optional…] - fstype source super-options
			pre, post, ok := strings.Cut(line, " - ")
			f, g := strings.Fields(pre), strings.Fields(post)
			if ok && len(f) >= 5 && len(g) >= 3 && unescapeMount(f[4]) == r && g[0] == "overlay" &&
				slices.Contains(strings.Split(g[2], ","), want) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%w: no overlay on %s with %s", ErrNoView, r, want)
		}
	}
	return nil
}
