package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
	"github.com/metalgate/metalgate/internal/secretkey"
	"github.com/metalgate/metalgate/proxy/controlplane"
	"github.com/metalgate/metalgate/proxy/dataplane"
	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
	"github.com/metalgate/metalgate/proxy/ticketkeys"
	"github.com/metalgate/metalgate/proxy/tracing"
)

// proxyOptions are the flags of `metalgate proxy`.
type proxyOptions struct {
	Kubeconfig              string
	HTTPAddr                string
	HTTPSAddr               string
	AdminAddr               string
	Controller              string
	WatchNamespaces         stringList
	WatchDefaultClass       bool
	AllowUnmanagedSlices    bool
	NginxAnnotations        bool
	DefaultBackendService   string
	ProxyProtocolHTTP       string
	ProxyProtocolHTTPS      string
	ProxyProtocolFrom       stringList
	ServeYielded            bool
	PublishService          string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	DefaultCertFile         string
	DefaultKeyFile          string
	TrustedProxies          stringList
	H2C                     bool
	ConnectTimeout          time.Duration
	ResponseHeaderTimeout   time.Duration
	ReadHeaderTimeout       time.Duration
	ClientIdleTimeout       time.Duration
	UpstreamIdleTimeout     time.Duration
	MaxIdlePerEndpoint      int
	MaxHeaderBytes          int
	MaxBodySize             string
	DefaultBodySize         string
	Retries                 int
	FailureThreshold        int
	EjectFor                time.Duration
	StaleAfter              time.Duration
	ShutdownTimeout         time.Duration
	AccessLog               bool
	AccessLogSample         float64
	AccessLogFields         string
	AccessLogQuery          bool
	OTLPEndpoint            string
	OTLPSampleRatio         float64
	ShutdownDelay           time.Duration
	DirectPath              bool
	UpstreamReadTimeout     time.Duration
	MaxResponseHeaderBytes  string
	Max1xxResponses         int
	ClientBodyTimeout       time.Duration
	SendTimeout             time.Duration
	HTTP2WriteTimeout       time.Duration
	HTTP2MaxStreams         int
	MaxConnections          int
	MaxConnectionsPerClient int
	RateLimitIPv6Prefix     int
	AuthCheckSlots          int
	AuthCheckWait           time.Duration
	AuthCheckNice           int
	EscapedSlashes          string
	KeepDuplicateSlashes    bool
	AllowUnderscoreHeaders  bool
	SSLPassthrough          bool
	ExternalAuthHosts       string
	// externalAuthHosts is ExternalAuthHosts parsed (by dataplaneOptions, which runs first).
	externalAuthHosts     table.HostList
	ServerHeader          string
	HSTS                  bool
	HSTSMaxAge            int64
	HSTSIncludeSubdomains bool
	HSTSPreload           bool
	PublicHTTPPort        int
	PublicHTTPSPort       int
	AffinityKeySecret     string
	TicketKeySecret       string
	TicketKeyRotation     time.Duration
	TicketKeyLifetime     time.Duration
	StaticConfig          string
	Gateway               string
	QPS                   float64
	Burst                 int
	Zap                   zap.Options
	MemoryLimitRatio      float64

	// registry receives the proxy's metrics and is served on /metrics. Default: the
	// registry of controller-runtime (which also holds client-go's and the workqueues').
	registry metricsRegistry
}

// metricsRegistry registers metrics and gathers them for /metrics.
type metricsRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// stringList is a repeatable flag; each value may also hold a comma-separated list.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*s = append(*s, x)
		}
	}
	return nil
}

