package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/table"
)

// mirrored is what a mirror backend received.
type mirrored struct {
	method, path, host, body string
	header                   http.Header
}

// recordingBackend is a mirror backend that reports every request it gets on a channel.
func recordingBackend(t *testing.T) (addr string, got <-chan mirrored) {
	t.Helper()
	ch := make(chan mirrored, 1000)
	srv := echoBackendHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- mirrored{method: r.Method, path: r.URL.RequestURI(), host: r.Host, body: string(b), header: r.Header.Clone()}
		_, _ = io.WriteString(w, "the mirror's answer, which no client may see")
	}))
	return srv, ch
}

func echoBackendHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// hostileBackend accepts connections, reads the request head and then behaves as mode says:
// "hang" (never answers), "huge" (a response body without end), "close" (closes at once),
// "garbage" (answers something that is not HTTP). stop closes it and its connections
// (cleanup does too).
func hostileBackend(t *testing.T, mode string) (addr string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				switch mode {
				case "hang":
					_, _ = io.Copy(io.Discard, br) // until closed
				case "huge":
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n")
					chunk := bytes.Repeat([]byte("x"), 32<<10)
					for {
						if _, err := c.Write(chunk); err != nil {
							return
						}
					}
				case "garbage":
					_, _ = io.WriteString(c, "SSH-2.0-not-http\r\n\r\n\x00\x01\x02")
				case "close":
				}
			}()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			l.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return l.Addr().String(), stop
}

// mirrorTable is a table whose host app.test goes to primary, mirrored to each of mirrors
// with the share num/den.
func mirrorTable(t *testing.T, primary string, num, den int, mirrors ...string) *table.Table {
	t.Helper()
	routes := []route{{host: "app.test", path: "/", endpoints: []string{primary}}}
	for i, m := range mirrors {
		routes = append(routes, route{host: "mirror" + string(rune('0'+i)) + ".test", path: "/", endpoints: []string{m}})
	}
	tab := buildTable(t, routes...)
	r := tab.Lookup("app.test", "/")
	for i := range mirrors {
		mr := tab.Lookup("mirror"+string(rune('0'+i))+".test", "/")
		r.Options.Policy.Mirrors = append(r.Options.Policy.Mirrors, table.Mirror{Backend: mr.Backend, Numerator: num, Denominator: den})
	}
	return tab
}

// waitMirrorsDone waits until no mirror request is in flight.
func waitMirrorsDone(t *testing.T, s *Server) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no mirror request in flight", func() error {
		if n := s.limits.mirror.inflight.Load(); n != 0 {
			return fmt.Errorf("%d mirror requests in flight", n)
		}
		return nil
	})
}

func doRequest(t *testing.T, method, url string, body []byte) (*http.Response, echoReply) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "app.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e echoReply
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("primary answer %q: %v", b, err)
		}
	}
	return resp, e
}

// TestMirror: a mirror gets a copy of each request with the headers the primary backend
// got (request ID and forwarding headers included), the path and Host; a small body is
// mirrored whole; a body over 64 KiB (declared, or chunked) is not mirrored and is counted;
// the client's answer is the primary's.
func TestMirror(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		primary := echoBackend(t, "primary")
		maddr, got := recordingBackend(t)
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		s, addr, _ := startProxy(t, opts, mirrorTable(t, hostport(primary), 1, 1, maddr))
		large := bytes.Repeat([]byte("L"), maxMirrorBody+1)
		small := []byte(`{"order": 42}`)
		for _, tc := range []struct {
			name, method string
			body         []byte
			chunked      bool
			mirrored     bool
		}{
			{name: "large declared body", method: "POST", body: large},
			{name: "large chunked body", method: "POST", body: large, chunked: true},
			{name: "GET", method: "GET", mirrored: true},
			{name: "small POST", method: "POST", body: small, mirrored: true},
			{name: "small chunked PUT", method: "PUT", body: small, chunked: true, mirrored: true},
		} {
			var rd io.Reader
			if tc.body != nil {
				rd = bytes.NewReader(tc.body)
				if tc.chunked {
					rd = io.MultiReader(rd) // unknown length: chunked
				}
			}
			req, err := http.NewRequest(tc.method, "http://"+addr+"/p/"+strings.ReplaceAll(tc.name, " ", "-")+"?q=1", rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "app.test"
			req.Header.Set("X-Client", "c1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e echoReply
			if resp.StatusCode != 200 || json.Unmarshal(b, &e) != nil || e.Backend != "primary" || e.Body != string(tc.body) {
				t.Fatalf("%s: the client got %d %.200q, want the primary's echo", tc.name, resp.StatusCode, b)
			}
			waitMirrorsDone(t, s)
			select {
			case m := <-got:
				if !tc.mirrored {
					t.Fatalf("%s: mirrored (%d bytes), want not", tc.name, len(m.body))
				}
				if m.method != tc.method || m.path != e.Path+"?q=1" || m.host != "app.test" || m.body != string(tc.body) {
					t.Errorf("%s: mirror got %s %s host %s body %q, want %s %s?q=1 host app.test body %q", tc.name, m.method, m.path, m.host, m.body, tc.method, e.Path, tc.body)
				}
				for _, k := range []string{"X-Client", "X-Request-Id", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
					if m.header.Get(k) == "" || m.header.Get(k) != strings.Join(e.Header[k], ",") {
						t.Errorf("%s: mirror got %s %q, the primary %q", tc.name, k, m.header.Get(k), e.Header[k])
					}
				}
			default:
				if tc.mirrored {
					t.Errorf("%s: not mirrored", tc.name)
				}
			}
		}
		if n := testutil.ToFloat64(opts.Metrics.Mirrors.WithLabelValues(mirrorBodyTooLarge)); n != 2 {
			t.Errorf("body_too_large = %v, want 2", n)
		}
		if n := testutil.ToFloat64(opts.Metrics.Mirrors.WithLabelValues(mirrorSent)); n != 3 {
			t.Errorf("sent = %v, want 3", n)
		}
	})
}

