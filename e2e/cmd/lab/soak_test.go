package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSoak: three runs of up, selftest (fails in run 2) and down. The failed run skips the
// rest of its steps but still takes the lab down, keeps the lab's logs, and counts once.
func TestSoak(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "soak")
	labLogs := filepath.Join(dir, "lab-logs")
	if err := os.MkdirAll(labLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(labLogs, "n3-kubelet.log"), []byte("E0102 bind: address already in use\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(dir, "count")
	var out strings.Builder
	rep, err := soak(context.Background(), soakOptions{
		runs: 3,
		steps: []soakStep{
			{name: "lab-up", command: "echo up >> " + counter},
			{name: "lab-selftest", command: `test "$(wc -l < ` + counter + `)" != 2 || { echo "selftest broke"; exit 1; }`},
			{name: "never-after-failure", command: "true"},
			{name: "lab-down", command: "true", always: true},
		},
		logDir: logs,
		keep:   []string{labLogs},
		out:    &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.runs != 3 || rep.failures() != 1 {
		t.Errorf("runs %d, failures %d; want 3, 1", rep.runs, rep.failures())
	}
	byStep := map[string]stepStats{}
	for _, st := range rep.stats() {
		byStep[st.name] = st
	}
	for name, want := range map[string][2]int{"lab-up": {3, 0}, "lab-selftest": {3, 1}, "never-after-failure": {2, 0}, "lab-down": {3, 0}} {
		if got := byStep[name]; got.ran != want[0] || got.failed != want[1] {
			t.Errorf("%s: ran %d failed %d, want %d and %d", name, got.ran, got.failed, want[0], want[1])
		}
	}
	if !strings.Contains(out.String(), "lab-selftest FAILED") || !strings.Contains(out.String(), "| selftest broke") {
		t.Errorf("progress does not show the failure and its output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(logs, "run-02-lab-selftest.files", "lab-logs", "n3-kubelet.log")); err != nil {
		t.Errorf("lab logs of the failed step not kept: %v", err)
	}
	var sum strings.Builder
	rep.writeSummary(&sum)
	lines := strings.Split(strings.TrimSpace(sum.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "RESULT lab_soak_runs=3 lab_soak_failures=1 slowest_step=") || !strings.Contains(last, " slowest_s=") {
		t.Errorf("last line %q is not the RESULT line", last)
	}
	if !strings.HasPrefix(lines[0], "STEP") || !strings.Contains(sum.String(), "FAILED run 2 lab-selftest") {
		t.Errorf("summary lacks the table or the failure:\n%s", sum.String())
	}
}

// TestSoakInterrupted: ^C during a step ends the soak, but the lab still goes down.
func TestSoakInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	down := filepath.Join(dir, "down")
	started := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Interrupt once the long step runs: its write opens the pipe.
		_, _ = os.ReadFile(started)
		cancel()
	}()
	rep, err := soak(ctx, soakOptions{
		runs: 5,
		steps: []soakStep{
			{name: "lab-up", command: "echo > " + started + "; exec sleep 60"},
			{name: "lab-down", command: "touch " + down, always: true},
		},
		logDir: filepath.Join(dir, "soak"),
		out:    io.Discard,
	})
	if err == nil || rep.runs != 1 {
		t.Errorf("soak = %v after %d runs, want interrupted in run 1", err, rep.runs)
	}
	if _, err := os.Stat(down); err != nil {
		t.Errorf("lab-down did not run after the interrupt: %v", err)
	}
}

func TestRunSoakFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-runs", "2", "-logs", "x"},                             // no step
		{"-runs", "0", "-logs", "x", "-step", "a=true"},          // no run
		{"-runs", "1", "-step", "a=true"},                        // no log dir
		{"-runs", "1", "-logs", "x", "-step", "no-command"},      // not name=command
		{"-runs", "1", "-logs", "x", "-step", "a b=true"},        // name with a space
		{"-runs", "1", "-logs", "x", "-step", "a=true", "extra"}, // stray argument
	} {
		if err := runSoak(context.Background(), args, io.Discard); err == nil {
			t.Errorf("runSoak(%q) accepted", args)
		}
	}
}
