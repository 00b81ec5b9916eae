package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// Server is the data plane. Create it with New, install tables with Swap, serve with Serve.
type Server struct {
	opts     Options
	current  atomic.Pointer[router]
	registry *balancer.Registry
	h1, h2c  *http.Transport
	fast     *h1Transport
	proxy    *httputil.ReverseProxy
	defCert  *tls.Certificate
	served   atomic.Uint64 // for access-log sampling
	// reencodeQueries: GODEBUG sets urlmaxqueryparams, with which ReverseProxy re-encodes
	// every query; the direct path then leaves all requests to it.
	reencodeQueries bool
}

// New returns a data plane with no table: every request gets 503 until the first Swap.
func New(opts Options) (*Server, error) {
	opts.defaults()
	s := &Server{opts: opts, registry: balancer.NewRegistry(), defCert: opts.DefaultCertificate,
		reencodeQueries: strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams")}
	if s.defCert == nil {
		c, err := SelfSignedCertificate("metalgate-proxy-default")
		if err != nil {
			return nil, err
		}
		s.defCert = c
	}
	dial := opts.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	var p1, p2 http.Protocols
	p1.SetHTTP1(true)
	p2.SetUnencryptedHTTP2(true)
	base := func(p *http.Protocols) *http.Transport {
		return &http.Transport{
			DialContext:           dial,
			Protocols:             p,
			MaxIdleConns:          0, // no global cap: the per-endpoint cap bounds it
			MaxIdleConnsPerHost:   opts.MaxIdlePerEndpoint,
			IdleConnTimeout:       opts.UpstreamIdleTimeout,
			ResponseHeaderTimeout: opts.ResponseHeaderTimeout,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true, // pass bodies through as the backend sent them
			WriteBufferSize:       32 << 10,
			ReadBufferSize:        32 << 10,
		}
	}
	s.h1, s.h2c = base(&p1), base(&p2)
	if !opts.DisableFastPath {
		s.fast = &h1Transport{dial: dial, maxIdle: opts.MaxIdlePerEndpoint, idleTimeout: opts.UpstreamIdleTimeout,
			responseTimeout: opts.ResponseHeaderTimeout, idle: map[string][]*h1Conn{}}
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite:        s.rewrite,
		Transport:      (*upstream)(s),
		FlushInterval:  0, // ReverseProxy flushes at once for streams (no Content-Length, SSE): gRPC, long polls
		BufferPool:     bufferPool{},
		ErrorHandler:   s.upstreamError,
		ModifyResponse: s.modifyResponse,
		ErrorLog:       nil,
	}
	return s, nil
}

// Swap installs a new table. Requests already routed keep the old one; new requests use t.
func (s *Server) Swap(t *table.Table) {
	r := compile(t, s.registry)
	s.current.Store(r)
	if s.fast != nil {
		keep := map[string]bool{}
		for _, be := range t.Backends {
			for _, a := range be.Endpoints {
				keep[a] = true
			}
		}
		s.fast.retain(keep)
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.TableSwaps.Inc()
	}
}

// Table returns the table in use, or nil before the first Swap.
func (s *Server) Table() *table.Table {
	if r := s.current.Load(); r != nil {
		return r.table
	}
	return nil
}

// TLSConfig serves certificates by SNI from the current table, else the default certificate,
// and offers h2 then http/1.1 by ALPN.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if r := s.current.Load(); r != nil && hello.ServerName != "" {
				if c := r.table.Certificate(hello.ServerName); c != nil {
					return c, nil
				}
			}
			return s.defCert, nil
		},
	}
}

// HTTPServer returns an http.Server for the proxy handler; tls selects the HTTPS settings.
func (s *Server) HTTPServer(tls bool) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	if tls {
		p.SetHTTP2(true)
	} else if s.opts.H2C {
		p.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           s,
		Protocols:         &p,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.ClientIdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          nil,
	}
	if tls {
		srv.TLSConfig = s.TLSConfig()
	}
	return srv
}

