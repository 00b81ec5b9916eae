package lab

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Why a node is not Ready, or why a daemon exited, in words: lab-up prints this instead of a
// bare timeout, and says when the cause is one that a second lab-up usually does not meet.

// knownCause is a log line whose meaning is known.
type knownCause struct {
	// match: every string appears in the line.
	match []string
	// transient: the cause is timing or load, and the same lab-up usually succeeds when
	// repeated. Otherwise the machine or the lab needs a fix first.
	transient bool
	// explain says what happened and what to do.
	explain string
}

// knownCauses, most specific first; a line counts for the first cause it matches.
var knownCauses = []knownCause{
	{[]string{"device-plugins/kubelet.sock", "address already in use"}, true,
		"two kubelets raced for one device-plugin socket (issue #18). Every node has its own view of /var/lib now, so " +
			"this means a node runs without it: check `lab status` and e2e/README.md, \"Node views\""},
	{[]string{"inotify", "too many open files"}, false,
		"the machine ran out of inotify instances (kubelet and containerd use several each; several labs use many): " +
			"sysctl -w fs.inotify.max_user_instances=1024"},
	{[]string{"no space left on device"}, false, "the disk is full"},
	{[]string{"can't get final child's PID from pipe"}, false,
		"runc cannot set oom_score_adj (containerd needs restrict_oom_score_adj = true on this VM)"},
	{[]string{"address already in use"}, false,
		"a port or socket the daemon needs is taken: by a process left from an earlier lab (make lab-down), by another lab " +
			"with the same LAB_PORT_BASE (the API server's port), or by something started in the lab's namespace"},
	{[]string{"cni plugin not initialized"}, true,
		"containerd had not loaded the CNI configuration yet; the node turns Ready a few seconds later (later under load)"},
	{[]string{"TLS handshake timeout"}, true, "the API server answered too slowly (the machine was busy: two cores, builds, other labs)"},
	{[]string{"Client.Timeout exceeded"}, true, "the API server answered too slowly (the machine was busy: two cores, builds, other labs)"},
	{[]string{"etcdserver: request timed out"}, true, "etcd answered too slowly (the machine was busy: disk or CPU)"},
	{[]string{"the server was unable to return a response in the time allotted"}, true,
		"the API server answered too slowly (the machine was busy: two cores, builds, other labs)"},
}

// matchCauses returns the known causes that lines match, each once, in the order of lines.
func matchCauses(lines []string) []knownCause {
	var out []knownCause
	seen := map[int]bool{}
	for _, l := range lines {
		for i, kc := range knownCauses {
			all := true
			for _, m := range kc.match {
				all = all && strings.Contains(l, m)
			}
			if all {
				if !seen[i] {
					seen[i] = true
					out = append(out, kc)
				}
				break
			}
		}
	}
	return out
}

// errorLineRE matches error lines of the lab's daemons: klog (E0102 15:04:05…, F…),
// containerd and FRR (level=error), etcd (zap JSON), Go (panic:, fatal error:).
var errorLineRE = regexp.MustCompile(`^[EF]\d{4} |level=(error|fatal)|"level":"(error|fatal|panic)"|^panic: |^fatal error: |^Error: `)

// runMarker starts every run of a daemon in its log (Config.start writes it).
const runMarker = "==== "

// lastErrors returns up to max error lines of the log's last run (after the last line the lab
// wrote when it started the daemon); when that run logged no error, its last max lines.
func lastErrors(log []byte, max int) []string {
	if i := bytes.LastIndex(log, []byte("\n"+runMarker)); i >= 0 {
		log = log[i+1:]
	}
	var all, errs []string
	for _, l := range strings.Split(strings.TrimRight(string(log), "\n"), "\n") {
		if l == "" || strings.HasPrefix(l, runMarker) {
			continue
		}
		if len(l) > 400 {
			l = l[:400] + " …"
		}
		all = append(all, l)
		if errorLineRE.MatchString(l) {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		errs = all
	}
	if len(errs) > max {
		errs = errs[len(errs)-max:]
	}
	return errs
}

// daemonReport describes a daemon that exited or misbehaves: its last error lines, and what
// they mean when a known cause matches.
func (c Config) daemonReport(d daemon, state string) string {
	var b strings.Builder
	log, err := os.ReadFile(c.logFile(d.Name))
	if err != nil {
		fmt.Fprintf(&b, "  %s %s (no log: %v)\n", d.Name, state, err)
		return b.String()
	}
	lines := lastErrors(log, 6)
	fmt.Fprintf(&b, "  %s %s; last errors in %s:\n", d.Name, state, c.logFile(d.Name))
	for _, l := range lines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	for _, kc := range matchCauses(lines) {
		if kc.transient {
			fmt.Fprintf(&b, "  known transient cause (make lab-up again usually works): %s\n", kc.explain)
		} else {
			fmt.Fprintf(&b, "  known cause (not transient): %s\n", kc.explain)
		}
	}
	return b.String()
}

// nodeReport explains why node n is not Ready: its Ready condition (obj may be nil: not
// registered), its daemons that exited, and its kubelet's last errors.
func (c Config) nodeReport(n Node, obj *corev1.Node) string {
	var b strings.Builder
	cond := "not registered with the API server"
	if obj != nil {
		cond = "no Ready condition yet"
		for _, cd := range obj.Status.Conditions {
			if cd.Type == corev1.NodeReady {
				cond = fmt.Sprintf("Ready=%s %s: %s", cd.Status, cd.Reason, cd.Message)
			}
		}
	}
	fmt.Fprintf(&b, "node %s is not Ready (%s)\n", n.Name, cond)
	kubeletDone := false
	for _, comp := range Components {
		d := c.nodeDaemon(n, comp)
		if c.exited(d) {
			b.WriteString(c.daemonReport(d, "exited"))
			kubeletDone = kubeletDone || comp == Kubelet
		}
	}
	if !kubeletDone {
		b.WriteString(c.daemonReport(c.nodeDaemon(n, Kubelet), "runs"))
	}
	return b.String()
}
