package memlimit

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeCgroup lays out a /proc/self/cgroup and a cgroup tree of limit files under a temporary
// directory: files maps a path under the root to its content.
func fakeCgroup(t *testing.T, self string, files map[string]string) Cgroup {
	t.Helper()
	dir := t.TempDir()
	c := Cgroup{ProcSelfCgroup: filepath.Join(dir, "self-cgroup"), Root: filepath.Join(dir, "sys")}
	if self != "" {
		if err := os.WriteFile(c.ProcSelfCgroup, []byte(self), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		p = filepath.Join(c.Root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestLimit(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name     string
		self     string
		files    map[string]string
		want     int64
		wantFrom string // under the root
		wantErr  string
	}{
		{name: "no /proc/self/cgroup (not Linux)"},
		{name: "v2, the process's own limit", self: "0::/kubepods/pod1/c1\n",
			files: map[string]string{"kubepods/pod1/c1/memory.max": "268435456\n", "kubepods/pod1/memory.max": "max\n", "kubepods/memory.max": "max\n"},
			want:  256 * mi, wantFrom: "kubepods/pod1/c1/memory.max"},
		{name: "v2, a parent's lower limit wins", self: "0::/kubepods/pod1/c1\n",
			files: map[string]string{"kubepods/pod1/c1/memory.max": "268435456\n", "kubepods/pod1/memory.max": "134217728\n"},
			want:  128 * mi, wantFrom: "kubepods/pod1/memory.max"},
		{name: "v2, no limit anywhere", self: "0::/a/b\n",
			files: map[string]string{"a/b/memory.max": "max\n", "a/memory.max": "max\n"}},
		{name: "v2 inside a cgroup namespace: the mount is the container's cgroup", self: "0::/\n",
			files: map[string]string{"memory.max": "536870912\n"}, want: 512 * mi, wantFrom: "memory.max"},
		{name: "v2, cgroup path not under the mount: the mount's root", self: "0::/elsewhere/c1\n",
			files: map[string]string{"memory.max": "1048576\n"}, want: 1 * mi, wantFrom: "memory.max"},
		{name: "v1 memory controller", self: "9:name=systemd:/\n4:memory:/process_api/x\n0::/\n",
			files: map[string]string{"memory/process_api/x/memory.limit_in_bytes": "268435456\n", "memory/process_api/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.limit_in_bytes": "9223372036854771712\n"},
			want:  256 * mi, wantFrom: "memory/process_api/x/memory.limit_in_bytes"},
		{name: "v1 with the controller listed among others", self: "3:cpu,memory:/x\n",
			files: map[string]string{"memory/x/memory.limit_in_bytes": "1073741824\n"}, want: 1024 * mi, wantFrom: "memory/x/memory.limit_in_bytes"},
		{name: "v1 unlimited", self: "4:memory:/x\n",
			files: map[string]string{"memory/x/memory.limit_in_bytes": "9223372036854771712\n"}},
		{name: "malformed limit", self: "0::/x\n", files: map[string]string{"x/memory.max": "lots\n"},
			wantErr: `x/memory.max: "lots" is not a memory limit in bytes`},
		{name: "zero limit", self: "0::/x\n", files: map[string]string{"x/memory.max": "0\n"},
			wantErr: `x/memory.max: "0" is not a memory limit in bytes`},
		{name: "garbage lines ignored", self: "nonsense\n\n0::/x\n", files: map[string]string{"x/memory.max": "4096\n"},
			want: 4096, wantFrom: "x/memory.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeCgroup(t, tc.self, tc.files)
			got, from, err := c.Limit()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := ""
			if tc.wantFrom != "" {
				wantFrom = filepath.Join(c.Root, tc.wantFrom)
			}
			if got != tc.want || from != wantFrom {
				t.Errorf("Limit() = %d from %q, want %d from %q", got, from, tc.want, wantFrom)
			}
		})
	}
}

// restoreLimit puts the test process's memory limit back as it was.
func restoreLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

func TestApply(t *testing.T) {
	restoreLimit(t)
	c := fakeCgroup(t, "0::/x\n", map[string]string{"x/memory.max": "1000000000\n"})
	noEnv := func(string) string { return "" }

	s, err := Apply(c, 0.9, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Limit != 900000000 || s.Cgroup != 1000000000 || s.Env {
		t.Errorf("Apply(0.9) = %+v, want limit 900000000 from the cgroup's 1000000000", s)
	}
	if got := debug.SetMemoryLimit(-1); got != 900000000 {
		t.Errorf("runtime memory limit %d, want 900000000", got)
	}

	// GOMEMLIMIT wins: the runtime's value is left as it is.
	debug.SetMemoryLimit(math.MaxInt64)
	s, err = Apply(c, 0.9, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "100MiB"
		}
		return ""
	})
	if err != nil || !s.Env || s.Limit != math.MaxInt64 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT: %+v, %v; runtime limit %d, want it untouched", s, err, debug.SetMemoryLimit(-1))
	}

	// Off.
	s, err = Apply(c, 0, noEnv)
	if err != nil || s.Cgroup != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("ratio 0: %+v, %v; runtime limit %d, want it untouched", s, err, debug.SetMemoryLimit(-1))
	}

	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := Apply(c, bad, noEnv); err == nil || !strings.Contains(err.Error(), "memory limit ratio") {
			t.Errorf("ratio %v: error %v, want one naming the ratio", bad, err)
		}
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("a refused ratio changed the runtime limit to %d", debug.SetMemoryLimit(-1))
	}

	// A malformed limit file: an error naming it, and the limit left alone.
	bad := fakeCgroup(t, "0::/x\n", map[string]string{"x/memory.max": "-5\n"})
	if _, err := Apply(bad, 0.9, noEnv); err == nil || !strings.Contains(err.Error(), "memory.max") {
		t.Errorf("malformed memory.max: error %v, want one naming the file", err)
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("a malformed limit file changed the runtime limit to %d", debug.SetMemoryLimit(-1))
	}
}

