package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkProxyGET measures the data plane in process: parallel keep-alive clients, one
// backend, small responses. Client and backend share the process, so use it for profiles
// (go test -run '^$' -bench ProxyGET -cpuprofile cpu.out ./proxy/dataplane/).
func BenchmarkProxyGET(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer be.Close()
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{hostport(be)}})
	_, addr, _ := startProxy(b, Options{}, tab)
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = "b.test"
		for pb.Next() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// cannedBackend answers every HTTP/1.1 request on a keep-alive connection with the same small
// response, without allocating, so that allocs/op in BenchmarkServeHTTP are the proxy's own.
func cannedBackend(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 16<<10)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) <= 2 { // the blank line ends a request without a body
						if _, err := c.Write(resp); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// discardWriter is the cheapest http.ResponseWriter: headers are kept (and cleared per
// request), the body is counted and dropped.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// BenchmarkServeHTTP is the proxy's hot path alone: ServeHTTP called directly (no client
// connection, no net/http server) for a GET like wrk's, forwarded to a backend that answers
// from a canned buffer. allocs/op is what the data plane allocates per request.
func BenchmarkServeHTTP(b *testing.B) {
	addr := cannedBackend(b)
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{addr}})
	benchEachPath(b, func(b *testing.B, opts Options) {
		s, err := New(opts)
		if err != nil {
			b.Fatal(err)
		}
		s.Swap(tab)
		defer s.CloseIdleConnections()
		la := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
		ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, net.Addr(la))
		defer measureCPU(b)()
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

// cpuTime is the process's user and system CPU time so far. CPU per request, unlike ns/op,
// holds up when other work shares the machine; it includes the canned backend's share.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProxyGETHTTP2: GETs from an HTTP/2 client (TLS, ALPN h2, one connection, as many
// streams as RunParallel's goroutines) through the proxy to a canned HTTP/1.1 backend, on the
// direct path and through ReverseProxy. cpu-ns/op is the whole process's (client, proxy and
// backend), so the difference between the two is the proxy's saving.
func BenchmarkProxyGETHTTP2(b *testing.B) {
	addr := cannedBackend(b)
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{addr}})
	benchEachPath(b, func(b *testing.B, opts Options) {
		_, _, tlsAddr := startProxy(b, opts, tab)
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "b.test", InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		defer measureCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest(http.MethodGet, "https://"+tlsAddr+"/", nil)
			req.Host = "b.test"
			for pb.Next() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || n != 11 {
					b.Errorf("%s %d, %d bytes", resp.Proto, resp.StatusCode, n)
					return
				}
			}
		})
	})
}

// benchEachPath runs f as a sub-benchmark on each forwarding path: "direct" and "reference"
// (ReverseProxy), as forEachPath does for tests.
func benchEachPath(b *testing.B, f func(b *testing.B, opts Options)) {
	for _, p := range []struct {
		name      string
		reference bool
	}{{"direct", false}, {"reference", true}} {
		b.Run(p.name, func(b *testing.B) { f(b, Options{DisableDirectPath: p.reference}) })
	}
}

// measureCPU reports allocations, restarts the timer, and returns what reports the process's
// CPU time per operation (cpu-ns/op) when deferred to the end of the benchmark.
func measureCPU(b *testing.B) func() {
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	return func() { b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op") }
}
