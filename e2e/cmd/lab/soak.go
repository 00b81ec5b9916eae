package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// lab soak: the same steps N times in a row (make lab-soak: lab-up, lab-selftest, lab-down),
// counting failed runs and timing every step, so that a rare failure shows up as a number and
// the slowest step is known. It ends with a machine-readable line:
//
//	RESULT lab_soak_runs=20 lab_soak_failures=0 slowest_step=lab-selftest slowest_s=48.2

// soakStep is one command of a run.
type soakStep struct {
	name    string
	command string // run with sh -c, in its own process group
	// always: the step runs even after an earlier step of the run failed (lab-down).
	always bool
}

// soakOptions configures a soak.
type soakOptions struct {
	runs  int
	steps []soakStep
	// logDir gets the output of every step (run-07-lab-up.log), the files of keep for every
	// failed step (run-07-lab-up.files/), and summary.txt.
	logDir string
	// keep are directories worth keeping when a step fails (the lab's daemon logs, the e2e
	// tests' logs): the next run overwrites them.
	keep []string
	// stepTimeout bounds one step. Zero: no bound.
	stepTimeout time.Duration
	out         io.Writer
}

// stepResult is one step of one run.
type stepResult struct {
	run     int
	step    string
	dur     time.Duration
	err     error // nil: passed
	skipped bool  // an earlier step of the run failed
	log     string
}

// soakReport is the outcome of a soak.
type soakReport struct {
	runs    int // runs started
	steps   []string
	results []stepResult
}

// stepFlags collects repeated -step name=command flags.
type stepFlags struct {
	steps  *[]soakStep
	always bool
}

func (f stepFlags) String() string { return "" }

func (f stepFlags) Set(v string) error {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok || name == "" || cmd == "" || strings.ContainsAny(name, " /") {
		return fmt.Errorf("want name=command, got %q", v)
	}
	*f.steps = append(*f.steps, soakStep{name: name, command: cmd, always: f.always})
	return nil
}

// listFlags collects a repeated flag's values.
type listFlags []string

func (l *listFlags) String() string     { return strings.Join(*l, ",") }
func (l *listFlags) Set(v string) error { *l = append(*l, v); return nil }

// runSoak parses the soak subcommand's flags and runs it; it fails when a run failed.
func runSoak(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	opts := soakOptions{out: out}
	var steps, finally []soakStep
	fs.IntVar(&opts.runs, "runs", 10, "number of runs")
	fs.StringVar(&opts.logDir, "logs", "", "directory for the steps' output and summary.txt (required)")
	fs.DurationVar(&opts.stepTimeout, "step-timeout", 30*time.Minute, "bound on one step (0: none)")
	fs.Var(stepFlags{steps: &steps}, "step", "name=command: a step of every run, in order; skipped after a failed step (repeat)")
	fs.Var(stepFlags{steps: &finally, always: true}, "finally", "name=command: a step that ends every run, even a failed one (repeat)")
	fs.Var((*listFlags)(&opts.keep), "keep", "directory copied next to a failed step's output (repeat)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.steps = append(steps, finally...)
	if opts.runs < 1 || len(opts.steps) == 0 || opts.logDir == "" || fs.NArg() > 0 {
		return errors.New("usage: lab soak -runs N -logs DIR -step name=command [-step name=command] [-finally name=command] [-keep DIR]")
	}
	rep, err := soak(ctx, opts)
	var sum bytes.Buffer
	rep.writeSummary(&sum)
	fmt.Fprint(out, "\n"+sum.String())
	if werr := os.WriteFile(filepath.Join(opts.logDir, "summary.txt"), sum.Bytes(), 0o644); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return err
	}
	if f := rep.failures(); f > 0 {
		return fmt.Errorf("soak: %d of %d runs failed", f, rep.runs)
	}
	return nil
}

