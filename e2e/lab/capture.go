package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Capture is a running tcpdump in a lab namespace.
type Capture struct {
	cmd   *exec.Cmd
	pcap  string
	host  string
	done  chan struct{}
	mu    sync.Mutex
	diag  strings.Builder // tcpdump's stderr
	waitE error
}

// CaptureResult is what a stopped capture saw.
type CaptureResult struct {
	// Pcap is the capture file; it stays in the lab's run dir until lab-down.
	Pcap string
	// Lines are the packets as `tcpdump -n -e -tt -r` prints them (link-layer headers
	// included, so MAC addresses can be checked).
	Lines []string
}

// StartCapture starts tcpdump on iface in a lab namespace ("client", "eth0") with a pcap
// filter ("arp", "icmp6 and ip6[40] == 136") and returns when tcpdump is capturing, so that
// no packet sent after StartCapture returns is missed.
func (l *Lab) StartCapture(ctx context.Context, host, iface, filter string) (*Capture, error) {
	if err := l.checkHost(host); err != nil {
		return nil, err
	}
	dir := filepath.Join(l.runDir(), "captures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	f, err := os.CreateTemp(dir, host+"-*.pcap")
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	pcap := f.Name()
	f.Close()
	// -U: write each packet at once; -Z root: keep the file writable (tcpdump would drop to
	// user tcpdump otherwise). The filter is one argument: tcpdump joins argv anyway.
	args := []string{"ip", "netns", "exec", l.Namespace(host), "tcpdump", "-i", iface, "-n", "-U", "-Z", "root", "-w", pcap}
	if filter != "" {
		args = append(args, filter)
	}
	cmd := exec.Command(args[0], args[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start tcpdump: %w", err)
	}
	c := &Capture{cmd: cmd, pcap: pcap, host: host, done: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.diag.WriteString(line + "\n")
			c.mu.Unlock()
			if strings.Contains(line, "listening on") {
				once.Do(func() { close(listening) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		c.waitE = cmd.Wait()
		close(c.done)
	}()
	select {
	case <-listening:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("tcpdump in %s exited: %v: %s", host, c.waitE, c.stderr())
	case <-ctx.Done():
		c.kill()
		return nil, fmt.Errorf("start tcpdump in %s: %w", host, ctx.Err())
	case <-time.After(10 * time.Second):
		c.kill()
		return nil, fmt.Errorf("tcpdump in %s did not start listening in 10s: %s", host, c.stderr())
	}
}

func (c *Capture) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.TrimSpace(c.diag.String())
}

func (c *Capture) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

// Stop ends the capture (SIGINT, so tcpdump flushes) and returns the packets it saw.
func (c *Capture) Stop(ctx context.Context) (*CaptureResult, error) {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.kill()
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
	return c.read(ctx, true)
}

// Snapshot returns the packets captured so far; the capture goes on.
func (c *Capture) Snapshot(ctx context.Context) (*CaptureResult, error) {
	return c.read(ctx, false)
}

func (c *Capture) read(ctx context.Context, final bool) (*CaptureResult, error) {
	out, err := run(ctx, "tcpdump", "-n", "-e", "-tt", "-r", c.pcap)
	// While tcpdump writes, the file may end in half a packet ("truncated dump file").
	if err != nil && (final || out == "") {
		return nil, fmt.Errorf("read capture %s: %w", c.pcap, err)
	}
	res := &CaptureResult{Pcap: c.pcap}
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			res.Lines = append(res.Lines, line)
		}
	}
	return res, nil
}

// Matching returns the lines that contain every needle.
func (r *CaptureResult) Matching(needles ...string) []string {
	var out []string
	for _, line := range r.Lines {
		ok := true
		for _, n := range needles {
			ok = ok && strings.Contains(line, n)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
