package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/internal/testenv"
)

// logLines decodes every line of out as one JSON object; a line that is not one fails t.
func logLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.SplitAfter(out, "\n") {
		if l == "" {
			continue
		}
		if !utf8.ValidString(l) {
			t.Fatalf("access log line %q is not UTF-8 (RFC 8259 §8.1)", l)
		}
		if !strings.HasSuffix(l, "\n") {
			t.Fatalf("access log line without its newline: %q", l)
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("access log line %q is not JSON: %v", l, err)
		}
		if d.More() {
			t.Fatalf("access log line %q holds more than one object", l)
		}
		lines = append(lines, m)
	}
	return lines
}

// waitLines waits for n access log lines in out and returns them decoded.
func waitLines(t *testing.T, out *testenv.Buffer, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%d access log lines", n), func() error {
		lines = logLines(t, out.String())
		if len(lines) != n {
			return fmt.Errorf("%d lines: %s", len(lines), out.String())
		}
		return nil
	})
	return lines
}

// TestAccessLogHostile: a Host, path and User-Agent with quotes, backslashes, tabs, JSON and
// invalid UTF-8 (sent raw, past any client's checks) still make one line of valid JSON per
// request, with the values escaped (invalid UTF-8 as U+FFFD) and cut to their caps. CR, LF
// and other control characters, and quotes or non-ASCII in Host, never reach the handler
// (net/http answers 400 first); the encoder's own test, TestAppendJSONString, covers them.
func TestAccessLogHostile(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}})
	long := strings.Repeat("u", 5000)
	for _, tc := range []struct {
		name             string
		host, path, ua   string
		wantHost         string
		wantPath, wantUA string
	}{
		{name: "quotes and backslashes", host: `log.test`, path: `/a"b\c`, ua: `x"}{"status":1,"y":"\`,
			wantHost: "log.test", wantPath: `/a"b\c`, wantUA: `x"}{"status":1,"y":"\`},
		{name: "invalid UTF-8", host: "log.test", path: "/\xc3\x28/\xe2\x82", ua: "ua\xfe",
			wantHost: "log.test", wantPath: "/\ufffd(/\ufffd\ufffd", wantUA: "ua\ufffd"},
		{name: "odd host and a tab", host: "x'(%!;.test", path: "/p", ua: "a\tb",
			wantHost: "x'(%!;.test", wantPath: "/p", wantUA: "a\tb"},
		{name: "over the caps", host: strings.Repeat("h", 300) + ".test", path: "/" + strings.Repeat("p", 3000), ua: long,
			wantHost: strings.Repeat("h", maxLogHost), wantPath: "/" + strings.Repeat("p", maxLogPath-1), wantUA: long[:maxLogUserAgent]},
		{name: "JSON in the path", host: "log.test", path: `/"},{"x":"`, ua: "",
			wantHost: "log.test", wantPath: `/"},{"x":"`, wantUA: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var out testenv.Buffer
				opts.AccessLog = &out
				_, addr, _ := startProxy(t, opts, tab)
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nConnection: close\r\n\r\n", tc.path, tc.host, tc.ua)
				resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Server") != "metalgate" {
					t.Fatalf("the request did not reach the proxy's handler: %d %v", resp.StatusCode, resp.Header)
				}
				l := waitLines(t, &out, 1)[0]
				for k, want := range map[string]string{"host": tc.wantHost, "path": tc.wantPath, "user_agent": tc.wantUA} {
					got, _ := l[k].(string)
					if got != want {
						t.Errorf("%s = %q, want %q", k, got, want)
					}
					if !utf8.ValidString(got) {
						t.Errorf("%s = %q: invalid UTF-8", k, got)
					}
				}
				if l["status"] != json.Number(fmt.Sprint(resp.StatusCode)) {
					t.Errorf("status %v, the client got %d", l["status"], resp.StatusCode)
				}
			})
		})
	}
}