func (o *proxyOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Default: in-cluster config, else $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.HTTPAddr, "http-bind-address", ":80", "Address of plain HTTP traffic; \"0\" disables it.")
	fs.StringVar(&o.HTTPSAddr, "https-bind-address", ":443", "Address of HTTPS traffic (TLS, HTTP/2 by ALPN); \"0\" disables it.")
	fs.StringVar(&o.AdminAddr, "admin-bind-address", fmt.Sprintf(":%d", contract.ProxyAdminPort), "Address of /healthz and /readyz (open), /metrics and /debug/backends (loopback, or a bearer token authorised for the path); \"0\" disables it.")
	fs.StringVar(&o.Controller, "controller-name", ingress.ControllerName, "IngressClass spec.controller served.")
	fs.Var(&o.WatchNamespaces, "watch-namespace", "Serve only Ingresses in this namespace (repeatable, or comma-separated). Default: all namespaces.")
	fs.BoolVar(&o.WatchDefaultClass, "watch-ingress-without-class", false, "Also serve Ingresses without a class when the default IngressClass is ours.")
	fs.BoolVar(&o.NginxAnnotations, "nginx-annotations", true, "Also read the nginx.ingress.kubernetes.io/ form of every annotation metalgate supports (the metalgate.io/ form wins), and report every other nginx annotation as a Warning event; false: ignore them all.")
	fs.BoolVar(&o.AllowUnmanagedSlices, "allow-unmanaged-endpointslices", false, "Also route to EndpointSlices not managed by endpointslice-controller.k8s.io (hand-written, or mirrored from hand-written Endpoints); their addresses are still checked.")
	fs.BoolVar(&o.ServeYielded, "serve-yielded-ingresses", true, "Also route the Ingresses whose status another metalgate proxy publishes (it wins the arbitration, docs/proxy.md) or that annotation metalgate.io/status-owner gives to another writer.")
	fs.StringVar(&o.PublishService, "publish-service", "", "namespace/name of the proxy's own LoadBalancer Service, whose addresses go into Ingress status. Default: the Service that selects this Pod (POD_NAME, POD_NAMESPACE).")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Elect one status writer among replicas with a Lease (every replica serves traffic).")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease. Default: the Pod's namespace; out of cluster, default.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "metalgate-proxy", "Name of the Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long the other replicas wait before they take a status Lease that was not renewed.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the status writer tries to renew its Lease before it stops writing status (and campaigns again; serving goes on). Less than --leader-election-lease-duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often each replica tries to take or renew the status Lease.")
	fs.StringVar(&o.DefaultCertFile, "default-certificate", "", "PEM certificate served when no Ingress certificate matches. Default: self-signed, generated at start.")
	fs.StringVar(&o.DefaultKeyFile, "default-certificate-key", "", "PEM key of --default-certificate.")
	fs.Var(&o.TrustedProxies, "trusted-proxies", "CIDRs whose X-Forwarded-*, X-Real-IP, Forwarded and X-Request-Id headers are kept (repeatable). Default: none.")
	fs.StringVar(&o.ProxyProtocolHTTP, "proxy-protocol-http", "off", "PROXY protocol (v1/v2) on the plain HTTP listener: off, optional, or required; from --proxy-protocol-from only.")
	fs.StringVar(&o.ProxyProtocolHTTPS, "proxy-protocol-https", "off", "PROXY protocol (v1/v2) on the HTTPS listener, before TLS: off, optional, or required; from --proxy-protocol-from only.")
	fs.Var(&o.ProxyProtocolFrom, "proxy-protocol-from", "CIDRs of the load balancers that may send a PROXY header (repeatable); a header from anyone else is refused. Needed when either listener takes the PROXY protocol.")
	fs.BoolVar(&o.H2C, "h2c", false, "Accept HTTP/2 with prior knowledge (h2c) on the plain HTTP port.")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", 5*time.Second, "Timeout to connect to an endpoint.")
	fs.DurationVar(&o.ResponseHeaderTimeout, "response-header-timeout", 60*time.Second, "Timeout for a backend's response headers.")
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "Timeout to read a client's request headers (slowloris).")
	fs.DurationVar(&o.ClientIdleTimeout, "client-idle-timeout", 120*time.Second, "Idle client keep-alive connections are closed after this.")
	fs.DurationVar(&o.UpstreamIdleTimeout, "upstream-idle-timeout", 90*time.Second, "Idle upstream keep-alive connections are closed after this.")
	fs.IntVar(&o.MaxIdlePerEndpoint, "upstream-keepalive", 512, "Idle keep-alive connections kept per endpoint.")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", 64<<10, "Largest request header block accepted.")
	fs.StringVar(&o.DefaultBodySize, "default-body-size", "", "Largest request body (e.g. 8m) on Ingress routes without metalgate.io/proxy-body-size, as ingress-nginx's proxy-body-size default; over it: 413. 0: unlimited. Default: 1m, or --max-body-size when only that is given.")
	fs.StringVar(&o.MaxBodySize, "max-body-size", "0", "Largest request body (e.g. 8m) on Gateway API routes, which have no setting of their own (Ingress routes: --default-body-size); 0: unlimited.")
	fs.IntVar(&o.Retries, "retries", 2, "Other endpoints tried after a connection failure (idempotent requests without a body); -1 disables.")
	fs.IntVar(&o.FailureThreshold, "eject-after", 3, "Consecutive connection failures that take an endpoint out of rotation.")
	fs.DurationVar(&o.EjectFor, "eject-for", 10*time.Second, "How long an ejected endpoint stays out of rotation.")
	fs.DurationVar(&o.StaleAfter, "stale-after", 2*time.Minute, "Readiness fails when a watch has been failing for this long (traffic is still served).")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", 5*time.Second, "On SIGTERM, how long the proxy keeps accepting connections, not ready, before it stops listening: time for load balancers and endpoints to drop it. Responses in that time carry Connection: close (HTTP/1) or a GOAWAY (HTTP/2).")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "On SIGTERM, after --shutdown-delay, how long requests in flight may finish.")
	fs.BoolVar(&o.AccessLog, "access-log", true, "Write the access log to stdout: one JSON object per line per request (docs/proxy.md, Access log).")
	fs.Float64Var(&o.AccessLogSample, "access-log-sample", 1, "Fraction of requests the access log records, more than 0 and at most 1 (0.1: one in ten).")
	fs.StringVar(&o.AccessLogFields, "access-log-fields", "", "Comma-separated access log fields to write (default all): "+strings.Join(dataplane.AccessLogFieldNames(), ",")+".")
	fs.BoolVar(&o.AccessLogQuery, "access-log-query", false, "Log the request path with its query (off: queries often carry tokens).")
	fs.StringVar(&o.OTLPEndpoint, "otlp-endpoint", "", "OpenTelemetry collector's OTLP/HTTP URL (http://collector:4318; traces go to /v1/traces): export a server span per routed request (docs/observability.md, Tracing). Empty: no spans.")
	fs.Float64Var(&o.OTLPSampleRatio, "otlp-sample-ratio", 0.01, "With --otlp-endpoint, the fraction of requests whose span is exported (0 to 1); a trusted proxy's (--trusted-proxies) traceparent decides for its requests.")
	fs.BoolVar(&o.DirectPath, "direct-path", true, "Forward HTTP/1.x GET and HEAD without a body on the direct path (its own HTTP/1.1 connection pool); false: httputil.ReverseProxy and http.Transport for everything.")
	fs.BoolVar(&o.DirectPath, "upstream-fast-path", true, "Deprecated: the old name of --direct-path.")
	fs.DurationVar(&o.UpstreamReadTimeout, "upstream-read-timeout", 60*time.Second, "Longest wait for each read of a backend's response body (idle, not total); then the response is cut. Negative: none.")
	fs.StringVar(&o.MaxResponseHeaderBytes, "max-response-header-bytes", "1m", "Largest backend response head, 1xx responses included (e.g. 512k); over it: 502.")
	fs.IntVar(&o.Max1xxResponses, "max-1xx-responses", 8, "Most informational (1xx) responses a backend may send before its final one; over it: 502.")
	fs.DurationVar(&o.ClientBodyTimeout, "client-body-timeout", 60*time.Second, "Longest wait for each read of a client's request body (idle, not total); then 408. Negative: none.")
	fs.DurationVar(&o.SendTimeout, "send-timeout", 60*time.Second, "Longest wait for each write of a response to a client (slow readers); then the connection is closed. Negative: none.")
	fs.DurationVar(&o.HTTP2WriteTimeout, "http2-write-timeout", 60*time.Second, "An HTTP/2 connection to which nothing could be written for this long is closed. Negative: none.")
	fs.IntVar(&o.HTTP2MaxStreams, "http2-max-concurrent-streams", 250, "Most concurrent streams on one HTTP/2 client connection.")
	fs.IntVar(&o.MaxConnections, "max-connections", 16384, "Most client connections open at once on each listener; more are closed when accepted. Negative: no limit.")
	fs.IntVar(&o.MaxConnectionsPerClient, "max-connections-per-client", 0, "Most client connections open at once from one address on each listener; 0: no limit (clients behind one NAT share an address).")
	fs.IntVar(&o.RateLimitIPv6Prefix, "rate-limit-ipv6-prefix", 64, "Prefix length by which rate limits (limit-rps, limit-rpm, limit-connections) key IPv6 clients: one host usually has a whole /64. 1 to 128; 128 keys each address on its own.")
	fs.IntVar(&o.AuthCheckSlots, "auth-check-slots", 0, "Password checks of basic authentication (bcrypt) running at once, all namespaces together; one namespace gets at most half (at least one). 0: the number of CPUs, at least 2.")
	fs.DurationVar(&o.AuthCheckWait, "auth-check-wait", 3*time.Second, "Longest wait of a password check for a free slot; then 503 with Retry-After. A check refused because its namespace already has too many waiting is answered 429 after the same time.")
	fs.IntVar(&o.AuthCheckNice, "auth-check-nice", 19, "Nice value of the threads that check passwords (bcrypt), 1 to 19 (Linux): the checks get the CPU only as far as request handling leaves it; the proxy then runs with --auth-check-slots more Go threads (GOMAXPROCS) than CPUs. 0: checks run at the proxy's own priority.")
	fs.StringVar(&o.EscapedSlashes, "escaped-slashes", "reject", "Encoded '/' or '\\' (%2F, %5C) and bare '\\' in request paths: reject (400), keep (forward as sent), or decode (treat as '/').")
	fs.BoolVar(&o.KeepDuplicateSlashes, "keep-duplicate-slashes", false, "Route and forward '//' in paths as sent; default: merged into one '/'.")
	fs.StringVar(&o.ExternalAuthHosts, "external-auth-hosts", "", "Outside hosts an Ingress's auth-url may name, comma-separated: exact names and *.suffix (any name under suffix). Never addresses; a name is refused when it resolves to a loopback, link-local, unspecified or multicast address. Default none: auth-url names a Service only.")
	fs.StringVar(&o.DefaultBackendService, "default-backend-service", "", "namespace/name:port of the proxy's own default backend (no :port: the Service's first): it serves the error page of requests that match no route (404) and of custom-http-errors without a default-backend annotation. Empty: none, a plain 404.")
	fs.BoolVar(&o.SSLPassthrough, "enable-ssl-passthrough", false, "Honour the ssl-passthrough annotation: the HTTPS listener reads each ClientHello's server name first and passes the connections for passthrough hosts, undecrypted, to their backend. Off: the annotation is reported and every host's TLS is terminated.")
	fs.BoolVar(&o.AllowUnderscoreHeaders, "allow-underscores-in-headers", false, "Forward request headers whose names contain '_'; default: dropped (X_Forwarded_For would read as X-Forwarded-For behind CGI/WSGI servers).")
	fs.StringVar(&o.ServerHeader, "server-header", "metalgate", "Server header of every response (a backend's is replaced); empty: none.")
	fs.BoolVar(&o.HSTS, "hsts", true, "Send Strict-Transport-Security on HTTPS responses for hosts an Ingress lists under spec.tls (replacing a backend's), never over plain HTTP, as ingress-nginx does by default. false: the proxy leaves the header alone.")
	fs.Int64Var(&o.HSTSMaxAge, "hsts-max-age", 31536000, "max-age of --hsts, in seconds.")
	fs.BoolVar(&o.HSTSIncludeSubdomains, "hsts-include-subdomains", true, "Add includeSubDomains to --hsts.")
	fs.BoolVar(&o.HSTSPreload, "hsts-preload", false, "Add preload to --hsts (browsers' preload lists also ask for includeSubDomains and a max-age of a year or more).")
	fs.IntVar(&o.PublicHTTPPort, "public-http-port", 80, "Port clients connect to for plain HTTP (the Service port), sent as X-Forwarded-Port.")
	fs.IntVar(&o.PublicHTTPSPort, "public-https-port", 443, "Port clients connect to for HTTPS (the Service port), sent as X-Forwarded-Port.")
	fs.StringVar(&o.AffinityKeySecret, "affinity-key-secret", "", "namespace/name of a Secret whose key \"key\" signs affinity cookies, created with a random key when missing, so that every replica names endpoints alike. Default: <pod namespace>/metalgate-proxy-affinity; \"-\" for a random key per process.")
	fs.StringVar(&o.TicketKeySecret, "tls-ticket-key-secret", "", "namespace/name of a Secret holding the TLS session ticket keys every replica shares (created when missing, rotated by the replicas), so that a client resumes its TLS session at any replica. Default: <pod namespace>/metalgate-proxy-tls-tickets for an Ingress proxy; \"-\" (keys of each process's own) for a Gateway proxy, --static-config or without POD_NAMESPACE.")
	fs.DurationVar(&o.TicketKeyRotation, "tls-ticket-key-rotation", time.Hour, "A new shared TLS session ticket key is made when the newest is this old (more than 2m).")
	fs.DurationVar(&o.TicketKeyLifetime, "tls-ticket-key-lifetime", 12*time.Hour, "A shared TLS session ticket key is dropped when it is this old: no session is resumed from a ticket older than that (at least the rotation period plus 2m, at most 49 rotation periods).")
	fs.StringVar(&o.Gateway, "gateway", "", "Serve this one Gateway (namespace/name): its HTTP and HTTPS listeners' ports (TLS with each listener's certificateRefs) and its HTTPRoutes, no Ingress. --http-bind-address and --https-bind-address are not used.")
	fs.StringVar(&o.StaticConfig, "static-config", "", "Development: serve the Ingresses, Services and EndpointSlices in this YAML file; no API server.")
	fs.Float64Var(&o.QPS, "kube-api-qps", 50, "Requests per second to the API server (client-side limit).")
	fs.IntVar(&o.Burst, "kube-api-burst", 100, "Burst of requests to the API server (client-side limit).")
	o.Zap.BindFlags(fs)
	bindMemoryLimit(fs, &o.MemoryLimitRatio)
}

