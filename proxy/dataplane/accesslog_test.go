package dataplane

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/metalgate/metalgate/internal/testenv"
)

// TestAccessLogClient: the access log's client is the address the rules judge — the
// connection's, or behind a trusted proxy the right-most untrusted X-Forwarded-For hop — and
// peer is the connection's; an untrusted client's X-Forwarded-For never reaches the log as its
// address.
func TestAccessLogClient(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}})
	for _, tc := range []struct {
		name    string
		trusted bool
		xff     string
		want    string
	}{
		{name: "direct client", want: `"client"="127.0.0.1" "peer"`},
		{name: "untrusted client's X-Forwarded-For", xff: "203.0.113.7", want: `"client"="127.0.0.1" "peer"`},
		{name: "behind a trusted proxy", trusted: true, xff: "198.51.100.9, 203.0.113.7", want: `"client"="203.0.113.7" "peer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var mu sync.Mutex
				var lines []string
				opts.Logger = funcr.New(func(prefix, args string) {
					mu.Lock()
					defer mu.Unlock()
					lines = append(lines, args)
				}, funcr.Options{})
				opts.AccessLogSample = 1
				if tc.trusted {
					opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				}
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				hdr := map[string]string{"Host": "log.test"}
				if tc.xff != "" {
					hdr["X-Forwarded-For"] = tc.xff
				}
				resp, _ := get(t, c, "http://"+addr+"/", hdr)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				var found string
				testenv.Eventually(t, 5*time.Second, "an access log line", func() error {
					mu.Lock()
					defer mu.Unlock()
					for _, l := range lines {
						if strings.Contains(l, `"msg"="request"`) || strings.Contains(l, `"requestID"`) {
							found = l
						}
					}
					if found == "" {
						return fmt.Errorf("none in %v", lines)
					}
					return nil
				})
				if !strings.Contains(found, tc.want) || !strings.Contains(found, `"peer"="127.0.0.1:`) {
					t.Fatalf("access log %s: want %s and the connection as peer", found, tc.want)
				}
			})
		})
	}
}
