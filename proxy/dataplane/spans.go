package dataplane

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/metalgate/metalgate/proxy/tracing"
)

// Spans (Options.Tracer set, --otlp-endpoint): a server span per routed request, a child of
// the client's valid traceparent (trace.go) or the root of a new trace. The backend is sent
// the proxy's span as its parent (same trace ID, the span's ID, the sampling decision); the
// tracestate goes on as the client sent it. Whether the span is exported is the sampler's
// (proxy/tracing): a client's sampled flag counts only from a trusted proxy. Attribute values
// come from the request as routed (method, scheme, path without query, the route's host) and
// from the table, and are cut to the access log's limits.

// startSpan starts a's span for r; the caller ends it with endSpan.
func (s *Server) startSpan(r *http.Request, a *attempt) {
	ctx := r.Context()
	if sc, ok := remoteParent(a.traceparent, a.tracestate); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		if a.trusted {
			ctx = tracing.WithTrustedParent(ctx)
		}
	}
	_, span := s.opts.Tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	a.span = span
	sc := span.SpanContext()
	if !sc.IsValid() {
		return
	}
	a.traceparent = traceparentOf(sc)
	if !span.IsRecording() {
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	span.SetAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("url.scheme", scheme),
		attribute.String("url.path", cut(r.URL.Path, maxLogPath)),
		attribute.String("server.address", cut(r.Host, maxLogHost)),
		attribute.String("client.address", cut(a.clientIP, maxLogHost)),
		attribute.String("user_agent.original", cut(r.Header.Get("User-Agent"), maxLogUserAgent)),
		attribute.String("network.protocol.version", strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)),
	)
}

// endSpan ends a's span with the response's status and what the request was routed to.
func (s *Server) endSpan(a *attempt, rw *responseWriter) {
	span := a.span
	if span.IsRecording() {
		id := a.routeIdentity()
		span.SetAttributes(
			attribute.Int("http.response.status_code", rw.code),
			attribute.String("metalgate.namespace", id[0]),
			attribute.String("metalgate.source_kind", id[1]),
			attribute.String("metalgate.source", id[2]),
			attribute.String("metalgate.service", id[3]),
			attribute.String("metalgate.request_id", cut(rw.reqID, maxLogHost)),
			attribute.Int("metalgate.retries", max(len(a.tried)-1, 0)),
		)
		if a.chosen != nil {
			span.SetAttributes(attribute.String("metalgate.upstream.address", a.chosen.Addr),
				attribute.Int("metalgate.upstream.status_code", a.upStatus))
		}
		if rw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rw.code))
		}
	}
	span.End()
}

// remoteParent is the span context of a valid traceparent (trace.go checked it) and its
// tracestate (dropped when the SDK cannot parse it; it is still forwarded as received).
func remoteParent(traceparent, tracestate string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(traceparent[3:35])
	sid, err2 := trace.SpanIDFromHex(traceparent[36:52])
	flags, err3 := strconv.ParseUint(traceparent[53:55], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}, false
	}
	ts, _ := trace.ParseTraceState(tracestate)
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & trace.FlagsSampled,
		TraceState: ts, Remote: true,
	}), true
}

// traceparentOf is sc as a version 00 traceparent.
func traceparentOf(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + tid.String() + "-" + sid.String() + "-" + flags
}

// cut is s cut to n bytes and made valid UTF-8: OTLP carries attributes as protobuf strings,
// and one invalid string (a client's path or User-Agent bytes) would fail the export of the
// whole batch, other tenants' spans with it.
func cut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
