package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestDefaultBodySize pins the Ingress routes' default body limit (--default-body-size,
// ingress-nginx's 1m): over it, 413 and the backend never gets the whole body (never a
// request at all when Content-Length says so); proxy-body-size overrides it, 0 lifts it;
// Gateway routes keep the server-wide MaxBodyBytes (unlimited here).
func TestDefaultBodySize(t *testing.T) {
	const mib = 1 << 20
	forEachPath(t, func(t *testing.T, opts Options) {
		// Counted by path, one per subtest: a request of an earlier subtest that reaches the
		// backend late (a streamed body the proxy refused) is not counted under a later one.
		var mu sync.Mutex
		calls, whole := map[string]int64{}, map[string]int64{}
		count := func(m map[string]int64, path string) int64 {
			mu.Lock()
			defer mu.Unlock()
			return m[path]
		}
		be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls[r.URL.Path]++
			mu.Unlock()
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			mu.Lock()
			whole[r.URL.Path]++
			mu.Unlock()
			_, _ = io.WriteString(w, "{}")
		}))
		t.Cleanup(be.Close)
		opts.IngressMaxBodyBytes = mib
		s, httpAddr, httpsAddr := startProxy(t, opts, buildTable(t,
			route{host: "default.test", path: "/", endpoints: []string{hostport(be)}},
			route{host: "unlimited.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{ingress.AnnotationBodySize: "0"}},
			route{host: "two.test", path: "/", endpoints: []string{hostport(be)}, annotations: map[string]string{ingress.AnnotationBodySize: "2m"}},
		))
		const reset = -1 // post's status when the connection was reset
		post := func(addr, host, path string, size int, chunked bool, hdr map[string]string) int {
			t.Helper()
			var body io.Reader = strings.NewReader(strings.Repeat("x", size))
			if chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if errors.Is(err, syscall.ECONNRESET) {
				return reset
			}
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		for i, tc := range []struct {
			name      string
			host      string
			size      int
			chunked   bool
			want      int
			wantCalls int64 // backend requests
			wantWhole int64 // bodies the backend read whole
			// orReset: the connection may be reset instead of the answer read. The proxy
			// answers 413 and closes while the client still sends the rest of a body it
			// will not read; the kernel then resets the connection, and a client still
			// writing sees the reset before it reads the 413 (as with nginx).
			orReset bool
		}{
			// Hostile first.
			{name: "declared over the default: 413, the backend is not asked", host: "default.test", size: mib + 1, want: 413},
			{name: "chunked over the default: 413, never a whole body upstream", host: "default.test", size: 2 * mib, chunked: true, want: 413, wantCalls: -1, orReset: true},
			{name: "at the default", host: "default.test", size: mib, want: 200, wantCalls: 1, wantWhole: 1},
			{name: "chunked at the default", host: "default.test", size: mib, chunked: true, want: 200, wantCalls: 1, wantWhole: 1},
			{name: "proxy-body-size 0 lifts it", host: "unlimited.test", size: 3 * mib, chunked: true, want: 200, wantCalls: 1, wantWhole: 1},
			{name: "proxy-body-size 2m raises it", host: "two.test", size: 2 * mib, want: 200, wantCalls: 1, wantWhole: 1},
			{name: "proxy-body-size 2m bounds it", host: "two.test", size: 2*mib + 1, want: 413},
		} {
			path := fmt.Sprintf("/t%d", i)
			t.Run(tc.name, func(t *testing.T) {
				if got := post(httpAddr, tc.host, path, tc.size, tc.chunked, nil); got != tc.want && !(got == reset && tc.orReset) {
					t.Errorf("status %d, want %d", got, tc.want)
				}
				// A chunked body over the limit may reach the backend in part (it is
				// streamed): the request then fails there, never read whole.
				if got := count(calls, path); tc.wantCalls >= 0 && got != tc.wantCalls {
					t.Errorf("backend asked %d times, want %d", got, tc.wantCalls)
				}
				if got := count(whole, path); got != tc.wantWhole {
					t.Errorf("backend read %d whole bodies, want %d", got, tc.wantWhole)
				}
			})
		}
		t.Run("Gateway route: the server-wide limit, not the Ingress default", func(t *testing.T) {
			port := func(addr string) int32 { return int32(addrPort(t, addr)) }
			s.Swap(gatewayTable(t, port(httpAddr), port(httpsAddr), map[string]string{"api": hostport(be)}))
			if got := post(httpAddr, "gw.test", "/api/upload", 2*mib, true, map[string]string{"X-Team": "a"}); got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
			if got := count(whole, "/api/upload"); got != 1 {
				t.Errorf("backend read %d whole bodies, want 1", got)
			}
		})
	})
}

func addrPort(t *testing.T, addr string) int {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a.Port
}