// TestApplyInRealCgroup runs a process in a real memory cgroup with a 256 MiB limit made for the
// test (cgroup v1 or v2, as this system has) and checks that its Go memory limit is 90 % of it.
func TestApplyInRealCgroup(t *testing.T) {
	if os.Getenv("MEMLIMIT_CHILD") == "1" {
		s, err := Apply(Host(), 0.9, os.Getenv)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		out, _ := json.Marshal(s)
		fmt.Println("SETTING", string(out))
		os.Exit(0)
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("skipped: needs root on Linux to make a memory cgroup (CI runs it as root)")
	}
	var dir, limitFile string
	switch {
	case isDir("/sys/fs/cgroup/memory"): // v1 (or hybrid)
		dir = fmt.Sprintf("/sys/fs/cgroup/memory/metalgate-memlimit-test-%d", os.Getpid())
		limitFile = "memory.limit_in_bytes"
	case fileExists("/sys/fs/cgroup/cgroup.controllers"): // v2
		dir = fmt.Sprintf("/sys/fs/cgroup/metalgate-memlimit-test-%d", os.Getpid())
		limitFile = "memory.max"
	default:
		t.Skip("skipped: no cgroup v1 memory controller or cgroup v2 mounted at /sys/fs/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte("268435456"), 0o644); err != nil {
		t.Fatalf("set the cgroup's limit (v2 needs the memory controller enabled in the parent's subtree_control): %v", err)
	}
	// The child joins the cgroup before it execs the test binary, so the runtime starts in it.
	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", dir,
		os.Args[0], "-test.run=^TestApplyInRealCgroup$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MEMLIMIT_CHILD=1", "GOMEMLIMIT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var s Setting
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "SETTING "); ok {
			if err := json.Unmarshal([]byte(rest), &s); err != nil {
				t.Fatal(err)
			}
		}
	}
	cgroupLimit := int64(268435456)
	if want := int64(float64(cgroupLimit) * 0.9); s.Limit != want || s.Cgroup != cgroupLimit || s.From != filepath.Join(dir, limitFile) {
		t.Errorf("in a 256 MiB cgroup: %+v, want limit %d from %s\n%s", s, want, filepath.Join(dir, limitFile), out)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
