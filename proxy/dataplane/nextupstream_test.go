package dataplane

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// failingBackend answers every request as kind says and counts them: "503" and "404"
// statuses, "hang" no answer (until the proxy hangs up), "garbage" a malformed response
// head (over raw TCP), "ok" 200 with its name.
func failingBackend(t *testing.T, kind string, hits *atomic.Int64) string {
	t.Helper()
	if kind == "garbage" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				br := bufio.NewReader(c)
				_, _ = http.ReadRequest(br)
				_, _ = io.WriteString(c, "HTTP/1.1 2x0 Nonsense\r\n\r\n")
				c.Close()
			}
		}()
		t.Cleanup(func() { ln.Close(); <-done })
		return ln.Addr().String()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch kind {
		case "503":
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "bad")
		case "hang":
			<-r.Context().Done()
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return hostport(srv)
}

// TestNextUpstream pins proxy-next-upstream on both forwarding paths, against real backends
// that fail in each way: a response passed on is never seen by the client, a request with a
// body or a non-idempotent method is never sent twice (unless non_idempotent, and then
// without a body only), each retry goes to an endpoint not tried yet, and every retry is
// counted.
func TestNextUpstream(t *testing.T) {
	const n = 6 // requests per case: round robin sends half of the first attempts to each endpoint
	type want struct {
		status int // every answer's; 0: the bad endpoint's stand beside 200s
	}
	for _, tc := range []struct {
		name   string
		bad    string // the failing endpoint's kind; the other answers 200
		ann    map[string]string
		method string
		body   string
		want   want
	}{
		// Hostile first: what must never be sent twice.
		{name: "POST without non_idempotent: the 503 stands", bad: "503", ann: map[string]string{"proxy-next-upstream": "error http_503"}, method: "POST",
			want: want{0}},
		{name: "POST with a body, even with non_idempotent: never again", bad: "503", ann: map[string]string{"proxy-next-upstream": "http_503 non_idempotent"}, method: "POST", body: "payload",
			want: want{0}},
		{name: "PUT with a body (idempotent): never again, the body is streamed", bad: "503", ann: map[string]string{"proxy-next-upstream": "http_503"}, method: "PUT", body: "payload",
			want: want{0}},
		{name: "POST timing out without non_idempotent: 504", bad: "hang", ann: map[string]string{"proxy-next-upstream": "timeout", "proxy-read-timeout": "300ms"}, method: "POST",
			want: want{0}},
		{name: "off: not even a refused connection", bad: "refused", ann: map[string]string{"proxy-next-upstream": "off"}, method: "GET",
			want: want{0}},
		{name: "tries 1: no other attempt", bad: "503", ann: map[string]string{"proxy-next-upstream": "http_503", "proxy-next-upstream-tries": "1"}, method: "GET",
			want: want{0}},
		{name: "503 not listed: it stands", bad: "503", ann: map[string]string{"proxy-next-upstream": "error timeout"}, method: "GET",
			want: want{0}},
		// What is passed on.
		{name: "GET 503 with http_503", bad: "503", ann: map[string]string{"proxy-next-upstream": "error timeout http_503"}, method: "GET",
			want: want{200}},
		{name: "bodiless POST 503 with non_idempotent", bad: "503", ann: map[string]string{"proxy-next-upstream": "http_503 non_idempotent"}, method: "POST",
			want: want{200}},
		{name: "GET timing out", bad: "hang", ann: map[string]string{"proxy-next-upstream": "timeout", "proxy-read-timeout": "300ms"}, method: "GET",
			want: want{200}},
		{name: "GET to a malformed response head with invalid_header", bad: "garbage", ann: map[string]string{"proxy-next-upstream": "invalid_header"}, method: "GET",
			want: want{200}},
		{name: "GET to a refused connection (error)", bad: "refused", ann: map[string]string{"proxy-next-upstream": "error"}, method: "GET",
			want: want{200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				var badHits, goodHits atomic.Int64
				var bad string
				if tc.bad == "refused" {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					bad = ln.Addr().String()
					ln.Close()
				} else {
					bad = failingBackend(t, tc.bad, &badHits)
				}
				good := failingBackend(t, "ok", &goodHits)
				ann := map[string]string{}
				for k, v := range tc.ann {
					ann[ingress.PrefixNginx+k] = v
				}
				tab := buildTable(t, route{host: "n.test", path: "/", endpoints: []string{bad, good}, annotations: ann})
				opts.Metrics = NewMetrics(prometheus.NewRegistry())
				opts.FailureThreshold = 1000 // no ejection: every request meets the bad endpoint's turn
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second}
				statuses := map[int]int{}
				for i := 0; i < n; i++ {
					var body io.Reader
					if tc.body != "" {
						body = strings.NewReader(tc.body)
					}
					req, _ := http.NewRequestWithContext(context.Background(), tc.method, "http://"+addr+"/", body)
					req.Host = "n.test"
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					statuses[resp.StatusCode]++
					if resp.StatusCode == 200 && string(b) != "ok" {
						t.Errorf("200 with %q", b)
					}
				}
				retries := int64(counterSum(opts.Metrics.Retries))
				// Every retry is counted under why the attempt before failed.
				if reason := map[string]string{"503": "http_503", "hang": "timeout", "garbage": "invalid_header", "refused": "connect"}[tc.bad]; retries > 0 &&
					int64(testutil.ToFloat64(opts.Metrics.Retries.WithLabelValues(reason))) != retries {
					t.Errorf("retries by reason %v; want all %d under %q", counterValues(opts.Metrics.Retries), retries, reason)
				}
				switch {
				case tc.want.status == 0 && (statuses[200] == 0 || statuses[200] == n):
					t.Errorf("statuses %v; want the bad endpoint's answers to stand beside 200s", statuses)
				case tc.want.status == 0 && retries != 0:
					t.Errorf("%d retries counted; want none", retries)
				case tc.want.status != 0 && statuses[tc.want.status] != n:
					t.Errorf("statuses %v; want %d × %d", statuses, n, tc.want.status)
				case tc.want.status != 0 && goodHits.Load() != n:
					// Each request reached the good endpoint once: a retry never went back to
					// the endpoint it had tried.
					t.Errorf("good endpoint hit %d times for %d requests", goodHits.Load(), n)
				case tc.want.status != 0 && tc.bad != "refused" && (badHits.Load() == 0 || retries != badHits.Load()):
					t.Errorf("%d retries counted, bad endpoint hit %d times; want equal, more than 0", retries, badHits.Load())
				case tc.want.status != 0 && tc.bad == "refused" && (retries < 1 || retries > n):
					t.Errorf("%d retries counted; want 1 to %d", retries, n)
				}
				if tc.body != "" && goodHits.Load()+badHits.Load() != n {
					t.Errorf("%d requests with a body reached the backends %d times; want once each", n, goodHits.Load()+badHits.Load())
				}
			})
		})
	}
}