func proxyCommand(ctx context.Context, args []string, stderr io.Writer) error {
	var opts proxyOptions
	if err := parseFlags("proxy", args, stderr, opts.bind); err != nil {
		return err
	}
	if opts.Gateway != "" {
		if _, err := opts.gatewayMode(); err != nil {
			return err
		}
	}
	ctx, err := start(ctx, &opts.Zap, opts.MemoryLimitRatio, stderr)
	if err != nil {
		return err
	}
	return runProxy(ctx, opts)
}

// dataplaneOptions translates flags into data-plane options. Long on purpose: one flat
// mapping, a line per group of flags, with the checks that need several flags together.
func (o *proxyOptions) dataplaneOptions(logger logr.Logger) (dataplane.Options, error) {
	d := dataplane.Options{
		H2C: o.H2C, ConnectTimeout: o.ConnectTimeout, ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		UpstreamIdleTimeout: o.UpstreamIdleTimeout, MaxIdlePerEndpoint: o.MaxIdlePerEndpoint,
		ReadHeaderTimeout: o.ReadHeaderTimeout, ClientIdleTimeout: o.ClientIdleTimeout, MaxHeaderBytes: o.MaxHeaderBytes,
		Retries: o.Retries, FailureThreshold: o.FailureThreshold, EjectFor: o.EjectFor, ShutdownTimeout: o.ShutdownTimeout,
		ShutdownDelay:   o.ShutdownDelay,
		AccessLogSample: o.AccessLogSample, AccessLogQuery: o.AccessLogQuery, DisableDirectPath: !o.DirectPath, Logger: logger.WithName("dataplane"),
		UpstreamReadTimeout: negOff(o.UpstreamReadTimeout), Max1xxResponses: o.Max1xxResponses,
		ClientBodyTimeout: negOff(o.ClientBodyTimeout), SendTimeout: negOff(o.SendTimeout), HTTP2WriteTimeout: negOff(o.HTTP2WriteTimeout),
		HTTP2MaxConcurrentStreams: o.HTTP2MaxStreams, MaxConnections: o.MaxConnections, MaxConnectionsPerClient: o.MaxConnectionsPerClient,
		RateLimitIPv6Prefix: o.RateLimitIPv6Prefix,
		EscapedSlashes:      dataplane.EscapedSlashes(o.EscapedSlashes), KeepDuplicateSlashes: o.KeepDuplicateSlashes,
		AllowUnderscoreHeaders: o.AllowUnderscoreHeaders, ServerHeader: o.ServerHeader,
		// A Gateway proxy's TLS listener decides per port: TLS Passthrough ports by server
		// name (TLSRoutes), HTTPS ports unread (dataplane/gatewaypassthrough.go).
		SSLPassthrough: o.SSLPassthrough || o.Gateway != "",
		PublicHTTPPort: o.PublicHTTPPort, PublicHTTPSPort: o.PublicHTTPSPort,
		AuthCheckSlots: o.AuthCheckSlots, AuthCheckWait: o.AuthCheckWait, AuthCheckNice: o.AuthCheckNice,
	}
	if o.ServerHeader == "" {
		d.ServerHeader = "-"
	}
	hsts, err := hstsValue(o.HSTS, o.HSTSMaxAge, o.HSTSIncludeSubdomains, o.HSTSPreload)
	if err != nil {
		return d, err
	}
	if o.externalAuthHosts, err = table.ParseHostList(o.ExternalAuthHosts); err != nil {
		return d, fmt.Errorf("--external-auth-hosts: %w", err)
	}
	d.HSTS = hsts
	if o.ShutdownDelay < 0 {
		return d, fmt.Errorf("--shutdown-delay %v: want 0 (none) or more", o.ShutdownDelay)
	}
	if o.ShutdownTimeout <= 0 {
		return d, fmt.Errorf("--shutdown-timeout %v: want more than 0", o.ShutdownTimeout)
	}
	if o.AccessLog {
		d.AccessLog = os.Stdout
	}
	if o.AccessLogFields != "" {
		d.AccessLogFields = strings.Split(o.AccessLogFields, ",")
	}
	if o.OTLPEndpoint != "" {
		if err := (tracing.Options{Endpoint: o.OTLPEndpoint, Ratio: o.OTLPSampleRatio}).Validate(); err != nil {
			return d, fmt.Errorf("--otlp-endpoint, --otlp-sample-ratio: %w", err)
		}
	}
	if o.Max1xxResponses < 1 {
		return d, fmt.Errorf("--max-1xx-responses %d: want at least 1", o.Max1xxResponses)
	}
	if o.HTTP2MaxStreams < 1 {
		return d, fmt.Errorf("--http2-max-concurrent-streams %d: want at least 1", o.HTTP2MaxStreams)
	}
	if o.AuthCheckSlots < 0 {
		return d, fmt.Errorf("--auth-check-slots %d: want 0 (the number of CPUs) or more", o.AuthCheckSlots)
	}
	if o.AuthCheckWait <= 0 {
		return d, fmt.Errorf("--auth-check-wait %v: want more than 0 (a check must not wait for ever)", o.AuthCheckWait)
	}
	if o.AuthCheckNice < 0 || o.AuthCheckNice > 19 {
		return d, fmt.Errorf("--auth-check-nice %d: want 0 (the proxy's own priority) to 19 (the lowest)", o.AuthCheckNice)
	}
	if d.AuthCheckSlots == 0 {
		d.AuthCheckSlots = dataplane.DefaultAuthCheckSlots() // before authCheckProcs raises GOMAXPROCS
	}
	if o.MaxConnectionsPerClient < 0 {
		return d, fmt.Errorf("--max-connections-per-client %d: want 0 (no limit) or more", o.MaxConnectionsPerClient)
	}
	if o.RateLimitIPv6Prefix < 1 || o.RateLimitIPv6Prefix > 128 {
		return d, fmt.Errorf("--rate-limit-ipv6-prefix %d: want a prefix length from 1 to 128", o.RateLimitIPv6Prefix)
	}
	switch d.EscapedSlashes {
	case dataplane.EscapedSlashesReject, dataplane.EscapedSlashesKeep, dataplane.EscapedSlashesDecode:
	default:
		return d, fmt.Errorf("--escaped-slashes %q: want reject, keep or decode", o.EscapedSlashes)
	}
	for _, p := range []struct {
		flag string
		v    int
	}{{"--public-http-port", o.PublicHTTPPort}, {"--public-https-port", o.PublicHTTPSPort}} {
		if p.v < 1 || p.v > 65535 {
			return d, fmt.Errorf("%s %d: want 1 to 65535", p.flag, p.v)
		}
	}
	rhb, err := parseByteSize(o.MaxResponseHeaderBytes)
	if err != nil || rhb < 1 {
		return d, fmt.Errorf("--max-response-header-bytes %q: want a size such as 1m or 512k", o.MaxResponseHeaderBytes)
	}
	d.MaxResponseHeaderBytes = rhb
	if o.Retries == 0 {
		d.Retries = -1
	}
	for _, pp := range []struct {
		flag, v string
		dst     *dataplane.ProxyProtocol
	}{{"--proxy-protocol-http", o.ProxyProtocolHTTP, &d.ProxyProtocolHTTP}, {"--proxy-protocol-https", o.ProxyProtocolHTTPS, &d.ProxyProtocolHTTPS}} {
		switch pp.v {
		case "off", "":
		case string(dataplane.ProxyProtocolOptional), string(dataplane.ProxyProtocolRequired):
			*pp.dst = dataplane.ProxyProtocol(pp.v)
		default:
			return d, fmt.Errorf("%s %q: want off, optional or required", pp.flag, pp.v)
		}
	}
	for _, c := range o.ProxyProtocolFrom {
		p, err := parsePrefixOrAddr(c)
		if err != nil {
			return d, fmt.Errorf("--proxy-protocol-from %q: %w", c, err)
		}
		d.ProxyProtocolFrom = append(d.ProxyProtocolFrom, p)
	}
	if (d.ProxyProtocolHTTP != "" || d.ProxyProtocolHTTPS != "") && len(d.ProxyProtocolFrom) == 0 {
		return d, fmt.Errorf("--proxy-protocol-http/--proxy-protocol-https: set --proxy-protocol-from to the load balancers that send it (a PROXY header from anyone else would forge the client address)")
	}
	for _, c := range o.TrustedProxies {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return d, fmt.Errorf("--trusted-proxies %q: %w", c, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		d.TrustedProxies = append(d.TrustedProxies, p)
	}
	size, err := parseByteSize(o.MaxBodySize)
	if err != nil {
		return d, fmt.Errorf("--max-body-size: %w", err)
	}
	d.MaxBodyBytes = size
	if d.IngressMaxBodyBytes, err = ingressBodySize(o.DefaultBodySize, o.MaxBodySize); err != nil {
		return d, err
	}
	if o.DefaultCertFile != "" || o.DefaultKeyFile != "" {
		c, err := tls.LoadX509KeyPair(o.DefaultCertFile, o.DefaultKeyFile)
		if err != nil {
			return d, fmt.Errorf("load default certificate: %w", err)
		}
		d.DefaultCertificate = &c
	}
	return d, nil
}

// ingressBodySize is dataplane.Options.IngressMaxBodyBytes for --default-body-size (def) and
// --max-body-size (maxSize): def, else max when it limits (before --default-body-size it was the
// Ingress routes' default too, and a proxy started with it keeps its limit), else 1m, as
// ingress-nginx; 0 (unlimited) is -1.
func ingressBodySize(def, maxSize string) (int64, error) {
	name := "--default-body-size"
	switch {
	case def != "":
	case maxSize != "" && maxSize != "0":
		def, name = maxSize, "--max-body-size"
	default:
		def = "1m"
	}
	n, err := parseByteSize(def)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}

// hstsValue is dataplane.Options.HSTS for the --hsts flags: the Strict-Transport-Security
// value (RFC 6797 §6.1), or "-" for none.
func hstsValue(on bool, maxAge int64, subdomains, preload bool) (string, error) {
	if !on {
		return "-", nil
	}
	if maxAge < 0 {
		return "", fmt.Errorf("--hsts-max-age %d: want 0 or more seconds", maxAge)
	}
	v := "max-age=" + strconv.FormatInt(maxAge, 10)
	if subdomains {
		v += "; includeSubDomains"
	}
	if preload {
		v += "; preload"
	}
	return v, nil
}

// parsePrefixOrAddr parses a CIDR, or an address as its own /32 or /128.
func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR or an address")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// negOff maps a duration flag to a data-plane option: there zero means the default and a
// negative value none, so a flag set to 0 (none) becomes negative.
func negOff(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func parseByteSize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for suffix, m := range map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			mult, s = m, strings.TrimSuffix(s, suffix)
		}
	}
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

