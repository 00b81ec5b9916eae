package dataplane

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/metalgate/metalgate/proxy/tracing"
)

// collector is an OTLP/HTTP trace receiver on loopback: it decodes each export request as a
// real collector does and keeps the spans.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	bad   int // export requests it could not decode
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.URL.Path != "/v1/traces" || err != nil {
			c.bad++
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) received() ([]*tracepb.Span, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...), c.bad
}

// newTracing is a provider exporting to endpoint at ratio, shut down when t ends.
func newTracing(t *testing.T, endpoint string, ratio float64) *tracing.Provider {
	p, err := tracing.New(context.Background(), tracing.Options{Endpoint: endpoint, Ratio: ratio, ServiceName: "metalgate-proxy", Version: "test", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// TestSpans: with an OTLP collector, a routed request is exported as a server span — a child
// of the client's traceparent, or the root of a new trace — and the backend is sent that span
// as its parent. Hostile first: an untrusted client's sampled flag does not make the proxy
// export (only a trusted proxy's does); a client's bytes that are not UTF-8 (path,
// User-Agent) cannot fail the export of a batch; a collector that is away costs no request.
func TestSpans(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "sp.test", path: "/", endpoints: []string{hostport(be)}, namespace: "team"})
	const clientTrace, clientParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	sampledParent := "00-" + clientTrace + "-" + clientParent + "-01"
	for _, tc := range []struct {
		name    string
		ratio   float64
		trusted bool
		path    string
		hdr     map[string]string
		away    bool // the collector's port refuses connections
		// wantSpans: how many spans the collector gets; wantSampled: the backend's flag.
		wantSpans   int
		wantSampled bool
		// wantClientTrace: the span (and the backend) continue the client's trace.
		wantClientTrace bool
	}{
		{name: "untrusted client asks for sampling", ratio: 0, hdr: map[string]string{"Traceparent": sampledParent},
			wantSpans: 0, wantSampled: false, wantClientTrace: true},
		{name: "bytes that are not UTF-8", ratio: 1, path: "/caf%e9/%ff%fe", hdr: map[string]string{"User-Agent": "ua-\xff\xfe-end"},
			wantSpans: 1, wantSampled: true},
		{name: "collector away", ratio: 1, away: true, wantSpans: 0, wantSampled: true},
		{name: "trusted proxy asks for sampling", ratio: 0, trusted: true, hdr: map[string]string{"Traceparent": sampledParent},
			wantSpans: 1, wantSampled: true, wantClientTrace: true},
		{name: "trusted proxy decided not to sample", ratio: 1, trusted: true, hdr: map[string]string{"Traceparent": "00-" + clientTrace + "-" + clientParent + "-00"},
			wantSpans: 0, wantSampled: false, wantClientTrace: true},
		{name: "child of the client's trace", ratio: 1, hdr: map[string]string{"Traceparent": "00-" + clientTrace + "-" + clientParent + "-00", "Tracestate": "congo=t61rcWkgMzE"},
			wantSpans: 1, wantSampled: true, wantClientTrace: true},
		{name: "root of a new trace", ratio: 1, wantSpans: 1, wantSampled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				col := newCollector(t)
				endpoint := col.srv.URL
				if tc.away {
					l, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					endpoint = "http://" + l.Addr().String()
					l.Close()
				}
				tp := newTracing(t, endpoint, tc.ratio)
				opts.Tracer = tp.Tracer()
				if tc.trusted {
					opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				}
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				path := tc.path
				if path == "" {
					path = "/"
				}
				hdr := map[string]string{"Host": "sp.test"}
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				n := 1
				if tc.away {
					n = 20
				}
				var backendTP string
				for range n {
					resp, e := get(t, c, "http://"+addr+path, hdr)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d, want 200", resp.StatusCode)
					}
					if tp := e.Header["Traceparent"]; len(tp) != 1 || !validTraceparent(tp[0]) {
						t.Fatalf("backend's traceparent %q, want one valid", tp)
					} else {
						backendTP = tp[0]
					}
					if tc.hdr["Tracestate"] != "" && strings.Join(e.Header["Tracestate"], ",") != tc.hdr["Tracestate"] {
						t.Errorf("backend's tracestate %q, want the client's %q", e.Header["Tracestate"], tc.hdr["Tracestate"])
					}
				}
				if got := strings.HasSuffix(backendTP, "-01"); got != tc.wantSampled {
					t.Errorf("backend's traceparent %s: sampled %v, want %v", backendTP, got, tc.wantSampled)
				}
				if got := backendTP[3:35] == clientTrace; got != tc.wantClientTrace {
					t.Errorf("backend's traceparent %s continues the client's trace: %v, want %v", backendTP, got, tc.wantClientTrace)
				}
				if backendTP[36:52] == clientParent {
					t.Errorf("backend's parent is the client's span %s, want the proxy's", clientParent)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := tp.ForceFlush(ctx)
				if tc.away {
					if err == nil {
						t.Error("ForceFlush to a collector that is away succeeded")
					}
					return
				}
				if err != nil {
					t.Fatalf("flush: %v", err)
				}
				spans, bad := col.received()
				if bad != 0 {
					t.Errorf("%d export requests the collector could not decode", bad)
				}
				if len(spans) != tc.wantSpans {
					t.Fatalf("%d spans exported, want %d", len(spans), tc.wantSpans)
				}
				if tc.wantSpans == 0 {
					return
				}
				s := spans[0]
				if s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Name != http.MethodGet {
					t.Errorf("span %q kind %v, want a server span named GET", s.Name, s.Kind)
				}
				if got := hex.EncodeToString(s.TraceId) + "-" + hex.EncodeToString(s.SpanId); got != backendTP[3:52] {
					t.Errorf("exported span %s, but the backend's parent is %s", got, backendTP[3:52])
				}
				wantParent := ""
				if tc.wantClientTrace {
					wantParent = clientParent
				}
				if got := hex.EncodeToString(s.ParentSpanId); got != wantParent {
					t.Errorf("span's parent %q, want %q", got, wantParent)
				}
				if v := spanAttr(s, "http.response.status_code"); v.GetIntValue() != 200 {
					t.Errorf("http.response.status_code %v, want 200", v)
				}
				for key, want := range map[string]string{"metalgate.namespace": "team", "metalgate.source_kind": "Ingress", "server.address": "sp.test"} {
					if got := spanAttr(s, key).GetStringValue(); got != want {
						t.Errorf("%s %q, want %q", key, got, want)
					}
				}
				for _, kv := range s.Attributes {
					if v := kv.Value.GetStringValue(); !utf8.ValidString(v) {
						t.Errorf("%s %q is not UTF-8", kv.Key, v)
					}
				}
				if tc.path != "" && !strings.HasPrefix(spanAttr(s, "url.path").GetStringValue(), "/caf") {
					t.Errorf("url.path %q", spanAttr(s, "url.path").GetStringValue())
				}
			})
		})
	}
}

// TestTracingOptions: a bad endpoint or ratio is refused, naming what is wrong.
func TestTracingOptions(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ratio    float64
		want     string
	}{
		{"collector:4318", 0.1, "scheme"},
		{"ftp://collector:4318", 0.1, "scheme"},
		{"http://", 0.1, "no host"},
		{"http://user:pw@collector:4318", 0.1, "credentials"},
		{"http://collector:4318/?x=1", 0.1, "query"},
		{"http://collector:4318", 1.5, "ratio"},
		{"http://collector:4318", -0.1, "ratio"},
	} {
		err := tracing.Options{Endpoint: tc.endpoint, Ratio: tc.ratio}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s ratio %v: %v, want an error about %s", tc.endpoint, tc.ratio, err, tc.want)
		}
	}
	if err := (tracing.Options{Endpoint: "https://collector.observability:4318", Ratio: 0.05}).Validate(); err != nil {
		t.Errorf("a good endpoint refused: %v", err)
	}
}