// mirrorResults is the sum of the mirror results counted, by result.
func mirrorResults(m *Metrics) map[string]float64 {
	out := map[string]float64{}
	for _, r := range []string{mirrorSent, mirrorFailed, mirrorDropped, mirrorBodyTooLarge, mirrorNoEndpoints, mirrorUnsupported} {
		if n := testutil.ToFloat64(m.Mirrors.WithLabelValues(r)); n > 0 {
			out[r] = n
		}
	}
	return out
}

// TestMirrorHostileBackends: a mirror backend that hangs, streams without end, closes or
// answers garbage changes nothing for the client: every answer is the primary's, and with a
// hanging mirror all of them come while its mirror requests are still waiting (the client
// never waits for a mirror). Each mirror request then ends (timeout, the cap on the
// response read, an error) and is counted; no goroutine is left (forEachPath's leak check).
func TestMirrorHostileBackends(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want map[string]float64
	}{
		{"hang", map[string]float64{mirrorFailed: 10}},
		{"huge", map[string]float64{mirrorSent: 10}}, // answered; 64 KiB read, the connection closed
		{"close", map[string]float64{mirrorFailed: 10}},
		{"garbage", map[string]float64{mirrorFailed: 10}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				primary := echoBackend(t, "primary")
				hostile, stop := hostileBackend(t, tc.mode)
				opts.Metrics = NewMetrics(prometheus.NewRegistry())
				s, addr, _ := startProxy(t, opts, mirrorTable(t, hostport(primary), 1, 1, hostile))
				if tc.mode == "hang" {
					s.limits.mirror.timeout = time.Hour // still in flight when the clients are done
				}
				const n = 10
				for i := 0; i < n; i++ {
					method, body := "GET", []byte(nil)
					if i%2 == 1 {
						method, body = "POST", []byte("small body")
					}
					resp, e := doRequest(t, method, "http://"+addr+"/x", body)
					if resp.StatusCode != 200 || e.Backend != "primary" || e.Body != string(body) {
						t.Fatalf("request %d: %d from %q, want the primary's 200", i, resp.StatusCode, e.Backend)
					}
				}
				if tc.mode == "hang" {
					if in := s.limits.mirror.inflight.Load(); in != n {
						t.Errorf("%d mirrors in flight once the clients were answered, want %d (waiting on the hanging backend)", in, n)
					}
					stop() // the backend goes away: its mirror requests fail
				}
				waitMirrorsDone(t, s)
				if got := mirrorResults(opts.Metrics); !mapsEqual(got, tc.want) {
					t.Errorf("mirror results %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestMirrorTimeout: a mirror that never answers ends after the mirror timeout.
func TestMirrorTimeout(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		primary := echoBackend(t, "primary")
		hostile, _ := hostileBackend(t, "hang")
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		s, addr, _ := startProxy(t, opts, mirrorTable(t, hostport(primary), 1, 1, hostile))
		s.limits.mirror.timeout = 200 * time.Millisecond
		start := time.Now()
		if resp, e := doRequest(t, "GET", "http://"+addr+"/x", nil); resp.StatusCode != 200 || e.Backend != "primary" {
			t.Fatalf("%d from %q", resp.StatusCode, e.Backend)
		}
		waitMirrorsDone(t, s)
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("the mirror ended after %v, before its timeout", d)
		}
		if got := mirrorResults(opts.Metrics); !mapsEqual(got, map[string]float64{mirrorFailed: 1}) {
			t.Errorf("mirror results %v, want one failed", got)
		}
	})
}

// TestMirrorCap: with the cap of mirror requests in flight reached, more are dropped and
// counted, and their clients are answered as usual.
func TestMirrorCap(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		primary := echoBackend(t, "primary")
		hostile, stop := hostileBackend(t, "hang")
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		s, addr, _ := startProxy(t, opts, mirrorTable(t, hostport(primary), 1, 1, hostile))
		s.limits.mirror.max, s.limits.mirror.timeout = 2, time.Hour
		for i := 0; i < 5; i++ {
			if resp, e := doRequest(t, "GET", "http://"+addr+"/x", nil); resp.StatusCode != 200 || e.Backend != "primary" {
				t.Fatalf("request %d: %d from %q", i, resp.StatusCode, e.Backend)
			}
		}
		if n := testutil.ToFloat64(opts.Metrics.Mirrors.WithLabelValues(mirrorDropped)); n != 3 {
			t.Errorf("dropped = %v, want 3", n)
		}
		if in := s.limits.mirror.inflight.Load(); in != 2 {
			t.Errorf("%d in flight, want the cap, 2", in)
		}
		stop()
		waitMirrorsDone(t, s)
	})
}