// TestNextUpstreamPolicy pins the retry policy's bounds: the tries, the timeout after which
// no attempt begins, and an endpoint left untried.
func TestNextUpstreamPolicy(t *testing.T) {
	eps := 3
	mk := func(tried int) *attempt {
		p := &pool{eps: make([]*balancer.Endpoint, eps)}
		a := &attempt{pool: p}
		a.tried = make([]*balancer.Endpoint, tried)
		return a
	}
	now := time.Now()
	for _, tc := range []struct {
		name  string
		p     nextPolicy
		tried int
		try   int
		want  bool
	}{
		{"every endpoint tried", nextPolicy{on: table.NextError, tries: 10}, 3, 2, false},
		{"tries used up", nextPolicy{on: table.NextError, tries: 2}, 2, 1, false},
		{"tries 0: every endpoint once", nextPolicy{on: table.NextError}, 2, 1, true},
		{"timeout passed", nextPolicy{on: table.NextError, tries: 3, deadline: now.Add(-time.Millisecond)}, 1, 0, false},
		{"within tries and timeout", nextPolicy{on: table.NextError, tries: 3, deadline: now.Add(time.Hour)}, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.again(context.Background(), mk(tc.tried), tc.try); got != tc.want {
				t.Errorf("again = %v; want %v", got, tc.want)
			}
		})
	}
}

// counterSum is the sum of cv's counters; counterValues them by label values.
func counterSum(cv *prometheus.CounterVec) float64 {
	var sum float64
	for _, v := range counterValues(cv) {
		sum += v
	}
	return sum
}

func counterValues(cv *prometheus.CounterVec) map[string]float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { cv.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		var key []string
		for _, l := range pb.GetLabel() {
			key = append(key, l.GetValue())
		}
		out[strings.Join(key, ",")] = pb.GetCounter().GetValue()
	}
	return out
}