// authCheckProcs is the GOMAXPROCS a proxy runs with, from the runtime's own (procs): with
// password checks on threads of lower priority (nice > 0), procs plus the checks that may
// run at once (slots). A goroutine locked to its thread holds its P (the runtime's right to
// run Go code) while it runs, and the kernel may leave a low-priority thread waiting for long
// while it holds one; with the extra Ps, the checks can never hold a P that request handling
// needs: it always has procs of them, and the kernel decides who gets the CPUs.
func authCheckProcs(procs, slots, nice int) int {
	if nice == 0 {
		return procs
	}
	return procs + slots
}

// runProxy runs the data plane, and the control plane unless --static-config, until ctx ends.
func runProxy(ctx context.Context, opts proxyOptions) error {
	logger := logr.FromContextOrDiscard(ctx)
	var reg metricsRegistry = metrics.Registry
	if opts.registry != nil {
		reg = opts.registry
	}
	dopts, err := opts.dataplaneOptions(logger)
	if err != nil {
		return err
	}
	keeper, err := ticketKeeper(opts, reg, logger)
	if err != nil {
		return err
	}
	// Raising GOMAXPROCS stops the runtime from following a changed CPU limit: the price of
	// checks that never hold the Ps request handling needs (authCheckProcs).
	if procs, n := goruntime.GOMAXPROCS(0), authCheckProcs(goruntime.GOMAXPROCS(0), dopts.AuthCheckSlots, dopts.AuthCheckNice); n != procs {
		goruntime.GOMAXPROCS(n)
		// Back when the proxy stops: another runner in this process (tests) starts from the
		// same value instead of doubling it (the default slots follow GOMAXPROCS).
		defer goruntime.GOMAXPROCS(procs)
	}
	if opts.LeaderElect && opts.StaticConfig == "" && opts.Gateway == "" {
		if err := opts.checkLease(); err != nil {
			return err
		}
	}
	if dopts.Metrics, err = proxyMetrics(reg); err != nil {
		return err
	}
	if opts.StaticConfig == "" {
		if dopts.AffinityKey, err = affinityKey(ctx, opts); err != nil {
			return err
		}
	}
	if opts.OTLPEndpoint != "" {
		tp, err := tracing.New(ctx, tracing.Options{Endpoint: opts.OTLPEndpoint, Ratio: opts.OTLPSampleRatio,
			ServiceName: "metalgate-proxy", Version: version.Get().Version})
		if err != nil {
			return fmt.Errorf("--otlp-endpoint, --otlp-sample-ratio: %w", err)
		}
		defer func() {
			// The spans of the last requests, within a bound: a collector that is away must
			// not hold the pod past its grace period.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				logger.Error(err, "spans not exported at shutdown")
			}
		}()
		dopts.Tracer = tp.Tracer()
	}
	dp, err := dataplane.New(dopts)
	if err != nil {
		return err
	}
	// Tables go through dbg, which counts them for /debug/backends on the admin port.
	dbg := dataplane.NewDebug(dp)
	httpLn, httpsLn, adminLn, err := proxyListeners(ctx, opts, logger)
	if err != nil {
		return err
	}

	cpReady := func() error { return nil }
	// Not ready from the moment shutdown begins (Serve drains): load balancers and the
	// endpoints drop this replica while it still accepts (--shutdown-delay).
	ready := func() error {
		if dp.Draining() {
			return errors.New("shutting down: draining connections")
		}
		return cpReady()
	}
	errs := make(chan error, 3)
	served := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.StaticConfig != "" {
		if err := serveStaticConfig(opts, dbg.Swap, logger); err != nil {
			return err
		}
	} else {
		cp, err := startControlPlane(ctx, opts, dbg.Swap, reg, logger, errs)
		if err != nil {
			return err
		}
		cpReady = cp.Ready
	}
	if adminLn != nil {
		// /metrics and /debug/backends for loopback and authorised tokens; probes open.
		var kube *rest.Config
		if opts.StaticConfig == "" {
			if kube, err = restConfig(opts.Kubeconfig); err != nil {
				return err
			}
		}
		guard, err := adminGuard(kube, dataplane.AdminOpenPaths, reg, logger)
		if err != nil {
			return err
		}
		admin := &http.Server{Handler: guard.Wrap(dataplane.AdminHandler(reg, ready, dbg.Route())), ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- admin.Serve(adminLn) }()
		defer admin.Close()
	}
	if keeper != nil {
		keeper.Set = dp.SetSessionTicketKeys
		go keeper.Run(ctx)
	}
	go func() { served <- dp.Serve(ctx, httpLn, httpsLn) }()
	logger.Info("starting proxy", "version", version.Get().Version, "http", opts.HTTPAddr, "https", opts.HTTPSAddr, "admin", opts.AdminAddr)
	select {
	case err := <-served: // after ctx ends, Serve drains requests in flight first
		return err
	case err := <-errs:
		cancel()
		<-served
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	}
}