// TestMirrorSampling: 0 % mirrors nothing, 100 % everything, 1/2 about half; two mirrors
// of one route each get their copy.
func TestMirrorSampling(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		primary := echoBackend(t, "primary")
		for _, tc := range []struct {
			num, den int
			lo, hi   int // mirrored of 200, per mirror
		}{{0, 100, 0, 0}, {100, 100, 200, 200}, {1, 2, 60, 140}, {1, 1, 200, 200}} {
			m1, got1 := recordingBackend(t)
			m2, got2 := recordingBackend(t)
			s, addr, _ := startProxy(t, opts, mirrorTable(t, hostport(primary), tc.num, tc.den, m1, m2))
			for i := 0; i < 200; i++ {
				if resp, _ := doRequest(t, "GET", "http://"+addr+"/x", nil); resp.StatusCode != 200 {
					t.Fatalf("%d", resp.StatusCode)
				}
			}
			waitMirrorsDone(t, s)
			for i, ch := range []<-chan mirrored{got1, got2} {
				if n := len(ch); n < tc.lo || n > tc.hi {
					t.Errorf("%d/%d: mirror %d got %d of 200, want %d to %d", tc.num, tc.den, i, n, tc.lo, tc.hi)
				}
			}
		}
	})
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMirrorSharesPool: a route mirrored to its own backend (mirror and primary share the
// h1 transport's connections to it) never gets the mirror's answer: under concurrency, each
// client answer is the one to its own request (the echo of its own X-Request-Id and path).
func TestMirrorSharesPool(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		primary := echoBackend(t, "primary")
		tab := buildTable(t, route{host: "app.test", path: "/", endpoints: []string{hostport(primary)}})
		r := tab.Lookup("app.test", "/")
		r.Options.Policy.Mirrors = []table.Mirror{{Backend: r.Backend, Numerator: 1, Denominator: 1}}
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		s, addr, _ := startProxy(t, opts, tab)
		var wg sync.WaitGroup
		errs := make(chan string, 200)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					path := "/g" + string(rune('a'+g)) + "/" + strings.Repeat("i", i+1)
					req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
					req.Host = "app.test"
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						errs <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var e echoReply
					if err := json.Unmarshal(b, &e); err != nil || e.Path != path || strings.Join(e.Header["X-Request-Id"], ",") != resp.Header.Get("X-Request-Id") {
						errs <- "answer " + string(b) + " to " + path + " (request ID " + resp.Header.Get("X-Request-Id") + ")"
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		waitMirrorsDone(t, s)
		if n := testutil.ToFloat64(opts.Metrics.Mirrors.WithLabelValues(mirrorSent)); n != 200 {
			t.Errorf("sent = %v, want 200", n)
		}
	})
}
