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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestBasicAuthCheckNice: with --auth-check-nice each password check — a known user's wrong
// and right password and an unknown user's decoy alike, so a 401's time still does not tell
// which users exist — runs on a thread at that nice value, and that thread ends with the
// check, so no request is ever handled at the lowered priority. The one exception is the
// process's main thread, which the Go runtime parks for good instead of ending it: so at
// most one check ever runs there. Without the option, the checks run at the proxy's own
// priority.
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
	r := route{host: "a.test", path: "/", endpoints: []string{hostport(be)},
		annotations: map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "users"},
		secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "users"},
			Data: map[string][]byte{"auth": []byte("alice:" + victimHash)}}}}
	tab := buildTable(t, r)
	for _, tc := range []struct {
		name    string
		nice    int
		wantRan int // the nice value the checks ran at
	}{
		{"lowered", nice, nice},
		{"off: the proxy's own", 0, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onMain := 0 // checks run on the main thread, both paths together
			forEachPath(t, func(t *testing.T, opts Options) {
				var mu sync.Mutex
				var ran, tids []int
				opts.AuthCheckNice = tc.nice
				opts.authCompare = func(hash, password string) bool {
					n, err := threadNice("thread-self")
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					ran, tids = append(ran, n), append(tids, syscall.Gettid())
					mu.Unlock()
					return table.CheckPassword(hash, password)
				}
				_, addr, _ := startProxy(t, opts, tab)
				for _, cred := range []struct {
					user, pass string
					want       int
				}{{"alice", "wrong", 401}, {"mallory", "wrong", 401}, {"alice", "secret1", 200}} {
					if got, _ := authGet(t, http.DefaultClient, addr, "a.test", cred.user, cred.pass); got != cred.want {
						t.Errorf("as %s: %d, want %d", cred.user, got, cred.want)
					}
				}
				mu.Lock()
				if diff := cmp.Diff([]int{tc.wantRan, tc.wantRan, tc.wantRan}, ran); diff != "" {
					t.Errorf("nice values the checks ran at (-want +got):\n%s", diff)
				}
				mu.Unlock()
				if tc.nice == 0 {
					return
				}
				var others []int
				for _, tid := range tids {
					if tid == os.Getpid() {
						onMain++
					} else {
						others = append(others, tid)
					}
				}
				if onMain > 1 {
					t.Errorf("%d checks ran on the main thread: it served goroutines after its nice value was raised", onMain)
				}
				testenv.Eventually(t, 5*time.Second, "the checks' threads ended", func() error {
					var alive []int
					for _, tid := range others {
						if threadAlive(tid) {
							alive = append(alive, tid)
						}
					}
					if len(alive) != 0 {
						return fmt.Errorf("threads %v of checks are still there (at nice %d)", alive, tc.nice)
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
