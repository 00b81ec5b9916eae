package dataplane

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/metalgate/metalgate/internal/testenv"
)

// statusBackend answers /status/NNN with status NNN and a body of NNN bytes... of "x" times
// the code's last digit (so response sizes differ); anything else with 200 and "ok".
func statusBackend(t testing.TB) string {
	t.Helper()
	srv := echoBackend(t, "unused")
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := strings.CutPrefix(r.URL.Path, "/status/"); ok {
			code, _ := strconv.Atoi(c)
			w.WriteHeader(code)
			_, _ = io.WriteString(w, strings.Repeat("x", code%10))
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return hostport(srv)
}

// series lists every series of the registry's metalgate_proxy_* metrics as "name{labels}".
func series(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	return out
}

// labelValues collects, per label name, every value the registry's metrics carry.
func labelValues(t *testing.T, reg *prometheus.Registry) map[string]map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if out[lp.GetName()] == nil {
					out[lp.GetName()] = map[string]bool{}
				}
				out[lp.GetName()][lp.GetValue()] = true
			}
		}
	}
	return out
}

func histogramCount(t *testing.T, v *prometheus.HistogramVec, labels ...string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func histogramSum(t *testing.T, v *prometheus.HistogramVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetricsLabelsBounded (hostile): 1,000 requests with random hosts, paths and methods —
// most for hosts and paths no route takes — create no series beyond the route's and the one
// unrouted label set: no label carries a host, path or method a client made up, and a second
// round of 1,000 other random requests adds no series at all.
func TestMetricsLabelsBounded(t *testing.T) {
	be := statusBackend(t)
	tab := buildTable(t, route{host: "m.test", path: "/app", endpoints: []string{be}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		s, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		rng := rand.New(rand.NewPCG(1, 2))
		word := func() string {
			const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
			b := make([]byte, 1+rng.IntN(20))
			for i := range b {
				b[i] = letters[rng.IntN(len(letters))]
			}
			return string(b)
		}
		// Every method the client may send, the standard ones and made-up tokens (CONNECT
		// is left out: the client treats it as a tunnel).
		methodsSent := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}
		round := func(n int) {
			for range n {
				host := word() + ".test"
				if rng.IntN(3) == 0 {
					host = "m.test"
				}
				path := "/" + word() + "/" + word() + "%41?q=" + word()
				if rng.IntN(2) == 0 {
					path = "/app/" + word()
				}
				method := methodsSent[rng.IntN(len(methodsSent))]
				if rng.IntN(4) == 0 {
					method = strings.ToUpper(word())
				}
				req, err := http.NewRequest(method, "http://"+addr+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		round(1000)
		// Requests are counted as their handler returns, which may be just after the client
		// has the response: wait for all 1,000.
		testenv.Eventually(t, 5*time.Second, "1000 requests counted", func() error {
			var n float64
			mfs, _ := reg.Gather()
			for _, mf := range mfs {
				if mf.GetName() == "metalgate_proxy_requests_total" {
					for _, m := range mf.GetMetric() {
						n += m.GetCounter().GetValue()
					}
				}
			}
			if n != 1000 {
				return fmt.Errorf("%v counted", n)
			}
			return nil
		})
		_ = s
		vals := labelValues(t, reg)
		allowed := map[string][]string{
			"namespace":   {"", "ns"},
			"source_kind": {"", "Ingress"},
			"source":      {"", "r0"},
			"service":     {"", "r0"},
			"method":      methods[:],
			"code":        {"200", "404"},
		}
		for name, want := range allowed {
			for v := range vals[name] {
				if !slices.Contains(want, v) {
					t.Errorf("label %s=%q: a value no route or fixed set has (want one of %q)", name, v, want)
				}
			}
		}
		if !vals["method"]["OTHER"] || !vals["source"]["r0"] || !vals["source"][""] {
			t.Errorf("label values %v: want made-up methods as OTHER, the route's requests and unrouted ones", vals)
		}
		before := series(t, reg)
		// Bound: two label sets (the route, no route) × 10 methods × 2 codes, each in the
		// counter, plus six histograms per label set, plus the unlabelled metrics.
		if n := len(before); n > 2*10*2+2*6+20 {
			t.Errorf("%d series after 1000 random requests:\n%s", n, strings.Join(before, "\n"))
		}
		round(1000)
		testenv.Eventually(t, 5*time.Second, "no new series", func() error {
			after := series(t, reg)
			if extra := slices.DeleteFunc(after, func(s string) bool { return slices.Contains(before, s) }); len(extra) > 0 {
				return fmt.Errorf("new series after another 1000 random requests: %v", extra)
			}
			return nil
		})
	})
}

// TestMetricsPerRoute: each route's requests land on its own labels (namespace, kind and
// name of its Ingress, its Service), by method (a made-up one as OTHER) and exact code; the
// request, response-size and upstream histograms count each forwarded request once; a route
// gone from the table takes its series with it.
func TestMetricsPerRoute(t *testing.T) {
	be := statusBackend(t)
	tab := buildTable(t,
		route{host: "a.test", path: "/", endpoints: []string{be}, namespace: "team-a"},
		route{host: "b.test", path: "/", endpoints: []string{be}, namespace: "team-b"})
	type req struct {
		method, host, path string
		n                  int
	}
	reqs := []req{
		{"GET", "a.test", "/status/200", 3},
		{"POST", "a.test", "/status/418", 2},
		{"GET", "b.test", "/status/503", 1},
		{"PURGE", "b.test", "/status/204", 2},
		{"GET", "nobody.test", "/", 1},
	}
	want := []struct {
		labels []string
		n      float64
	}{
		{[]string{"team-a", "Ingress", "r0", "r0", "GET", "200"}, 3},
		{[]string{"team-a", "Ingress", "r0", "r0", "POST", "418"}, 2},
		{[]string{"team-b", "Ingress", "r1", "r1", "GET", "503"}, 1},
		{[]string{"team-b", "Ingress", "r1", "r1", "OTHER", "204"}, 2},
		{[]string{"", "", "", "", "GET", "404"}, 1},
	}
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		opts.Metrics = m
		s, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		for _, r := range reqs {
			for range r.n {
				hr, _ := http.NewRequest(r.method, "http://"+addr+r.path, nil)
				hr.Host = r.host
				resp, err := c.Do(hr)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		testenv.Eventually(t, 5*time.Second, "every request counted", func() error {
			for _, w := range want {
				if got := counterValue(t, m.requests.WithLabelValues(w.labels...)); got != w.n {
					return fmt.Errorf("requests_total%q = %v, want %v", w.labels, got, w.n)
				}
			}
			return nil
		})
		a := []string{"team-a", "Ingress", "r0", "r0"}
		for name, h := range map[string]*prometheus.HistogramVec{"duration": m.duration, "request size": m.requestSize,
			"response size": m.responseSize, "upstream first byte": m.upstreamFirstByte, "upstream total": m.upstreamTotal} {
			if n := histogramCount(t, h, a...); n != 5 {
				t.Errorf("%s: %d observations for team-a's route, want 5", name, n)
			}
		}
		// 3×"" (200: 0 bytes) + 2×"xxxxxxxx" (418: 8 bytes).
		if sum := histogramSum(t, m.responseSize, a...); sum != 16 {
			t.Errorf("response size sum %v, want 16", sum)
		}
		if n := histogramCount(t, m.upstreamConnect, a...); n < 1 || n > 5 {
			t.Errorf("upstream connect: %d observations, want 1 to 5 (one per new connection)", n)
		}
		if n := histogramCount(t, m.upstreamFirstByte, "", "", "", ""); n != 0 {
			t.Errorf("unrouted requests observed %d upstream exchanges", n)
		}
		// team-b's Ingress goes: its series go with it.
		s.Swap(buildTable(t, route{host: "a.test", path: "/", endpoints: []string{be}, namespace: "team-a"}))
		for _, se := range series(t, reg) {
			if strings.Contains(se, `"team-b"`) {
				t.Errorf("series %s kept after its route was removed", se)
			}
		}
		if got := counterValue(t, m.requests.WithLabelValues("team-a", "Ingress", "r0", "r0", "GET", "200")); got != 3 {
			t.Errorf("team-a's count after the swap: %v, want 3 (kept)", got)
		}
	})
}

// TestTLSHandshakeMetrics: a completed handshake counts as ok; a client that sends what is
// not a TLS handshake counts as failed.
func TestTLSHandshakeMetrics(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "t.test", path: "/", endpoints: []string{hostport(be)}})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		opts.Metrics = m
		_, _, tlsAddr := startProxy(t, opts, tab)
		// Hostile first: bytes that are no TLS record.
		nc, err := net.Dial("tcp", tlsAddr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.Write(make([]byte, 16))
		_, _ = io.Copy(io.Discard, nc) // the server gives up and closes
		nc.Close()
		testenv.Eventually(t, 5*time.Second, "a failed handshake", func() error {
			if n := counterValue(t, m.TLSHandshakes.WithLabelValues(handshakeFailed)); n != 1 {
				return fmt.Errorf("failed = %v, want 1", n)
			}
			return nil
		})
		tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "t.test", InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		tc.Close()
		testenv.Eventually(t, 5*time.Second, "an ok handshake", func() error {
			if n := counterValue(t, m.TLSHandshakes.WithLabelValues(handshakeOK)); n != 1 {
				return fmt.Errorf("ok = %v, want 1", n)
			}
			return nil
		})
		if n := counterValue(t, m.TLSHandshakes.WithLabelValues(handshakeFailed)); n != 1 {
			t.Errorf("failed = %v after a good handshake, want still 1", n)
		}
	})
}

// TestMetricsSplitService: a request a canary takes is counted under the canary's Service,
// on the route the client asked for (the main Ingress), the others under the main Service.
func TestMetricsSplitService(t *testing.T) {
	stable, canary := hostport(echoBackend(t, "stable")), hostport(echoBackend(t, "canary"))
	tab := buildTable(t,
		route{host: "c.test", path: "/", endpoints: []string{stable}},
		route{host: "c.test", path: "/", endpoints: []string{canary}, annotations: map[string]string{
			"nginx.ingress.kubernetes.io/canary": "true", "nginx.ingress.kubernetes.io/canary-by-header": "X-Canary"}})
	forEachPath(t, func(t *testing.T, opts Options) {
		m := NewMetrics(prometheus.NewRegistry())
		opts.Metrics = m
		_, addr, _ := startProxy(t, opts, tab)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		for _, hdr := range []map[string]string{{"Host": "c.test"}, {"Host": "c.test", "X-Canary": "always"}, {"Host": "c.test", "X-Canary": "always"}} {
			if resp, _ := get(t, c, "http://"+addr+"/", hdr); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		testenv.Eventually(t, 5*time.Second, "requests counted by Service", func() error {
			main := counterValue(t, m.requests.WithLabelValues("ns", "Ingress", "r0", "r0", "GET", "200"))
			can := counterValue(t, m.requests.WithLabelValues("ns", "Ingress", "r0", "r1", "GET", "200"))
			if main != 1 || can != 2 {
				return fmt.Errorf("main Service %v, canary Service %v; want 1 and 2", main, can)
			}
			return nil
		})
	})
}

// TestMetricsGatewayRoute: a Gateway table's requests are counted under the HTTPRoute that
// routed them (source_kind HTTPRoute, its namespace and name); a request the routes refuse
// (wrong header) under no route.
func TestMetricsGatewayRoute(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		api := echoBackend(t, "api")
		m := NewMetrics(prometheus.NewRegistry())
		opts.Metrics = m
		s, httpAddr, httpsAddr := startProxy(t, opts, buildTable(t))
		port := func(addr string) int32 {
			ap, err := net.ResolveTCPAddr("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			return int32(ap.Port)
		}
		s.Swap(gatewayTable(t, port(httpAddr), port(httpsAddr), map[string]string{"api": hostport(api)}))
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		if resp, _ := get(t, c, "http://"+httpAddr+"/api/v1", map[string]string{"X-Team": "a"}); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if resp, _ := get(t, c, "http://"+httpAddr+"/api/v1", map[string]string{"X-Team": "b"}); resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		testenv.Eventually(t, 5*time.Second, "both counted", func() error {
			routed := counterValue(t, m.requests.WithLabelValues("infra", "HTTPRoute", "api", "api", "GET", "200"))
			unrouted := counterValue(t, m.requests.WithLabelValues("", "", "", "", "GET", "404"))
			if routed != 1 || unrouted != 1 {
				return fmt.Errorf("HTTPRoute infra/api %v, no route %v; want 1 and 1", routed, unrouted)
			}
			return nil
		})
	})
}