// TestAppendJSONString: every byte string, CR and LF included, becomes a JSON string that
// decodes to the input with invalid UTF-8 as U+FFFD, and holds no raw control character or
// line separator.
func TestAppendJSONString(t *testing.T) {
	for _, in := range []string{"", "plain", "a\r\nb", "\x00\x1f\x7f", `"\`, "\xff\xfe", "\u2028\u2029", "é€😀", "\xe2\x82", strings.Repeat("\n", 10)} {
		b := appendJSONString(nil, in, 1<<10)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q → %s: %v", in, b, err)
			continue
		}
		if got != invalidAsReplacement(in) {
			t.Errorf("%q → %s decodes to %q, want %q", in, b, got, invalidAsReplacement(in))
		}
		if bytes.ContainsAny(b, "\r\n\x00\u2028\u2029") {
			t.Errorf("%q → %s: a raw line break or control character", in, b)
		}
	}
}

// invalidAsReplacement is s with each invalid byte as U+FFFD (as encoding/json does).
func invalidAsReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// TestAccessLogFields: a routed request's line has every field with what the rules judged
// and the route it took; the client is the address the rules judge (a trusted proxy's
// X-Forwarded-For, else the connection's, never an untrusted client's claim); the query is
// left out unless asked for; a field selection writes those fields only; the trace ID is the
// valid traceparent's.
func TestAccessLogFields(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}, namespace: "shop"})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name    string
		trusted bool
		xff     string
		query   bool
		fields  []string
		check   func(t *testing.T, l map[string]any)
	}{
		{name: "untrusted client's X-Forwarded-For", xff: "203.0.113.7", check: func(t *testing.T, l map[string]any) {
			if l["client"] != "127.0.0.1" || !strings.HasPrefix(l["peer"].(string), "127.0.0.1:") {
				t.Errorf("client %v peer %v: want the connection's", l["client"], l["peer"])
			}
			want := map[string]any{"method": "GET", "host": "log.test", "path": "/x/y", "protocol": "HTTP/1.1", "status": json.Number("200"),
				"namespace": "shop", "source_kind": "Ingress", "source": "r0", "service": "r0", "upstream": hostport(be),
				"upstream_status": json.Number("200"), "retries": json.Number("0"), "user_agent": "test-agent",
				"request_id": "req-1", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "bytes_in": json.Number("0")}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("%s = %#v, want %#v", k, l[k], v)
				}
			}
			if len(l) != len(accessLogFields) {
				t.Errorf("%d fields, want all %d: %v", len(l), len(accessLogFields), l)
			}
			if _, err := time.Parse(time.RFC3339Nano, l["time"].(string)); err != nil {
				t.Errorf("time: %v", err)
			}
			for _, k := range []string{"duration", "upstream_duration", "bytes_out"} {
				if f, err := l[k].(json.Number).Float64(); err != nil || f <= 0 {
					t.Errorf("%s = %v, want more than 0", k, l[k])
				}
			}
		}},
		{name: "behind a trusted proxy", trusted: true, xff: "198.51.100.9, 203.0.113.7", check: func(t *testing.T, l map[string]any) {
			if l["client"] != "203.0.113.7" {
				t.Errorf("client %v, want the right-most untrusted hop", l["client"])
			}
		}},
		{name: "with the query", query: true, check: func(t *testing.T, l map[string]any) {
			if l["path"] != "/x/y?token=secret" {
				t.Errorf("path %v, want the query too", l["path"])
			}
		}},
		{name: "a selection", fields: []string{"status", "method", "trace_id"}, check: func(t *testing.T, l map[string]any) {
			keys := make([]string, 0, len(l))
			for k := range l {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, []string{"method", "status", "trace_id"}) {
				t.Errorf("fields %v, want method, status, trace_id", keys)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var out testenv.Buffer
				opts.AccessLog, opts.AccessLogQuery, opts.AccessLogFields = &out, tc.query, tc.fields
				if tc.trusted {
					opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				}
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				hdr := map[string]string{"Host": "log.test", "User-Agent": "test-agent", "X-Request-Id": "req-1", "Traceparent": tp}
				if tc.xff != "" {
					hdr["X-Forwarded-For"] = tc.xff
				}
				if resp, _ := get(t, c, "http://"+addr+"/x/y?token=secret", hdr); resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				tc.check(t, waitLines(t, &out, 1)[0])
			})
		})
	}
}

// TestAccessLogUnrouted: a request no route takes is logged with its client's address, empty
// route fields and no upstream.
func TestAccessLogUnrouted(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		var out testenv.Buffer
		opts.AccessLog = &out
		_, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		if resp, _ := get(t, c, "http://"+addr+"/", map[string]string{"Host": "other.test"}); resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		l := waitLines(t, &out, 1)[0]
		for k, v := range map[string]any{"client": "127.0.0.1", "host": "other.test", "status": json.Number("404"), "namespace": "", "source": "", "service": "",
			"upstream": "", "upstream_status": json.Number("0")} {
			if l[k] != v {
				t.Errorf("%s = %#v, want %#v", k, l[k], v)
			}
		}
	})
}

// TestAccessLogSample: a fraction of requests is logged, evenly.
func TestAccessLogSample(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}})
	for _, tc := range []struct {
		sample float64
		want   int
	}{{0.5, 10}, {0.1, 2}, {1, 20}} {
		t.Run(fmt.Sprint(tc.sample), func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var out testenv.Buffer
				opts.AccessLog, opts.AccessLogSample = &out, tc.sample
				s, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				for range 20 {
					if resp, _ := get(t, c, "http://"+addr+"/", map[string]string{"Host": "log.test"}); resp.StatusCode != 200 {
						t.Fatalf("status %d", resp.StatusCode)
					}
				}
				waitLines(t, &out, tc.want)
				if tc.sample < 1 {
					testenv.Eventually(t, 5*time.Second, "20 requests seen", func() error {
						if n := s.alog.n.Load(); n != 20 {
							return fmt.Errorf("%d seen", n)
						}
						return nil
					})
				}
				s.alog.flush()
				if n := len(logLines(t, out.String())); n != tc.want {
					t.Errorf("%d lines for 20 requests at %v, want %d", n, tc.sample, tc.want)
				}
			})
		})
	}
}

// blockedWriter is a stdout that takes nothing until released.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	lines   int
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// TestAccessLogSlowOutput (hostile): an output that takes nothing does not stall requests:
// every request is answered at once, the lines beyond the buffer are dropped and counted,
// and once the output moves every line is either written or counted as dropped.
func TestAccessLogSlowOutput(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "log.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		w := &blockedWriter{release: make(chan struct{})}
		reg := prometheus.NewRegistry()
		opts.AccessLog, opts.Metrics = w, NewMetrics(reg)
		s, addr, _ := startProxy(t, opts, tab)
		s.alog.limit = 4 << 10 // about ten lines
		released := false
		defer func() {
			if !released {
				close(w.release)
			}
		}()
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		const n = 60
		for range n {
			if resp, _ := get(t, c, "http://"+addr+"/", map[string]string{"Host": "log.test"}); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		dropped := func() int { return int(counterValue(t, opts.Metrics.AccessLogDropped)) }
		// The buffer holds about ten lines and the blocked write at most as many: most of
		// the rest must be dropped.
		testenv.Eventually(t, 5*time.Second, "lines dropped while the output is blocked", func() error {
			if d := dropped(); d < n/2 {
				return fmt.Errorf("%d of %d dropped", d, n)
			}
			return nil
		})
		close(w.release)
		released = true
		testenv.Eventually(t, 5*time.Second, "every request written or dropped", func() error {
			w.mu.Lock()
			written := w.lines
			w.mu.Unlock()
			if written+dropped() != n {
				return fmt.Errorf("%d written + %d dropped, want %d requests", written, dropped(), n)
			}
			return nil
		})
	})
}

// TestAccessLogOptions: a sample out of range and an unknown field are refused, naming them.
func TestAccessLogOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"sample above 1", Options{AccessLogSample: 1.5}, "access log sample 1.5: want a fraction more than 0 and at most 1"},
		{"negative sample", Options{AccessLogSample: -0.1}, "access log sample -0.1"},
		{"unknown field", Options{AccessLogFields: []string{"status", "cookie"}}, `access log field "cookie": unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestAccessLogTime: the cached second gives the same text as formatting each time whole,
// across second, day and year boundaries, before 1970, and when times go back (a clock step,
// or lines finished out of order by concurrent requests).
func TestAccessLogTime(t *testing.T) {
	l := newAccessLog(io.Discard, 0, false, 1, func(int) {})
	base := time.Date(2026, 11, 27, 23, 59, 59, 999_999_999, time.UTC)
	for _, tm := range []time.Time{
		base,
		base.Add(time.Nanosecond), // the next day, the same cache entry must not be used
		base.Add(-999_999_999),    // back to the second before
		base.Add(-999_999_999 + 1000),
		time.Date(2024, 2, 29, 12, 0, 0, 7000, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC),
		time.Unix(0, 0),
		time.Unix(-1, 999_999_000),
		time.Date(9999, 12, 31, 23, 59, 59, 123_456_789, time.UTC),
		time.Date(2026, 6, 1, 14, 0, 0, 1_000, time.FixedZone("CEST", 2*3600)), // not UTC
		time.Date(2026, 6, 1, 14, 0, 0, 999, time.Local),
	} {
		want := tm.UTC().AppendFormat(nil, "2006-01-02T15:04:05.000000Z07:00")
		if got := l.appendTime([]byte("x"), tm); string(got) != "x"+string(want) {
			t.Errorf("appendTime(%v) = %q, want %q", tm, got[1:], want)
		}
	}
	// Concurrent lines in different seconds share the cache (go test -race).
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				tm := base.Add(time.Duration(g*1000+i) * 1_234_567 * time.Nanosecond)
				want := tm.UTC().AppendFormat(nil, "2006-01-02T15:04:05.000000Z07:00")
				if got := l.appendTime(nil, tm); string(got) != string(want) {
					t.Errorf("concurrent appendTime(%v) = %q, want %q", tm, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
