package dataplane

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

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
	session   string // the session key of balanced affinity (affinitymode.go)
	clientIP  string
	trusted   bool
	reqID     string
	https     bool // the request came over TLS
	route     *table.Route
	router    *router         // the table the request was routed by
	in        *http.Request   // the client's request, as routed (error pages read it)
	target    *table.Weighted // the backend of route's split with its own edits, or nil
	realIP    netip.Addr      // the client the policy judges (realClient), when it needs one
	release   func()          // ends the request's place under a connection limit
	authSet   http.Header     // headers an authentication service set (nil values: dropped)
	// clientCert is what the backend is told of the client's certificate (clientauth.go);
	// nil when the host has no client-certificate authentication.
	clientCert *clientCertInfo
	upstream   string // error reason when the backend failed
	// bodyErr is the client's request body's failure (malformed, too large, too slow), set
	// by the goroutine that writes the body to the backend.
	bodyErr atomic.Pointer[error]
	// body is the client's request body while it is forwarded (nil without one).
	body *clientBody
	// series is where the request is counted (routemetrics.go): its route's and backend's.
	series *routeSeries
	// traceparent and tracestate are the client's W3C trace context when valid (trace.go):
	// forwarded unchanged; "" when absent or invalid (dropped).
	traceparent, tracestate string
	// span is the request's OTLP span (spans.go) when Options.Tracer is set: started once
	// the request is routed; traceparent is then the span's, sent to the backend.
	span trace.Span
	// Upstream timing of the last exchange (metrics and the access log): connect is the
	// time to connect when it needed a new HTTP/1.1 connection (0: reused, or another
	// transport), firstByte the time to its response headers, total (nanoseconds) to the
	// end of its body, set when the body is closed; upStatus is its status code.
	connect, firstByte time.Duration
	total              atomic.Int64
	upStatus           int
}

// bytesIn is how much of the client's request body was read.
func (a *attempt) bytesIn() int64 {
	if a.body == nil {
		return 0
	}
	return a.body.n.Load()
}

// upstreamTotal is the time from sending the request to the end of the response body (to
// the response headers for an upgrade, or a body not closed yet).
func (a *attempt) upstreamTotal() time.Duration {
	if d := time.Duration(a.total.Load()); d > 0 {
		return d
	}
	return a.firstByte
}

type attemptKey struct{}

// upstream is the round trip to an endpoint for ReverseProxy: pick (affinity, then the
// balancer), dial, and on a connection failure count it (passive health) and retry another
// endpoint when safe.
type upstream Server

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	s := (*Server)(u)
	a := req.Context().Value(attemptKey{}).(*attempt)
	var rt http.RoundTripper = s.h1
	scheme := "http"
	switch {
	case a.pool.backend.Protocol == table.ProtocolH2C:
		rt = s.h2c
	case a.pool.backend.Protocol == table.ProtocolGRPCS:
		if a.pool.tls == nil || a.pool.tls.refuse != nil {
			return nil, s.tlsRefused(a)
		}
		rt, scheme = a.pool.tls.h2, "https"
	case s.std != nil && a.pool.tls == nil:
		rt = s.std
	}
	std := rt != http.RoundTripper(s.h1)
	if std {
		req = req.WithContext(s.limit1xx(req.Context()))
	}
	replayable := (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == ""
	resp, err := s.send(req.Context(), a, replayable, isIdempotent(req.Method), func(e *balancer.Endpoint, try int) (*http.Response, error) {
		out := req
		if try > 0 {
			out = req.Clone(req.Context())
		}
		out.URL.Host, out.URL.Scheme = e.Addr, scheme
		return rt.RoundTrip(out)
	})
	if err == nil && std && resp.StatusCode != http.StatusSwitchingProtocols && s.opts.UpstreamReadTimeout > 0 {
		resp.Body = newIdleBody(resp.Body, s.opts.UpstreamReadTimeout, func() { s.limitHit(limitUpstreamRead) })
	}
	return resp, err
}

