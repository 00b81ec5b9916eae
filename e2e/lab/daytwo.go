package lab

import (
	"context"
	"fmt"
	"time"
)

// ImportImage imports an image tarball (hack/image, or any `ctr images import` archive) into
// every node's containerd, next to the lab's own images: an image tagged differently from them
// (an earlier release's) then runs with imagePullPolicy Never or IfNotPresent. Unlike the lab's
// images it is not re-imported by lab-up or lab-load.
func (l *Lab) ImportImage(ctx context.Context, tarball string) error {
	return l.forNodes(func(n Node) error {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := l.ctr(ictx, n, "images", "import", tarball); err != nil {
			return fmt.Errorf("import %s into %s: %w", tarball, n.Name, err)
		}
		return nil
	})
}

// APIServerPID returns the process ID of the lab's kube-apiserver (for SIGSTOP/SIGCONT: an
// API server that stops answering without closing a connection).
func (l *Lab) APIServerPID() (int, error) {
	for _, d := range l.controlPlaneDaemons() {
		if d.Name == daemonAPIServer {
			return l.readPid(d)
		}
	}
	return 0, fmt.Errorf("no %s daemon in the lab", daemonAPIServer)
}

// RestoreNodeRoutes puts a node's static routes back as lab-up set them: to the other nodes'
// pod ranges and the default routes via the router, both families. Taking a node's link down
// (CutLink) makes its kernel drop the routes through eth0, and nothing in the lab plays the
// CNI that would restore them after RestoreLink; without this the node reaches no other node's
// pods afterwards and a test measures the lab instead of what runs on it. Routes that are
// still there are left as they are (ip route replace).
func (l *Lab) RestoreNodeRoutes(ctx context.Context, node string) error {
	n, err := NodeByName(node)
	if err != nil {
		return err
	}
	ns := l.Namespace(n.Name)
	var steps [][]string
	for _, o := range Nodes() {
		if o.Name == n.Name {
			continue
		}
		steps = append(steps,
			[]string{"-n", ns, "route", "replace", o.PodCIDRv4.String(), "via", o.IPv4.String()},
			[]string{"-n", ns, "-6", "route", "replace", o.PodCIDRv6.String(), "via", o.IPv6.String()})
	}
	steps = append(steps,
		[]string{"-n", ns, "route", "replace", "default", "via", Router.IPv4.String()},
		[]string{"-n", ns, "-6", "route", "replace", "default", "via", Router.IPv6.String()})
	return ipSteps(ctx, "routes of "+node+" after link-up", steps)
}