// Serve serves plain HTTP on httpLn and HTTPS on httpsLn (either may be nil) until ctx ends,
// then shuts down gracefully: listeners close, requests in flight get ShutdownTimeout.
func (s *Server) Serve(ctx context.Context, httpLn, httpsLn net.Listener) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var servers []*http.Server
	start := func(ln net.Listener, tls bool) {
		if ln == nil {
			return
		}
		srv := s.HTTPServer(tls)
		servers = append(servers, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if tls {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
	start(httpLn, false)
	start(httpsLn, true)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	wg.Wait()
	s.h1.CloseIdleConnections()
	s.h2c.CloseIdleConnections()
	if s.fast != nil {
		s.fast.CloseIdleConnections()
	}
	return err
}

// attempt is one request's forwarding state, carried in its context from ServeHTTP to the
// upstream round trip.
type attempt struct {
	pool      *pool
	key       string
	pinned    *balancer.Endpoint
	tried     []*balancer.Endpoint // in triedBuf unless retried more than its length
	triedBuf  [3]*balancer.Endpoint
	chosen    *balancer.Endpoint
	setCookie bool
	clientIP  string
	trusted   bool
	reqID     string
	upstream  string // error reason when the backend failed
}

type attemptKey struct{}

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &state{rw: responseWriter{ResponseWriter: w}} // one allocation for both
	rw := &st.rw
	s.serve(rw, r, &st.a)
	if rw.code == 0 {
		rw.code = http.StatusOK
	}
	if m := s.opts.Metrics; m != nil {
		m.request(rw.code)
		m.Duration.Observe(time.Since(start).Seconds())
	}
	if n := s.opts.AccessLogSample; n > 0 && s.served.Add(1)%uint64(n) == 0 {
		s.opts.Logger.Info("request", "method", r.Method, "host", r.Host, "path", r.URL.Path, "proto", r.Proto,
			"status", rw.code, "bytes", rw.bytes, "duration", time.Since(start), "client", r.RemoteAddr,
			"requestID", rw.Header().Get("X-Request-Id"))
	}
}

// state is one request's: its response writer and forwarding state.
type state struct {
	rw responseWriter
	a  attempt
}

func (s *Server) serve(w *responseWriter, r *http.Request, a *attempt) {
	rt := s.current.Load()
	if rt == nil {
		http.Error(w, "no routing table yet", http.StatusServiceUnavailable)
		return
	}
	route := rt.table.Lookup(r.Host, r.URL.Path)
	if route == nil {
		http.Error(w, "no route for this host and path", http.StatusNotFound)
		return
	}
	if route.Options.SSLRedirect && r.TLS == nil {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		u := url.URL{Scheme: "https", Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), http.StatusPermanentRedirect)
		return
	}
	limit := route.Options.MaxBodyBytes
	if limit == 0 {
		limit = s.opts.MaxBodyBytes
	}
	if limit > 0 && r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > limit {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	p := rt.pools[route.Backend]
	if p == nil || len(p.eps) == 0 {
		s.countUpstream("no_endpoints")
		http.Error(w, "no endpoints available for this backend", http.StatusServiceUnavailable)
		return
	}
	a.pool = p
	a.tried = a.triedBuf[:0]
	a.clientIP, a.trusted = s.client(r)
	a.reqID = r.Header.Get("X-Request-Id")
	if a.reqID == "" || !a.trusted && !validRequestID(a.reqID) {
		a.reqID = newRequestID()
	}
	w.Header().Set("X-Request-Id", a.reqID)
	bal := p.backend.Balance
	switch bal.HashBy {
	case table.HashByHeader:
		a.key = r.Header.Get(bal.HashKey)
	case table.HashByCookie:
		if c, err := r.Cookie(bal.HashKey); err == nil {
			a.key = c.Value
		}
	case table.HashByClientIP:
		a.key = a.clientIP
	}
	if bal.AffinityCookie != "" {
		if c, err := r.Cookie(bal.AffinityCookie); err == nil {
			a.pinned = p.byCookie[c.Value]
		}
	}
	if s.direct(r, p) {
		s.forward(w, r, a)
		return
	}
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), attemptKey{}, a)))
}

// validRequestID accepts a client's request ID only when it is short and plain.
func validRequestID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [32]byte
	const hexdigits = "0123456789abcdef"
	x, y := rand.Uint64(), rand.Uint64()
	for i := 0; i < 16; i++ {
		b[i] = hexdigits[(x>>(i*4))&0xf]
		b[16+i] = hexdigits[(y>>(i*4))&0xf]
	}
	return string(b[:])
}

// client returns the client's IP and whether it is a trusted proxy.
func (s *Server) client(r *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(s.opts.TrustedProxies) == 0 {
		return host, false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host, false
	}
	ip = ip.Unmap()
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(ip) {
			return host, true
		}
	}
	return host, false
}