// send makes the attempts of one request: it picks the endpoint (affinity, then the
// balancer), calls exchange with it, counts the outcome (passive health), and passes the
// request on to another endpoint as the route's retry policy says (nextupstream.go):
// replayable says the request has no body and no upgrade, idempotent its method. A
// successful response's body ends the endpoint's in-flight count when closed.
func (s *Server) send(ctx context.Context, a *attempt, replayable, idempotent bool, exchange func(e *balancer.Endpoint, try int) (*http.Response, error)) (*http.Response, error) {
	policy := s.nextPolicyOf(a, time.Now())
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
			if a.pool.ring == nil { // a balanced session keeps its key
				a.setCookie = a.pool.backend.Balance.AffinityCookie != ""
			}
		}
		a.tried = append(a.tried, e)
		a.chosen = e
		a.connect = 0
		start := time.Now()
		e.Start()
		resp, err := exchange(e, try)
		if err == nil {
			e.Succeeded()
			a.firstByte, a.upStatus = time.Since(start), resp.StatusCode
			if resp.StatusCode == http.StatusSwitchingProtocols {
				e.End(a.firstByte) // the upgraded stream is not a request in flight
				return resp, nil
			}
			if policy.afterStatus(resp.StatusCode, replayable, idempotent) && policy.again(ctx, a, try) {
				discard(resp)
				e.End(time.Since(start))
				s.retried(retryStatusReason(resp.StatusCode))
				continue
			}
			resp.Body = &endBody{ReadCloser: resp.Body, e: e, start: start, total: &a.total}
			return resp, nil
		}
		e.End(time.Since(start))
		switch {
		case isConnectError(err):
			a.upstream = "connect"
		case isTimeout(err):
			a.upstream = "timeout"
		}
		if isConnectError(err) || isTimeout(err) {
			if e.Failed(s.opts.FailureThreshold, s.opts.EjectFor, time.Now()) {
				s.ejected(e)
			}
		}
		if !policy.afterError(err, replayable, idempotent) || !policy.again(ctx, a, try) {
			if isConnectError(err) && policy.legacy && replayable && ctx.Err() == nil && len(a.tried) >= len(a.pool.eps) && try < s.opts.Retries {
				// Every endpoint refused a connection: none is left to serve (503).
				a.upstream = "no_endpoints"
				return nil, errNoEndpoint
			}
			return nil, err
		}
		s.retried(retryErrorReason(err))
	}
}

// retried counts an attempt after the first, by why the one before failed.
func (s *Server) retried(reason string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.Retries.WithLabelValues(reason).Inc()
	}
}

// retryErrorReason is the retries' reason label for a failed exchange.
func retryErrorReason(err error) string {
	switch {
	case isConnectError(err):
		return "connect"
	case isTimeout(err):
		return "timeout"
	case invalidHeader(err):
		return "invalid_header"
	}
	return "error"
}

// retryStatusReason is the label for a status proxy-next-upstream passed on: one of the
// few codes it can list (table.NextUpstream), so the label set stays bounded.
func retryStatusReason(code int) string {
	switch code {
	case 403, 404, 429, 500, 502, 503, 504:
		return "http_" + strconv.Itoa(code)
	}
	return "http_other"
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

// tlsRefused is the error of a request to a backend whose TLS settings cannot be used.
func (s *Server) tlsRefused(a *attempt) error {
	if a.pool.tls != nil && a.pool.tls.refuse != nil {
		return a.pool.tls.refuse
	}
	return errBackendTLSRefused
}

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

// endBody ends the endpoint's in-flight count when the response body is done, and records
// the exchange's total time in total.
type endBody struct {
	io.ReadCloser
	e     *balancer.Endpoint
	start time.Time
	total *atomic.Int64
	once  sync.Once
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		d := time.Since(b.start)
		b.total.Store(int64(d))
		b.e.End(d)
	})
	return err
}

// modifyResponse is ReverseProxy's hook; ReverseProxy has removed hop-by-hop headers
// already, responseHeaders does the rest of the policy.
func (s *Server) modifyResponse(resp *http.Response) error {
	a, _ := resp.Request.Context().Value(attemptKey{}).(*attempt)
	if p := s.pageFor(a, resp.StatusCode); p != nil {
		return &intercepted{code: resp.StatusCode, p: p} // errorpages.go
	}
	s.responseHeaders(resp.Header, resp.StatusCode, a, resp.Request.Header.Get("Origin"))
	return nil
}

// affinityCookie adds the cookie that pins the client to the endpoint chosen, when the
// backend wants one and the endpoint was chosen by the balancer.
// Its attributes are the backend's (session-cookie-*): Secure when asked, or when the request
// came over HTTPS (the connection decides, not a client's header), so a cookie that names an
// endpoint is never sent back in clear once it was set over TLS.
func affinityCookie(h http.Header, a *attempt) {
	if a != nil && a.setCookie && a.chosen != nil {
		p := a.pool
		at := &p.backend.Balance.AffinityCookieAttrs
		c := &http.Cookie{Name: p.backend.Balance.AffinityCookie, Value: a.affinityValue(), Path: at.Path, HttpOnly: true,
			Secure: at.Secure || a.https, MaxAge: int(at.MaxAge)}
		if c.Path == "" {
			c.Path = "/"
		}
		switch at.SameSite {
		case table.SameSiteStrict:
			c.SameSite = http.SameSiteStrictMode
		case table.SameSiteNone:
			c.SameSite = http.SameSiteNoneMode // Secure too: the parser sets it with None
		default:
			c.SameSite = http.SameSiteLaxMode
		}
		if at.Expires > 0 {
			c.Expires = time.Now().Add(time.Duration(at.Expires) * time.Second)
		}
		h.Add("Set-Cookie", c.String())
	}
}

// upstreamError is ReverseProxy's ErrorHandler.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	s.failed(w, r, a, err)
}

