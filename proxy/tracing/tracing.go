// Package tracing exports a span per proxied request over OTLP/HTTP (OpenTelemetry), when
// the proxy is given a collector (--otlp-endpoint). It builds the tracer provider and holds
// the sampling rule: a client's own sampling decision (the traceparent's sampled flag) counts
// only when the client is a trusted proxy; any other request is sampled by the proxy's own
// random draw at the configured ratio, never by anything the client chose (its trace ID
// included), so a client cannot make the proxy export every one of its requests.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure the exporter.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL (http://collector:4318, or
	// https://…; traces go to its /v1/traces unless the URL has a path of its own).
	Endpoint string
	// Ratio is the fraction of requests sampled when the proxy decides (0–1).
	Ratio float64
	// ServiceName and Version name the proxy in the exported resource.
	ServiceName, Version string
	// Timeout bounds one export (default 10s).
	Timeout time.Duration
}

// Validate names the first bad option.
func (o Options) Validate() error {
	u, err := url.Parse(o.Endpoint)
	switch {
	case err != nil:
		return fmt.Errorf("otlp endpoint %q: %w", o.Endpoint, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("otlp endpoint %q: the scheme must be http or https", o.Endpoint)
	case u.Host == "":
		return fmt.Errorf("otlp endpoint %q: no host", o.Endpoint)
	case u.User != nil:
		return fmt.Errorf("otlp endpoint %q: credentials in the URL are not supported", o.Endpoint)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("otlp endpoint %q: no query or fragment allowed", o.Endpoint)
	case o.Ratio < 0 || o.Ratio > 1:
		return fmt.Errorf("otlp sample ratio %v: must be between 0 and 1", o.Ratio)
	}
	return nil
}

// Provider is a tracer provider exporting to the collector in batches (a bounded queue:
// spans that do not fit while the collector is slow or away are dropped, never waited for).
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New builds the provider. Nothing is sent before the first sampled span.
func New(ctx context.Context, o Options) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	u, _ := url.Parse(o.Endpoint)
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()), otlptracehttp.WithTimeout(o.Timeout))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", o.Endpoint, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", o.ServiceName),
		attribute.String("service.version", o.Version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(Sampler(o.Ratio)),
	)
	return &Provider{tp: tp}, nil
}

// Tracer is the proxy's tracer.
func (p *Provider) Tracer() trace.Tracer {
	return p.tp.Tracer("github.com/metalgate/metalgate/proxy")
}

// Shutdown exports what is queued, within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("otlp: flushing spans: %w", err)
	}
	return nil
}

// ForceFlush exports what is queued now (tests, and before a drain ends).
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

type trustedKey struct{}

// WithTrustedParent marks ctx's remote parent as sent by a trusted proxy: its sampled flag
// decides.
func WithTrustedParent(ctx context.Context) context.Context {
	return context.WithValue(ctx, trustedKey{}, true)
}

// Sampler samples a span whose remote parent came from a trusted proxy as that parent was,
// and any other span with probability ratio, drawn by the proxy.
func Sampler(ratio float64) sdktrace.Sampler { return sampler{ratio: ratio} }

type sampler struct{ ratio float64 }

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	var sample bool
	if trusted, _ := p.ParentContext.Value(trustedKey{}).(bool); trusted && psc.IsValid() {
		sample = psc.IsSampled()
	} else {
		sample = s.ratio >= 1 || s.ratio > 0 && rand.Float64() < s.ratio
	}
	d := sdktrace.Drop
	if sample {
		d = sdktrace.RecordAndSample
	}
	return sdktrace.SamplingResult{Decision: d, Tracestate: psc.TraceState()}
}

func (s sampler) Description() string {
	return fmt.Sprintf("metalgate{trusted parent, else random %g}", s.ratio)
}