// proxyListeners opens the proxy's listeners: a Gateway's listener ports (--gateway), else
// --http-bind-address and --https-bind-address; and the admin port. nil for one that is "0"
// or "".
func proxyListeners(ctx context.Context, opts proxyOptions, logger logr.Logger) (httpLn, httpsLn, adminLn net.Listener, err error) {
	listen := func(addr string) (net.Listener, error) {
		if addr == "0" || addr == "" {
			return nil, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, nil
	}
	if opts.Gateway != "" {
		httpLn, httpsLn, err = listenGateway(ctx, opts, logger)
	} else if httpLn, err = listen(opts.HTTPAddr); err == nil {
		httpsLn, err = listen(opts.HTTPSAddr)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if adminLn, err = listen(opts.AdminAddr); err != nil {
		return nil, nil, nil, err
	}
	return httpLn, httpsLn, adminLn, nil
}

// serveStaticConfig builds the one table of --static-config (no API server) and swaps it in.
func serveStaticConfig(opts proxyOptions, swap func(*table.Table), logger logr.Logger) error {
	f, err := os.Open(opts.StaticConfig)
	if err != nil {
		return fmt.Errorf("open static config: %w", err)
	}
	in, err := ingress.DecodeInput(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("static config %s: %w", opts.StaticConfig, err)
	}
	in.Controller, in.WatchDefaultClass, in.NginxAnnotations = opts.Controller, opts.WatchDefaultClass, opts.NginxAnnotations
	in.SSLPassthrough, in.ExternalAuthHosts = opts.SSLPassthrough, opts.externalAuthHosts
	if opts.DefaultBackendService != "" {
		if in.DefaultBackendService, in.DefaultBackendPort, err = ingress.ParseServiceRef(opts.DefaultBackendService); err != nil {
			return fmt.Errorf("--default-backend-service: %w", err)
		}
	}
	t, problems := ingress.Build(in)
	for _, p := range problems {
		logger.Info("build problem", "object", p.Object.String(), "reason", p.Reason, "message", p.Message)
	}
	swap(t)
	logger.Info("serving static config", "file", opts.StaticConfig, "ingresses", t.Ingresses, "backends", len(t.Backends))
	return nil
}

// affinityKey reads (or creates) the Secret whose key signs affinity cookies, so that every
// replica names endpoints alike. nil: a random key of this process's own.
func affinityKey(ctx context.Context, opts proxyOptions) ([]byte, error) {
	ref := opts.AffinityKeySecret
	if ref == "-" {
		return nil, nil
	}
	if ref == "" {
		ns := os.Getenv("POD_NAMESPACE")
		if ns == "" {
			logr.FromContextOrDiscard(ctx).Info("affinity cookies are signed with a key of this process alone: POD_NAMESPACE is not set and --affinity-key-secret is not given")
			return nil, nil
		}
		ref = ns + "/metalgate-proxy-affinity"
	}
	id, err := secretRef("--affinity-key-secret", ref)
	if err != nil {
		return nil, err
	}
	secrets, err := secretsClient(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("client for the affinity key: %w", err)
	}
	key, err := secretkey.Ensure(ctx, secrets, id, 32, proxySecretLabels())
	if err != nil {
		return nil, fmt.Errorf("affinity cookie key (--affinity-key-secret): %w", err)
	}
	return key, nil
}

// ticketKeyPoll is how often each replica reads the shared TLS session ticket keys; a new key
// encrypts tickets once it is ticketKeyPromote old, by when every replica has read it.
const (
	ticketKeyPoll    = 30 * time.Second
	ticketKeyPromote = 2 * time.Minute
)

// ticketKeeper returns the Keeper of the TLS session ticket keys the proxy's replicas share
// (its Set still to fill in), or nil when each process keeps keys of its own: "-", a Gateway
// proxy or --static-config without the flag, no POD_NAMESPACE.
func ticketKeeper(opts proxyOptions, reg prometheus.Registerer, logger logr.Logger) (*ticketkeys.Keeper, error) {
	policy := ticketkeys.Policy{Rotation: opts.TicketKeyRotation, Lifetime: opts.TicketKeyLifetime, Promote: ticketKeyPromote}
	if policy.Rotation <= policy.Promote {
		return nil, fmt.Errorf("--tls-ticket-key-rotation %s: want more than %s (a new key waits that long before it encrypts)", policy.Rotation, policy.Promote)
	}
	if err := policy.Check(); err != nil {
		return nil, fmt.Errorf("--tls-ticket-key-rotation, --tls-ticket-key-lifetime: %w", err)
	}
	ref := opts.TicketKeySecret
	if ref == "-" {
		return nil, nil
	}
	if ref == "" {
		ns := os.Getenv("POD_NAMESPACE")
		if opts.Gateway != "" || opts.StaticConfig != "" || ns == "" {
			logger.Info("TLS session tickets are encrypted with keys of this process alone: a session resumes only at this replica")
			return nil, nil
		}
		ref = ns + "/metalgate-proxy-tls-tickets"
	}
	id, err := secretRef("--tls-ticket-key-secret", ref)
	if err != nil {
		return nil, err
	}
	if opts.StaticConfig != "" {
		return nil, fmt.Errorf("--tls-ticket-key-secret %q: not with --static-config (no API server)", ref)
	}
	secrets, err := secretsClient(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("client for the TLS session ticket keys: %w", err)
	}
	return &ticketkeys.Keeper{Secrets: secrets, Secret: id, Policy: policy, Poll: ticketKeyPoll, Labels: proxySecretLabels(),
		Metrics: ticketkeys.NewMetrics(reg), Log: logger.WithName("ticketkeys")}, nil
}

// secretRef parses flag's value ref, a Secret's namespace/name.
func secretRef(flag, ref string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s %q: want namespace/name or -", flag, ref)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// secretsClient reaches the Secrets of the API server kubeconfig names (in-cluster when "").
func secretsClient(kubeconfig string) (corev1client.SecretsGetter, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1(), nil
}

// proxySecretLabels label the Secrets the proxy makes (its affinity and ticket keys).
func proxySecretLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "proxy"}
}

// proxyMetrics registers metalgate_build_info and the data plane's metrics with reg (the
// control plane registers its own when it starts).
func proxyMetrics(reg prometheus.Registerer) (*dataplane.Metrics, error) {
	if err := version.RegisterBuildInfo(reg); err != nil {
		return nil, err
	}
	return dataplane.NewMetrics(reg), nil
}

// controlPlaneOptions translates flags into control-plane options: the field manager
// named after the proxy's identity (its publish Service, else its namespace), and in Gateway
// mode the Gateway, with leader election turned off in opts.
func controlPlaneOptions(opts *proxyOptions, swap func(*table.Table), reg prometheus.Registerer, logger logr.Logger) (controlplane.Options, error) {
	copts := controlplane.Options{
		Controller:        opts.Controller,
		WatchNamespaces:   opts.WatchNamespaces,
		WatchDefaultClass: opts.WatchDefaultClass,
		PodName:           os.Getenv("POD_NAME"),
		PodNamespace:      os.Getenv("POD_NAMESPACE"),
		StaleAfter:        opts.StaleAfter,
		Swap:              swap,
		Metrics:           controlplane.NewMetrics(reg),
		Logger:            logger.WithName("controlplane"),
	}
	copts.AllowUnmanagedSlices = opts.AllowUnmanagedSlices
	copts.NginxAnnotations = opts.NginxAnnotations
	copts.ExternalAuthHosts = opts.externalAuthHosts
	copts.SSLPassthrough = opts.SSLPassthrough
	if opts.DefaultBackendService != "" {
		svc, port, err := ingress.ParseServiceRef(opts.DefaultBackendService)
		if err != nil {
			return copts, fmt.Errorf("--default-backend-service: %w", err)
		}
		copts.DefaultBackendService, copts.DefaultBackendPort = svc, port
	}
	copts.YieldTraffic = !opts.ServeYielded
	identity := copts.PodNamespace
	if opts.PublishService != "" {
		ns, name, ok := strings.Cut(opts.PublishService, "/")
		if !ok || ns == "" || name == "" {
			return copts, fmt.Errorf("--publish-service %q: want namespace/name", opts.PublishService)
		}
		copts.PublishService = types.NamespacedName{Namespace: ns, Name: name}
		identity = ns + "." + name
	}
	if identity == "" {
		identity = "local"
	}
	// Two proxies that claim one class must write under different names, or neither could
	// tell the other's writes from its own.
	copts.FieldManager = "metalgate-proxy." + identity
	if len(copts.FieldManager) > 128 {
		copts.FieldManager = copts.FieldManager[:128]
	}
	if opts.Gateway != "" {
		var err error
		if copts.Gateway, err = opts.gatewayMode(); err != nil {
			return copts, err
		}
		// A Gateway proxy does no leader-only work (it writes no status), and must never
		// take the Ingress proxies' Lease from them.
		opts.LeaderElect = false
	}
	return copts, nil
}

// startControlPlane starts the manager with the proxy's control plane; its end is sent to errs.
// The manager has no leader election: the status writer, the proxy's only leader-only work,
// campaigns for the Lease itself (controlplane.Election) and only stops writing when it
// loses it, so a lost Lease or a lost API server never ends the process (issue #25).
func startControlPlane(ctx context.Context, opts proxyOptions, swap func(*table.Table), reg prometheus.Registerer, logger logr.Logger, errs chan<- error) (*controlplane.ControlPlane, error) {
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "metalgate-proxy/" + version.Get().Version
	// The Lease keeps a bucket of its own, so that no burst of other requests delays a
	// renewal (a late renewal is a lost Lease).
	leCfg := rest.CopyConfig(cfg)
	leCfg.QPS, leCfg.Burst = 5, 10
	cfg.QPS, cfg.Burst = float32(opts.QPS), opts.Burst
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := addGatewayTypes(scheme); err != nil {
		return nil, err
	}
	copts, err := controlPlaneOptions(&opts, swap, reg, logger)
	if err != nil {
		return nil, err
	}
	if opts.LeaderElect { // Lease timings checked by runProxy
		leaseNS := opts.LeaderElectionNamespace
		if leaseNS == "" { // the Pod's namespace; out of cluster, default
			leaseNS = "default"
			if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
				leaseNS = strings.TrimSpace(string(b))
			}
		}
		copts.StatusElection = &controlplane.Election{Namespace: leaseNS, Name: opts.LeaderElectionID, Config: leCfg,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
	}
	cp, err := controlplane.New(copts)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Cache:                  cp.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"}, // served on the admin port
		HealthProbeBindAddress: "0",
		LeaderElection:         false, // see above: the status writer has its own Lease
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := cp.Setup(mgr); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			errs <- fmt.Errorf("run control plane: %w", err)
		}
	}()
	return cp, nil
}

// checkLease refuses Lease timings client-go's elector would refuse later, naming the flags.
func (o *proxyOptions) checkLease() error {
	switch {
	case o.RetryPeriod <= 0:
		return fmt.Errorf("--leader-election-retry-period %v: want more than 0", o.RetryPeriod)
	case float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod):
		return fmt.Errorf("--leader-election-renew-deadline %v: want more than 1.2 × --leader-election-retry-period (%v)", o.RenewDeadline, o.RetryPeriod)
	case o.LeaseDuration <= o.RenewDeadline:
		return fmt.Errorf("--leader-election-lease-duration %v: want more than --leader-election-renew-deadline (%v), or two replicas could write at once", o.LeaseDuration, o.RenewDeadline)
	}
	return nil
}
