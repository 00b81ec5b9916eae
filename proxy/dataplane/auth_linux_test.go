package dataplane

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

// threadNice is the nice value of the thread at /proc/<path>/stat (field 19, counted after
// the command name, which may hold spaces).
func threadNice(path string) (int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", path, "stat"))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 17 {
		return 0, fmt.Errorf("%s/stat: %d fields after the name", path, len(fields))
	}
	return strconv.Atoi(fields[16])
}

// threadAlive reports whether the process still has thread tid.
func threadAlive(tid int) bool {
	_, err := os.Stat(filepath.Join("/proc/self/task", strconv.Itoa(tid)))
	return err == nil
}

// TestBasicAuthCheckNice: the hostile case first. A namespace whose checks took a second
// (here a flood check that moves the test's clock) has spent its budget: its next checks —
// a known user's and an unknown user's alike, so a 401's time still does not tell which
// users exist — run on threads at --auth-check-nice, while another namespace's checks keep
// the proxy's own priority; once the time has drained, the flood's checks are back at it.
// Each lowered thread ends with its check, so no request is ever handled at the lowered
// priority; the one exception is the process's main thread, which the Go runtime parks for
// good instead of ending it, so at most one check ever runs there. Without the option,
// every check runs at the proxy's own priority.
func TestBasicAuthCheckNice(t *testing.T) {
	base, err := threadNice("thread-self")
	if err != nil {
		t.Fatal(err)
	}
	nice := base + 5
	if nice > 19 {
		t.Skipf("the test runs at nice %d: no room to raise it by 5", base)
	}
	be := echoBackend(t, "app")
	tab := buildTable(t, authRoutes(hostport(be))...)
	type login struct {
		desc, host, user, pass string
		want                   int
		drain                  bool // let the time spent drain first
	}
	logins := []login{
		{desc: "the flood's first check", host: "f.test", user: "mallory", pass: "wrong", want: 401},
		{desc: "the flood, budget spent", host: "f.test", user: "mallory", pass: "wrong", want: 401},
		{desc: "the flood, an unknown user", host: "f.test", user: "nobody", pass: "wrong", want: 401},
		{desc: "the victim, wrong password", host: "v.test", user: "alice", pass: "wrong", want: 401},
		{desc: "the victim, an unknown user", host: "v.test", user: "eve", pass: "secret1", want: 401},
		{desc: "the victim logs in", host: "v.test", user: "alice", pass: "secret1", want: 200},
		{desc: "the flood after its time drained", host: "f.test", user: "mallory", pass: "again", want: 401, drain: true},
	}
	for _, tc := range []struct {
		name string
		nice int
		want []int // the nice value each login's check ran at
	}{
		{"lowered", nice, []int{base, nice, nice, base, base, base, base}},
		{"off: the proxy's own", 0, []int{base, base, base, base, base, base, base}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onMain := 0 // lowered checks run on the main thread, both paths together
			forEachPath(t, func(t *testing.T, opts Options) {
				clock := &fakeClock{t: time.Unix(1e9, 0)}
				var mu sync.Mutex
				var ran, lowered []int // nice values; thread ids of the lowered checks
				opts.AuthCheckNice = tc.nice
				opts.authClock = clock.now
				opts.authCompare = func(hash, password string) bool {
					n, err := threadNice("thread-self")
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					ran = append(ran, n)
					if n != base {
						lowered = append(lowered, syscall.Gettid())
					}
					mu.Unlock()
					if hash == floodHash {
						clock.advance(time.Second) // a long check, without spending one
						return false
					}
					return table.CheckPassword(hash, password)
				}
				_, addr, _ := startProxy(t, opts, tab)
				for _, l := range logins {
					if l.drain {
						clock.advance(time.Duration(float64(10*time.Second)/authDrain) + time.Second)
					}
					if got, _ := authGet(t, http.DefaultClient, addr, l.host, l.user, l.pass); got != l.want {
						t.Errorf("%s: %d, want %d", l.desc, got, l.want)
					}
				}
				mu.Lock()
				if diff := cmp.Diff(tc.want, ran); diff != "" {
					t.Errorf("nice values the checks ran at, in order (-want +got):\n%s", diff)
				}
				mu.Unlock()
				var others []int
				for _, tid := range lowered {
					if tid == os.Getpid() {
						onMain++
					} else {
						others = append(others, tid)
					}
				}
				if onMain > 1 {
					t.Errorf("%d lowered checks ran on the main thread: it served goroutines after its nice value was raised", onMain)
				}
				testenv.Eventually(t, 5*time.Second, "the lowered checks' threads ended", func() error {
					var alive []int
					for _, tid := range others {
						if threadAlive(tid) {
							alive = append(alive, tid)
						}
					}
					if len(alive) != 0 {
						return fmt.Errorf("threads %v of lowered checks are still there", alive)
					}
					return nil
				})
			})
		})
	}
}

// TestBasicAuthCheckNiceInvalid: a nice value the kernel has no room for is refused by New,
// naming the option and the range; 0 is the proxy's own priority.
func TestBasicAuthCheckNiceInvalid(t *testing.T) {
	for _, nice := range []int{-1, 20} {
		_, err := New(Options{AuthCheckNice: nice})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("authentication check nice value %d: want 0", nice)) {
			t.Errorf("AuthCheckNice %d: %v, want an error naming it and the range", nice, err)
		}
	}
}
