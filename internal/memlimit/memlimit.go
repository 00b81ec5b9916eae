// Package memlimit derives the Go runtime's memory limit from the container's: the memory
// limit of the cgroup the process runs in (cgroup v2 memory.max, or v1
// memory.limit_in_bytes), the lowest of its own and its ancestors'. With the Go limit a little
// under it, the garbage collector works harder as the heap nears the container's limit instead
// of letting the kernel kill the process (OOMKilled) when a burst doubles the heap between two
// collections.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// unlimitedV1 is the smallest memory.limit_in_bytes read as "no limit": cgroup v1 writes
// PAGE_COUNTER_MAX pages (about 2^63 bytes) when none is set.
const unlimitedV1 = 1 << 62

// Cgroup is where the process's cgroups are described: the file /proc/self/cgroup and the
// cgroup file systems' mount point (/sys/fs/cgroup). Tests point them at a directory of their
// own.
type Cgroup struct {
	ProcSelfCgroup string
	Root           string
}

// Host is the running process's view.
func Host() Cgroup { return Cgroup{ProcSelfCgroup: "/proc/self/cgroup", Root: "/sys/fs/cgroup"} }

// Limit returns the memory limit in bytes of the process's cgroup, the lowest along its path
// to the root, and the file it comes from; 0 and "" when no cgroup on the path sets one (or
// the system has no cgroups). An unreadable or malformed limit file is an error naming it.
func (c Cgroup) Limit() (int64, string, error) {
	data, err := os.ReadFile(c.ProcSelfCgroup)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", c.ProcSelfCgroup, err)
	}
	var v1, v2 string
	var haveV1, haveV2 bool
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, haveV2 = parts[2], true
		case hasController(parts[1], "memory"):
			v1, haveV1 = parts[2], true
		}
	}
	// A v1 memory controller, when there is one, is the one that limits (on hybrid systems
	// the v2 hierarchy has no memory controller).
	if haveV1 {
		return c.lowest(filepath.Join(c.Root, "memory"), v1, "memory.limit_in_bytes")
	}
	if haveV2 {
		return c.lowest(c.Root, v2, "memory.max")
	}
	return 0, "", nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// lowest reads file in the cgroup at path under mount and in each of its ancestors up to
// mount, and returns the lowest limit. Inside a container the cgroup file system is often
// mounted at the container's own cgroup, so that path does not exist under mount: then the
// mount's root is the process's cgroup.
func (c Cgroup) lowest(mount, path, file string) (int64, string, error) {
	dir := filepath.Join(mount, filepath.Clean("/"+path))
	if _, err := os.Stat(dir); err != nil {
		dir = mount
	}
	var limit int64
	var from string
	for {
		p := filepath.Join(dir, file)
		n, ok, err := readLimit(p)
		if err != nil {
			return 0, "", err
		}
		if ok && (limit == 0 || n < limit) {
			limit, from = n, p
		}
		if dir == mount || !strings.HasPrefix(dir, mount) {
			return limit, from, nil
		}
		dir = filepath.Dir(dir)
	}
}

// readLimit reads one limit file: false when it sets no limit ("max", v1's near-2^63, or no
// such file: the root cgroup has none).
func readLimit(path string) (int64, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("%s: %q is not a memory limit in bytes", path, s)
	}
	if n >= unlimitedV1 {
		return 0, false, nil
	}
	return n, true, nil
}

// CheckRatio refuses a ratio Apply cannot use: not a number, below 0 or above 1.
func CheckRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return fmt.Errorf("%v: want 0 (off) or more, up to 1", ratio)
	}
	return nil
}

// Setting is what Apply did.
type Setting struct {
	// Limit is the Go memory limit now in force (math.MaxInt64: none).
	Limit int64
	// Cgroup is the container's limit it was derived from, and From its file; 0 and "" when
	// none was found or GOMEMLIMIT decided.
	Cgroup int64
	From   string
	// Env is set when GOMEMLIMIT was set in the environment: it wins.
	Env bool
}

// Apply sets the Go memory limit to ratio × the cgroup's limit, unless ratio is 0 (off), the
// environment sets GOMEMLIMIT (the runtime has already read it), or no cgroup sets a limit.
func Apply(c Cgroup, ratio float64, getenv func(string) string) (Setting, error) {
	if err := CheckRatio(ratio); err != nil {
		return Setting{}, fmt.Errorf("memory limit ratio %w", err)
	}
	if getenv("GOMEMLIMIT") != "" {
		return Setting{Limit: debug.SetMemoryLimit(-1), Env: true}, nil
	}
	if ratio == 0 {
		return Setting{Limit: debug.SetMemoryLimit(-1)}, nil
	}
	limit, from, err := c.Limit()
	if err != nil || limit == 0 {
		return Setting{Limit: debug.SetMemoryLimit(-1)}, err
	}
	debug.SetMemoryLimit(int64(float64(limit) * ratio))
	return Setting{Limit: debug.SetMemoryLimit(-1), Cgroup: limit, From: from}, nil
}
