package dataplane

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkObservability is BenchmarkServeHTTP's hot path (direct path, canned backend) with
// the per-route metrics and the JSON access log off and on, to show what each costs per
// request: go test -run '^$' -bench Observability -benchmem ./proxy/dataplane/.
func BenchmarkObservability(b *testing.B) {
	addr := cannedBackend(b)
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{addr}})
	for _, bc := range []struct {
		name          string
		metrics, alog bool
	}{{"none", false, false}, {"metrics", true, false}, {"accesslog", false, true}, {"both", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{}
			if bc.metrics {
				opts.Metrics = NewMetrics(prometheus.NewRegistry())
			}
			if bc.alog {
				opts.AccessLog = io.Discard
			}
			s, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			s.Swap(tab)
			defer s.CloseIdleConnections()
			if s.alog != nil {
				defer s.alog.flush()
			}
			la := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
			ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, net.Addr(la))
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			defer func() { b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "http://b.test/", nil).WithContext(ctx)
				req.RemoteAddr = "127.0.0.1:40000"
				req.Header.Set("User-Agent", "wrk")
				req.Header.Set("Accept", "*/*")
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					w.code, w.n = 0, 0
					s.ServeHTTP(w, req)
					if w.code != http.StatusOK || w.n != 11 {
						b.Errorf("status %d, %d bytes", w.code, w.n)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRouteSeries is the metrics' own cost per request: the series resolved at Swap
// (what ServeHTTP does) against resolving every label set per request with WithLabelValues.
func BenchmarkRouteSeries(b *testing.B) {
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{"127.0.0.1:1"}})
	m := NewMetrics(prometheus.NewRegistry())
	ts := m.compileSeries(tab, nil)
	rt := tab.Routes()[0]
	b.Run("resolved-at-swap", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rs := m.seriesFor(ts, rt, rt.Backend)
				rs.request(http.MethodGet, http.StatusOK)
				rs.duration.Observe(0.001)
				rs.requestSize.Observe(0)
				rs.responseSize.Observe(11)
				rs.upstreamFirstByte.Observe(0.001)
				rs.upstreamTotal.Observe(0.001)
			}
		})
	})
	b.Run("with-label-values", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l := seriesLabels(rt, rt.Backend)
				m.requests.WithLabelValues(l[0], l[1], l[2], l[3], http.MethodGet, codeLabel(http.StatusOK)).Inc()
				for _, h := range []*prometheus.HistogramVec{m.duration, m.requestSize, m.responseSize, m.upstreamFirstByte, m.upstreamTotal} {
					h.WithLabelValues(l[:]...).Observe(0.001)
				}
			}
		})
	})
}

// BenchmarkAccessLogLine is the access log's own cost per request: one full line built and
// queued for a writer that discards it.
func BenchmarkAccessLogLine(b *testing.B) {
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{"127.0.0.1:1"}})
	s, err := New(Options{AccessLog: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	s.Swap(tab)
	defer s.alog.flush()
	rt := tab.Routes()[0]
	req := httptest.NewRequest(http.MethodGet, "http://b.test/some/path?q=1", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36")
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a := &attempt{route: rt, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
		rw := &responseWriter{code: 200, bytes: 11, reqID: "0123456789abcdef0123456789abcdef"}
		for pb.Next() {
			s.logRequest(start, time.Millisecond, req, a, rw)
		}
	})
}