// rewrite builds the outbound request. ReverseProxy has already removed hop-by-hop headers
// and X-Forwarded-For/Host/Proto and Forwarded from Out; the endpoint is chosen later, in the
// round trip, so a retry can choose another.
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	a := pr.In.Context().Value(attemptKey{}).(*attempt)
	in, out := pr.In, pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = "endpoint.invalid" // replaced by the round trip
	out.Host = in.Host
	out.Header.Del("X-Real-Ip")
	out.Header.Del("X-Forwarded-Port")
	out.Header.Set("X-Request-Id", a.reqID)

	f := s.forwarded(in, a)
	xff := a.clientIP
	if f.priorFor != "" {
		xff = f.priorFor + ", " + a.clientIP
	}
	h := out.Header
	h["X-Forwarded-For"] = []string{xff}
	h["X-Forwarded-Proto"] = []string{f.proto}
	h["X-Forwarded-Host"] = []string{f.host}
	if f.port != "" {
		h["X-Forwarded-Port"] = []string{f.port}
	}
	h["X-Real-Ip"] = []string{f.realIP}
	forwarded := ""
	if f.priorForwarded != "" {
		forwarded = f.priorForwarded + ", "
	}
	h["Forwarded"] = []string{forwarded + "for=" + forwardedFor(a.clientIP) + ";host=" + quoteForwarded(in.Host) + ";proto=" + f.proto}
}

// forwarding is what the forwarding headers of a request say: the values of a trusted
// proxy's headers extended with this hop, else this hop's alone.
type forwarding struct {
	priorFor       string // X-Forwarded-For from a trusted proxy, joined; empty otherwise
	priorForwarded string // Forwarded from a trusted proxy, joined; empty otherwise
	proto          string
	host           string
	port           string
	realIP         string
}

func (s *Server) forwarded(in *http.Request, a *attempt) forwarding {
	f := forwarding{proto: "http", host: in.Host, realIP: a.clientIP}
	if in.TLS != nil {
		f.proto = "https"
	}
	f.port = localPort(in.Context())
	if a.trusted {
		if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			f.priorFor = strings.Join(prior, ", ")
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			f.proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			f.host = v
		}
		if v := in.Header.Get("X-Forwarded-Port"); v != "" {
			f.port = v
		}
		if v := in.Header.Get("X-Real-Ip"); v != "" {
			f.realIP = v
		}
		if prior := in.Header.Values("Forwarded"); len(prior) > 0 {
			f.priorForwarded = strings.Join(prior, ", ")
		}
	}
	return f
}

// localPort is the port of the listener that accepted the request, or "".
func localPort(ctx context.Context) string {
	switch la := ctx.Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		return strconv.Itoa(la.Port)
	case net.Addr:
		if _, p, err := net.SplitHostPort(la.String()); err == nil {
			return p
		}
	}
	return ""
}

// forwardedFor is the client address as a Forwarded for= value: RFC 7239 §6 quotes and
// brackets IPv6.
func forwardedFor(ip string) string {
	if strings.Contains(ip, ":") {
		return `"[` + ip + `]"`
	}
	return ip
}

func quoteForwarded(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return strconv.Quote(v)
		}
	}
	return v
}

// upstream is the round trip to an endpoint: pick (affinity, then the balancer), dial, and on
// a connection failure count it (passive health) and retry another endpoint when safe.
type upstream Server

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	s := (*Server)(u)
	a := req.Context().Value(attemptKey{}).(*attempt)
	var rt http.RoundTripper = s.h1
	switch {
	case a.pool.backend.Protocol == table.ProtocolH2C:
		rt = s.h2c
	case s.fast != nil && h1Eligible(req):
		rt = s.fast
	}
	retryable := isIdempotent(req.Method) && (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == ""
	return s.send(req.Context(), a, retryable, func(e *balancer.Endpoint, try int) (*http.Response, error) {
		out := req
		if try > 0 {
			out = req.Clone(req.Context())
		}
		out.URL.Host = e.Addr
		return rt.RoundTrip(out)
	})
}

