package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// FRR daemons of the router, in start order.
var frrDaemons = []string{"zebra", "bfdd", "bgpd"}

// BFDProfile is the BFD profile the router defines and applies to the nodes' peer group.
const BFDProfile = "lab"

// routerConfigs returns the FRR configuration files of the router. bgpd accepts sessions from
// any address of the segment (dynamic neighbours in peer group "nodes", AS NodeASN): speakers
// dial out. The nodes' IPv4 addresses are also configured neighbours of the group, passive:
// FRR 8.4 runs no BFD session for a dynamic neighbour, so without them the group's BFD profile
// would never apply. Both address families, ECMP over up to 8 paths.
func (c Config) routerConfigs() map[string]string {
	var static string
	for _, n := range Nodes() {
		static += fmt.Sprintf(" neighbor %s peer-group nodes\n", n.IPv4)
	}
	host := "hostname " + c.Prefix + "router\nlog timestamp precision 3\n"
	return map[string]string{
		"zebra.conf": host,
		"bfdd.conf": host + `bfd
 profile ` + BFDProfile + `
  receive-interval 100
  transmit-interval 100
  detect-multiplier 3
 exit
exit
`,
		"bgpd.conf": host + fmt.Sprintf(`router bgp %d
 bgp router-id %s
 no bgp ebgp-requires-policy
 no bgp network import-check
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
 neighbor nodes peer-group
 neighbor nodes remote-as %d
 neighbor nodes timers 3 9
 neighbor nodes timers connect 1
 neighbor nodes bfd profile %s
 neighbor nodes passive
%s bgp listen range %s peer-group nodes
 bgp listen range %s peer-group nodes
 !
 address-family ipv4 unicast
  neighbor nodes activate
  maximum-paths 8
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor nodes activate
  maximum-paths 8
 exit-address-family
exit
`, RouterASN, Router.IPv4, NodeASN, BFDProfile, static, SegmentV4, SegmentV6),
	}
}

// frrDaemon returns the daemon entry of one FRR daemon in the router namespace.
func (c Config) frrDaemon(name string) daemon {
	dir := c.frrDir()
	args := []string{"/usr/lib/frr/" + name, "-d", "--vty_socket", dir, "-P", "0", "-z", filepath.Join(dir, "zserv.api"),
		"-f", filepath.Join(dir, name+".conf"), "-i", filepath.Join(dir, name+".pid"), "--log", "file:" + c.frrLog(name)}
	if name == "bfdd" {
		args = append(args, "--bfdctl", filepath.Join(dir, "bfdd.sock"))
	}
	return daemon{Name: "frr-" + name, Netns: c.Namespace(Router.Name), Args: args, Forks: true, PidFile: filepath.Join(dir, name+".pid")}
}

// startRouter writes the FRR configuration and starts zebra, bfdd and bgpd in the router
// namespace, as user frr (FRR refuses to run as root without its group setup).
func (c Config) startRouter(ctx context.Context) error {
	dir := c.frrDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	// Reachable by user frr whatever the umask.
	if err := os.Chmod(frrRunRoot, 0o755); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	uid, gid, err := frrUser()
	if err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	for name, content := range c.routerConfigs() {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			return fmt.Errorf("router: %w", err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("router: %w", err)
		}
	}
	for _, name := range frrDaemons {
		// FRR opens its log after dropping to user frr: hand it the file.
		lf, err := os.OpenFile(c.frrLog(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("router: %w", err)
		}
		lf.Close()
		if err := os.Chown(c.frrLog(name), uid, gid); err != nil {
			return fmt.Errorf("router: %w", err)
		}
		if err := c.start(ctx, c.frrDaemon(name)); err != nil {
			return fmt.Errorf("router: %w", err)
		}
		if name == "zebra" {
			if err := waitFor(ctx, 10*time.Second, "zebra's socket", func() error {
				_, err := os.Stat(filepath.Join(dir, "zserv.api"))
				return err
			}); err != nil {
				return err
			}
		}
	}
	return waitFor(ctx, 10*time.Second, "bgpd's vty", func() error {
		_, err := c.vtysh(ctx, "show bgp summary")
		return err
	})
}

// frrUser returns the uid and gid of the frr user.
func frrUser() (int, int, error) {
	out, err := exec.Command("id", "-u", "frr").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("user frr (is FRR installed?): %w", err)
	}
	uid, _ := strconv.Atoi(string(trimNL(out)))
	out, err = exec.Command("id", "-g", "frr").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("group frr: %w", err)
	}
	gid, _ := strconv.Atoi(string(trimNL(out)))
	return uid, gid, nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// vtysh runs vtysh commands against the router's FRR.
func (c Config) vtysh(ctx context.Context, cmds ...string) (string, error) {
	args := []string{"ip", "netns", "exec", c.Namespace(Router.Name), "vtysh", "--vty_socket", c.frrDir()}
	for _, cmd := range cmds {
		args = append(args, "-c", cmd)
	}
	return run(ctx, args...)
}

// keepRouterLogs copies the FRR logs (the router's daemons and any test speaker's) into the
// lab's log dir as frr-<name>.log (kept after lab-down) and removes the FRR directory. Called
// once FRR is stopped.
func (c Config) keepRouterLogs() error {
	var errs []error
	logs, _ := filepath.Glob(filepath.Join(c.frrDir(), "*.log"))
	for _, l := range logs {
		if err := os.MkdirAll(c.logDir(), 0o755); err != nil {
			return fmt.Errorf("keep FRR logs: %w", err)
		}
		if err := copyFile(l, filepath.Join(c.logDir(), "frr-"+filepath.Base(l))); err != nil {
			errs = append(errs, fmt.Errorf("keep FRR log: %w", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(c.frrDir()); err != nil {
		return fmt.Errorf("remove %s: %w", c.frrDir(), err)
	}
	_ = os.Remove(frrRunRoot) // only when no other lab's FRR is in it
	return nil
}