// soak runs the steps opts.runs times. It stops early only when ctx ends (then the always
// steps of the current run still run, with a fresh 5-minute context, so the lab is taken down).
func soak(ctx context.Context, opts soakOptions) (soakReport, error) {
	rep := soakReport{}
	for _, s := range opts.steps {
		rep.steps = append(rep.steps, s.name)
	}
	if err := os.MkdirAll(opts.logDir, 0o755); err != nil {
		return rep, err
	}
	// Only what an earlier soak wrote: logDir may be a directory of the user's.
	old, _ := filepath.Glob(filepath.Join(opts.logDir, "run-*"))
	for _, o := range old {
		_ = os.RemoveAll(o)
	}
	for run := 1; run <= opts.runs && ctx.Err() == nil; run++ {
		rep.runs = run
		failed := false
		for _, s := range opts.steps {
			res := stepResult{run: run, step: s.name, log: filepath.Join(opts.logDir, fmt.Sprintf("run-%02d-%s.log", run, s.name))}
			switch {
			case (failed || ctx.Err() != nil) && !s.always:
				res.skipped = true
				rep.results = append(rep.results, res)
				continue
			case ctx.Err() != nil:
				res.dur, res.err = runStep(context.Background(), s, res.log, 5*time.Minute)
			default:
				res.dur, res.err = runStep(ctx, s, res.log, opts.stepTimeout)
			}
			rep.results = append(rep.results, res)
			if res.err == nil {
				fmt.Fprintf(opts.out, ">> soak run %d/%d: %s ok (%.1fs)\n", run, opts.runs, s.name, res.dur.Seconds())
				continue
			}
			failed = true
			fmt.Fprintf(opts.out, ">> soak run %d/%d: %s FAILED after %.1fs: %v; output in %s, last lines:\n", run, opts.runs, s.name, res.dur.Seconds(), res.err, res.log)
			for _, l := range tailLines(res.log, 25) {
				fmt.Fprintf(opts.out, "   | %s\n", l)
			}
			for _, k := range opts.keep {
				dst := strings.TrimSuffix(res.log, ".log") + ".files"
				if err := copyTree(k, filepath.Join(dst, filepath.Base(k))); err != nil && !errors.Is(err, os.ErrNotExist) {
					fmt.Fprintf(opts.out, ">> soak: keep %s: %v\n", k, err)
				}
			}
		}
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("soak interrupted in run %d: %w", rep.runs, ctx.Err())
	}
	return rep, nil
}

// runStep runs one step with its output in logPath and returns how long it took.
func runStep(ctx context.Context, s soakStep, logPath string, timeout time.Duration) (time.Duration, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	fmt.Fprintf(f, "$ %s\n", s.command)
	cmd := exec.CommandContext(ctx, "sh", "-c", s.command)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a timeout or ^C ends go test's and make's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return d, err
}

// failures counts the runs with at least one failed step.
func (r soakReport) failures() int {
	failed := map[int]bool{}
	for _, res := range r.results {
		if res.err != nil {
			failed[res.run] = true
		}
	}
	return len(failed)
}

// stepStats summarises one step over all runs.
type stepStats struct {
	name             string
	ran, failed      int
	min, median, max time.Duration
	slowestRun       int // the run in which the step took max
}

func (r soakReport) stats() []stepStats {
	var out []stepStats
	for _, name := range r.steps {
		st := stepStats{name: name}
		var durs []time.Duration
		for _, res := range r.results {
			if res.step != name || res.skipped {
				continue
			}
			st.ran++
			if res.err != nil {
				st.failed++
			}
			durs = append(durs, res.dur)
			if res.dur > st.max || st.slowestRun == 0 {
				st.max, st.slowestRun = res.dur, res.run
			}
		}
		if len(durs) > 0 {
			slices.Sort(durs)
			st.min, st.median = durs[0], durs[len(durs)/2]
		}
		out = append(out, st)
	}
	return out
}

// slowest returns the step whose longest run took longest.
func (r soakReport) slowest() (stepStats, bool) {
	var best stepStats
	found := false
	for _, st := range r.stats() {
		if st.ran > 0 && (!found || st.max > best.max) {
			best, found = st, true
		}
	}
	return best, found
}

// writeSummary writes the table of steps, the failed steps, and the RESULT line.
func (r soakReport) writeSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tRAN\tFAILED\tMIN\tMEDIAN\tMAX\tSLOWEST IN RUN")
	for _, st := range r.stats() {
		run := "-"
		if st.slowestRun > 0 {
			run = fmt.Sprint(st.slowestRun)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", st.name, st.ran, st.failed, secs(st.min), secs(st.median), secs(st.max), run)
	}
	tw.Flush()
	for _, res := range r.results {
		if res.err != nil {
			fmt.Fprintf(w, "FAILED run %d %s after %s: %v (output: %s)\n", res.run, res.step, secs(res.dur), res.err, res.log)
		}
	}
	fmt.Fprintf(w, "%d runs, %d failed\n", r.runs, r.failures())
	fmt.Fprintln(w, r.resultLine())
}

// resultLine is the machine-readable last line.
func (r soakReport) resultLine() string {
	name, s := "none", 0.0
	if st, ok := r.slowest(); ok {
		name, s = st.name, st.max.Seconds()
	}
	return fmt.Sprintf("RESULT lab_soak_runs=%d lab_soak_failures=%d slowest_step=%s slowest_s=%.1f", r.runs, r.failures(), name, s)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// tailLines returns the last n lines of a file.
func tailLines(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// copyTree copies the regular files below src into dst (symlinks and special files are
// skipped).
func copyTree(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		outF, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(outF, in); err != nil {
			outF.Close()
			return err
		}
		return outF.Close()
	})
}