// send makes the attempts of one request: it picks the endpoint (affinity, then the
// balancer), calls exchange with it, counts the outcome (passive health), and after a
// connection failure tries another endpoint when retryable. A successful response's body
// ends the endpoint's in-flight count when closed.
func (s *Server) send(ctx context.Context, a *attempt, retryable bool, exchange func(e *balancer.Endpoint, try int) (*http.Response, error)) (*http.Response, error) {
	for try := 0; ; try++ {
		var e *balancer.Endpoint
		if try == 0 && a.pinned != nil && a.pinned.Healthy(time.Now()) {
			e = a.pinned
		} else {
			e = a.pool.bal.Pick(a.key, a.skip)
			if e == nil {
				a.upstream = "no_endpoints"
				return nil, errNoEndpoint
			}
			a.setCookie = a.pool.backend.Balance.AffinityCookie != ""
		}
		a.tried = append(a.tried, e)
		a.chosen = e
		start := time.Now()
		e.Start()
		resp, err := exchange(e, try)
		if err == nil {
			e.Succeeded()
			if resp.StatusCode == http.StatusSwitchingProtocols {
				e.End(time.Since(start)) // the upgraded stream is not a request in flight
				return resp, nil
			}
			resp.Body = &endBody{ReadCloser: resp.Body, e: e, start: start}
			return resp, nil
		}
		e.End(time.Since(start))
		if !isConnectError(err) {
			if isTimeout(err) {
				a.upstream = "timeout"
				if e.Failed(s.opts.FailureThreshold, s.opts.EjectFor, time.Now()) {
					s.ejected(e)
				}
			}
			return nil, err
		}
		a.upstream = "connect"
		if e.Failed(s.opts.FailureThreshold, s.opts.EjectFor, time.Now()) {
			s.ejected(e)
		}
		if !retryable || try >= s.opts.Retries || ctx.Err() != nil {
			return nil, err
		}
		if s.opts.Metrics != nil {
			s.opts.Metrics.Retries.Inc()
		}
	}
}

// skip reports an endpoint this request already tried.
func (a *attempt) skip(e *balancer.Endpoint) bool {
	for _, t := range a.tried {
		if t == e {
			return true
		}
	}
	return false
}

func (s *Server) ejected(e *balancer.Endpoint) {
	s.opts.Logger.Info("endpoint ejected by passive health check", "endpoint", e.Addr, "for", s.opts.EjectFor)
	if s.opts.Metrics != nil {
		s.opts.Metrics.Ejections.Inc()
	}
}

var errNoEndpoint = errors.New("no endpoint available")

func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// isConnectError reports a failure to connect: nothing was sent, so another endpoint may be
// tried.
func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// endBody ends the endpoint's in-flight count when the response body is done.
type endBody struct {
	io.ReadCloser
	e     *balancer.Endpoint
	start time.Time
	once  sync.Once
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.e.End(time.Since(b.start)) })
	return err
}

func (s *Server) modifyResponse(resp *http.Response) error {
	a, _ := resp.Request.Context().Value(attemptKey{}).(*attempt)
	affinityCookie(resp.Header, a)
	return nil
}

// affinityCookie adds the cookie that pins the client to the endpoint chosen, when the
// backend wants one and the endpoint was chosen by the balancer.
func affinityCookie(h http.Header, a *attempt) {
	if a != nil && a.setCookie && a.chosen != nil {
		c := &http.Cookie{Name: a.pool.backend.Balance.AffinityCookie, Value: cookieValue(a.chosen.Addr), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode}
		h.Add("Set-Cookie", c.String())
	}
}

// upstreamError is ReverseProxy's ErrorHandler.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	s.failed(w, r, a, err)
}

// failed is the one error path for backend failures: 503 when no endpoint is left, 504 on a
// timeout, else 502.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, a *attempt, err error) {
	reason := "other"
	if a != nil && a.upstream != "" {
		reason = a.upstream
	}
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, errNoEndpoint):
		code = http.StatusServiceUnavailable
	case isTimeout(err):
		code, reason = http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, context.Canceled):
		reason = "client_gone"
	}
	s.countUpstream(reason)
	ep := ""
	if a != nil && a.chosen != nil {
		ep = a.chosen.Addr
	}
	s.opts.Logger.V(1).Info("upstream error", "error", err.Error(), "endpoint", ep, "host", r.Host, "path", r.URL.Path)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code = http.StatusRequestEntityTooLarge
	}
	w.WriteHeader(code)
}

func (s *Server) countUpstream(reason string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.UpstreamErrors.WithLabelValues(reason).Inc()
	}
}

// responseWriter records the status and size for metrics and the access log. Unwrap lets
// http.ResponseController (used by ReverseProxy) reach Flush and Hijack underneath.
type responseWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *responseWriter) WriteHeader(code int) {
	if w.code == 0 || w.code < 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bufferPool lends ReverseProxy its copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte { return *(buffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) {
	if cap(b) == 32<<10 {
		buffers.Put(&b)
	}
}

// String describes the server for logs.
func (s *Server) String() string {
	t := s.Table()
	if t == nil {
		return "dataplane(no table)"
	}
	return fmt.Sprintf("dataplane(%d ingresses, %d backends)", t.Ingresses, len(t.Backends))
}
