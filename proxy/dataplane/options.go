package dataplane

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
)

// Options configure the data plane. The zero value works; each field says its default.
type Options struct {
	// DefaultCertificate is served when no Ingress certificate matches the SNI name (or there
	// is none). Default: a self-signed certificate generated at start.
	DefaultCertificate *tls.Certificate
	// TrustedProxies are the client addresses whose X-Forwarded-*, X-Real-IP, Forwarded and
	// X-Request-Id headers are kept (extended). Default: none; they are replaced.
	TrustedProxies []netip.Prefix
	// H2C accepts HTTP/2 with prior knowledge on the plain-text listener. Default false.
	H2C bool

	// ConnectTimeout bounds dialing an endpoint. Default 5s.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a backend's response headers. Default 60s.
	ResponseHeaderTimeout time.Duration
	// UpstreamIdleTimeout closes idle upstream keep-alive connections. Default 90s.
	UpstreamIdleTimeout time.Duration
	// MaxIdlePerEndpoint is the keep-alive pool size per endpoint. Default 512.
	MaxIdlePerEndpoint int
	// ReadHeaderTimeout bounds reading a client's request headers (slowloris). Default 10s.
	ReadHeaderTimeout time.Duration
	// ClientIdleTimeout closes idle client keep-alive connections. Default 120s.
	ClientIdleTimeout time.Duration
	// MaxHeaderBytes limits a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes limits request bodies unless the Ingress says otherwise
	// (metalgate.io/proxy-body-size). Default 0: unlimited.
	MaxBodyBytes int64
	// Retries is how many other endpoints an idempotent request without a body is retried on
	// after a connection failure. Default 2; negative disables.
	Retries int
	// FailureThreshold consecutive connection failures eject an endpoint for EjectFor.
	// Defaults 3 and 10s.
	FailureThreshold int
	EjectFor         time.Duration
	// ShutdownTimeout is how long Serve waits for requests in flight when ctx ends.
	// Default 30s.
	ShutdownTimeout time.Duration

	// DialContext connects to an endpoint. Default: a net.Dialer with ConnectTimeout. Tests
	// use it to map pod addresses onto loopback ones.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// DisableFastPath sends every request through http.Transport instead of the pooled
	// HTTP/1.1 fast path for idempotent requests without a body. Default false.
	DisableFastPath bool

	// AccessLogSample logs one request in N (1: all); 0 disables the access log.
	AccessLogSample int
	// Logger receives the access log (V(0), message "request") and errors. Default: discard.
	Logger logr.Logger
	// Metrics, when set, count requests and upstream errors.
	Metrics *Metrics
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, 5*time.Second)
	def(&o.ResponseHeaderTimeout, 60*time.Second)
	def(&o.UpstreamIdleTimeout, 90*time.Second)
	def(&o.ReadHeaderTimeout, 10*time.Second)
	def(&o.ClientIdleTimeout, 120*time.Second)
	def(&o.EjectFor, 10*time.Second)
	def(&o.ShutdownTimeout, 30*time.Second)
	if o.MaxIdlePerEndpoint == 0 {
		o.MaxIdlePerEndpoint = 512
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.Retries == 0 {
		o.Retries = 2
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 3
	}
}