// failed is the one error path for failed requests: the client's own body first (413 too
// large, 408 too slow, 400 malformed), then the backend's: 503 when no endpoint is left,
// 504 on a timeout, else 502.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, a *attempt, err error) {
	if ie, ok := interceptedError(err); ok {
		s.errorPage(w, r, a, ie.code, ie.p)
		return
	}
	reason := "other"
	if a != nil && a.upstream != "" {
		reason = a.upstream
	}
	code := http.StatusBadGateway
	var mbe *http.MaxBytesError
	if a != nil && a.body != nil && a.bodyErr.Load() == nil && errors.Is(r.Context().Err(), context.Canceled) {
		// The server cancels the request's context when a read of the client's connection
		// fails, before that read's error reaches the body's reader: the round trip can end
		// on the cancellation first. Let the read in flight record its error, so a stalled
		// or broken body is still answered as the client's fault.
		a.body.settle(time.Second)
	}
	switch {
	case a != nil && a.bodyErr.Load() != nil:
		err = *a.bodyErr.Load()
		code, reason = http.StatusBadRequest, "client_body"
		if errors.As(err, &mbe) {
			code = http.StatusRequestEntityTooLarge
		} else if isTimeout(err) {
			code = http.StatusRequestTimeout
		}
	case errors.Is(err, errNoEndpoint):
		code = http.StatusServiceUnavailable
	case errors.Is(err, errBackendTLSRefused):
		reason = "tls_settings"
	case isTimeout(err):
		code, reason = http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, errBackendTLS):
		reason = "tls"
	case errors.Is(err, context.Canceled):
		reason = "client_gone"
	case errors.Is(err, errResponseHeadersTooLarge):
		reason = "response_headers_too_large"
		s.limitHit(limitUpstreamHeaderBytes)
	case errors.Is(err, errTooMany1xx):
		reason = "too_many_1xx"
		s.limitHit(limitUpstream1xx)
	}
	s.countUpstream(reason)
	ep := ""
	if a != nil && a.chosen != nil {
		ep = a.chosen.Addr
	}
	s.opts.Logger.V(1).Info("request failed", "error", err.Error(), "endpoint", ep, "host", r.Host, "path", r.URL.Path, "status", code)
	if code == http.StatusBadRequest || code == http.StatusRequestTimeout || code == http.StatusRequestEntityTooLarge {
		w.Header().Set("Connection", "close") // the rest of the client's body is unknown
	} else if p := s.pageFor(a, code); p != nil {
		s.errorPage(w, r, a, code, p)
		return
	}
	w.WriteHeader(code)
}

func (s *Server) countUpstream(reason string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.UpstreamErrors.WithLabelValues(reason).Inc()
	}
}

// traceGot1xx adapts the client trace's Got1xxResponse in ctx (ReverseProxy installs one
// that forwards 1xx responses to the client) to the h1 transport's callback.
func traceGot1xx(ctx context.Context) func(int, http.Header) error {
	tr := httptrace.ContextClientTrace(ctx)
	if tr == nil || tr.Got1xxResponse == nil {
		return nil
	}
	return func(code int, h http.Header) error {
		removeHopByHop(h)
		return tr.Got1xxResponse(code, textproto.MIMEHeader(h))
	}
}

// limit1xx bounds the 1xx responses http.Transport (h2c backends) passes to ReverseProxy,
// and removes their hop-by-hop headers before ReverseProxy forwards them. The transport
// limits each response head to MaxResponseHeaderBytes but, once a trace takes 1xx responses,
// neither counts them nor adds up their size; the h1 transport does both, and so does this. The trace ReverseProxy put in ctx is replaced (httptrace's own composition ignores
// an earlier hook's error, so it cannot stop the transport).
func (s *Server) limit1xx(ctx context.Context) context.Context {
	old := httptrace.ContextClientTrace(ctx)
	if old == nil || old.Got1xxResponse == nil {
		return ctx
	}
	tr := *old
	n, size := 0, int64(0)
	tr.Got1xxResponse = func(code int, h textproto.MIMEHeader) error {
		n++
		for k, vv := range h {
			for _, v := range vv {
				size += int64(len(k) + len(v) + 4)
			}
		}
		if n > s.opts.Max1xxResponses {
			return errTooMany1xx
		}
		if size > s.opts.MaxResponseHeaderBytes {
			return errResponseHeadersTooLarge
		}
		removeHopByHop(http.Header(h)) // as the direct path does
		return old.Got1xxResponse(code, h)
	}
	return traceContext{Context: ctx, trace: &tr}
}

// traceContext answers with its own client trace where its parent has one.
type traceContext struct {
	context.Context
	trace *httptrace.ClientTrace
}

func (c traceContext) Value(key any) any {
	v := c.Context.Value(key)
	if _, ok := v.(*httptrace.ClientTrace); ok {
		return c.trace
	}
	return v
}

// idleBody closes a response body when no read has returned for timeout: a backend that
// stops sending half-way does not hold the client and the connection forever.
type idleBody struct {
	io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
}

func newIdleBody(rc io.ReadCloser, timeout time.Duration, fired func()) *idleBody {
	b := &idleBody{ReadCloser: rc, timeout: timeout}
	b.timer = time.AfterFunc(timeout, func() {
		fired()
		_ = rc.Close()
	})
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil {
		b.timer.Reset(b.timeout)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}
