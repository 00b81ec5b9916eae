package dataplane

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &state{rw: responseWriter{ResponseWriter: w, s: s}} // one allocation for both
	rw := &st.rw
	s.serve(rw, r, &st.a)
	if st.a.body != nil {
		st.a.body.finish()
	}
	if st.a.release != nil {
		st.a.release()
	}
	if rw.code == 0 {
		rw.code = http.StatusOK
	}
	elapsed := time.Since(start)
	if m := s.opts.Metrics; m != nil {
		s.observe(m, r, &st.a, rw, elapsed)
	}
	if s.alog != nil && s.alog.sampled() {
		s.logRequest(start, elapsed, r, &st.a, rw)
	}
	if st.a.span != nil {
		s.endSpan(&st.a, rw)
	}
}

// observe records one request in the metrics of its route (series, set once the route and
// backend were chosen), or of no route.
func (s *Server) observe(m *Metrics, r *http.Request, a *attempt, rw *responseWriter, elapsed time.Duration) {
	rs := a.series
	if rs == nil {
		rs = m.unrouted
	}
	rs.request(r.Method, rw.code)
	rs.duration.Observe(elapsed.Seconds())
	rs.requestSize.Observe(float64(a.bytesIn()))
	rs.responseSize.Observe(float64(rw.bytes))
	if a.chosen == nil {
		return
	}
	if a.connect > 0 {
		rs.upstreamConnect.Observe(a.connect.Seconds())
	}
	if a.firstByte > 0 {
		rs.upstreamFirstByte.Observe(a.firstByte.Seconds())
	}
	if d := a.upstreamTotal(); d > 0 {
		rs.upstreamTotal.Observe(d.Seconds())
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
	if err := s.normalize(r); err != nil {
		s.limitHit(limitPathRejected)
		http.Error(w, "bad request path: "+err.Error(), http.StatusBadRequest)
		return
	}
	if r.TLS != nil && !s.sameCertificate(rt.table, r, r.TLS.ServerName, r.Host) {
		// RFC 9110 §15.5.20: the connection's certificate is not the host's, so this
		// connection must not serve it (HTTP/2 coalescing, or a client that sent another SNI).
		s.limitHit(limitMisdirected)
		http.Error(w, "misdirected request: the TLS server name's certificate does not cover this host", http.StatusMisdirectedRequest)
		return
	}
	route := lookup(rt.table, r)
	if route == nil {
		s.noRoute(w, r, rt) // errorpages.go
		return
	}
	a.route, a.router, a.in = route, rt, r
	w.hsts = hstsFor(r, route)
	a.https = r.TLS != nil
	if m := s.opts.Metrics; m != nil {
		a.series = m.seriesFor(rt.series, route, route.Backend)
	}
	a.traceparent, a.tracestate = w3cTrace(r.Header)
	a.clientIP, a.trusted = s.client(r)
	if s.opts.Tracer != nil {
		s.startSpan(r, a)
	}
	if p := &route.Options.Policy; len(p.Allow) > 0 || len(p.Deny) > 0 || p.RateLimit != nil {
		a.realIP = s.realClient(r, a)
	}
	if !s.clientAuth(w, r, rt.table, route, a) || s.answer(w, r, route, a) {
		return
	}
	if err := s.paths.rewritePath(r, route); err != nil {
		s.limitHit(limitPathRejected)
		http.Error(w, "bad request path: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !s.limitBody(w, r, route, a) {
		return
	}
	if d := route.Options.Policy.RequestTimeout; d > 0 && r.Header.Get("Upgrade") == "" {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
	}
	be := route.Backend
	if len(route.Split) > 0 {
		w := pickWeighted(route.Split)
		be = w.Backend
		if w.Edits {
			a.target = w
		}
	} else if c := route.Canary; c != nil && canaryChosen(r, &c.CanaryRule) {
		be = c.Backend
	}
	if m := s.opts.Metrics; m != nil && be != route.Backend {
		a.series = m.seriesFor(rt.series, route, be)
	}
	if be.Unresolved {
		// An HTTPRoute backendRef that names nothing usable (the route's ResolvedRefs says
		// why): Gateway API answers 500.
		s.countUpstream("unresolved_backend")
		s.answerError(w, r, a, http.StatusInternalServerError, "the route's backend reference does not resolve")
		return
	}
	p := rt.pools[be]
	if p == nil || len(p.eps) == 0 {
		s.countUpstream("no_endpoints")
		s.answerError(w, r, a, http.StatusServiceUnavailable, "no endpoints available for this backend")
		return
	}
	a.pool = p
	a.tried = a.triedBuf[:0]
	a.reqID = r.Header.Get("X-Request-Id")
	if a.reqID == "" || !a.trusted && !validRequestID(a.reqID) {
		a.reqID = newRequestID()
	}
	w.reqID = a.reqID
	if ms := route.Options.Policy.Mirrors; len(ms) > 0 {
		s.mirror(rt, r, a, ms)
	}
	balanceBy(r, p, a)
	if s.takesDirectPath(r, p) {
		s.forwardDirect(w, r, a)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "h2c") {
		// An h2c upgrade through the proxy would be a tunnel to the backend in which the
		// client sends any request it likes, past routing ("h2c smuggling"): forward the
		// request without the upgrade.
		r.Header.Del("Upgrade")
	}
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), attemptKey{}, a)))
}

// limitBody applies the route's body limit (else, for an Ingress route, the server's Ingress
// default, else the server's): a request that declares a larger body is answered 413 and
// limitBody returns false; any other body is wrapped so that reading past the limit fails
// (413 too) and a stalled client is noticed (clientBody).
func (s *Server) limitBody(w *responseWriter, r *http.Request, route *table.Route, a *attempt) bool {
	limit := route.Options.MaxBodyBytes
	if limit == 0 && !route.Source.IsGateway() {
		limit = s.opts.IngressMaxBodyBytes
	}
	if limit == 0 {
		limit = s.opts.MaxBodyBytes
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	if limit > 0 && r.ContentLength > limit {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return false
	}
	body := r.Body
	if limit > 0 {
		body = http.MaxBytesReader(w, body, limit)
	}
	a.body = &clientBody{ReadCloser: body, a: a, rc: http.NewResponseController(w), timeout: s.opts.ClientBodyTimeout, s: s,
		reading: make(chan struct{}, 1)}
	r.Body = a.body
	return true
}

// balanceBy sets what the balancer of p hashes for r (a.key: a header, a cookie or the
// client address) and the endpoint an affinity cookie pins (a.pinned).
func balanceBy(r *http.Request, p *pool, a *attempt) {
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
		affinity(r, p, a) // affinitymode.go
	}
}

// normalize rewrites r's path to its normalised form (path.go), which routing and both
// forwarding paths then use.
func (s *Server) normalize(r *http.Request) error {
	raw := r.URL.EscapedPath()
	norm, changed, err := s.paths.normalizePath(raw)
	if err != nil || !changed {
		return err
	}
	p, err := url.PathUnescape(norm)
	if err != nil {
		return errBadEscape
	}
	r.URL.Path, r.URL.RawPath = p, norm
	return nil
}

// sameCertificate reports whether the certificate served for the TLS server name sni is the
// one host would get: a request may use a connection only if it was made for its host.
func (s *Server) sameCertificate(t *table.Table, r *http.Request, sni, host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(strings.TrimSuffix(sni, "."), strings.TrimSuffix(host, ".")) {
		return true
	}
	if t.Gateway != nil {
		// A Gateway's listeners each have their own certificate: the host must be one the
		// handshake's listener covers with that same certificate.
		a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		ap, err := netip.ParseAddrPort(addrString(a))
		if err != nil {
			return false
		}
		c := t.GatewayCertificate(int32(ap.Port()), host)
		return c != nil && c == t.GatewayCertificate(int32(ap.Port()), sni)
	}
	return s.certificate(t, sni) == s.certificate(t, host)
}

func (s *Server) certificate(t *table.Table, name string) any {
	if name != "" {
		if c := t.Certificate(name); c != nil {
			return c
		}
	}
	return s.defCert
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

// clientBody is a request body on its way to the backend. Each read must return within
// timeout (a client that stalls its body does not hold a backend connection); a failed read
// (malformed chunked coding, too large, too slow) is kept in the attempt, so that the error
// path answers for the client's fault, not the backend's.
//
// A transport may go on reading (and closing) the body from its own goroutine after the
// handler has returned — the HTTP/2 transport does when the backend answers before the body
// is sent. The response writer is the server's again by then (HTTP/2 recycles its state for
// other streams), so once the handler calls finish, the deadline is never touched again.
type clientBody struct {
	io.ReadCloser
	a       *attempt
	rc      *http.ResponseController
	timeout time.Duration
	s       *Server
	// reading holds a token while a Read is in flight (settle waits for it).
	reading chan struct{}

	n     atomic.Int64 // bytes read
	mu    sync.Mutex
	armed bool // a read deadline is set
	done  bool // the handler has returned: rc is not ours any more
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.reading <- struct{}{}
	defer func() { <-b.reading }()
	if b.timeout > 0 {
		b.mu.Lock()
		if !b.done {
			_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
			b.armed = true
		}
		b.mu.Unlock()
	}
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil {
		b.disarm()
		// Counted before it is published: whoever answers for it sees the count (one
		// goroutine reads a body, so the first error is counted once).
		if err != io.EOF && b.a.bodyErr.Load() == nil {
			if isTimeout(err) {
				b.s.limitHit(limitClientBody)
			}
			b.a.bodyErr.CompareAndSwap(nil, &err)
		}
	}
	return n, err
}

// settle waits, at most limit, for a Read in flight to return (and record its error).
func (b *clientBody) settle(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case b.reading <- struct{}{}:
		<-b.reading
	case <-t.C:
	}
}

func (b *clientBody) Close() error {
	b.disarm()
	return b.ReadCloser.Close()
}

// disarm clears the read deadline: the server's own read of the next request (or its check
// for a closed connection) must not inherit it.
func (b *clientBody) disarm() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.disarmLocked()
}

func (b *clientBody) disarmLocked() {
	if b.armed && !b.done {
		b.armed = false
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// finish is called as the handler returns: the deadline is cleared, and never set again.
func (b *clientBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.disarmLocked()
	b.done = true
}

// responseWriter records the status and size for metrics and the access log, puts this
// hop's Server and X-Request-Id headers on every final response (and no sniffed
// Content-Type), Strict-Transport-Security as hsts.go decides, and bounds each write to a slow client by SendTimeout. Unwrap lets http.ResponseController (used by ReverseProxy)
// reach Flush and Hijack underneath.
type responseWriter struct {
	http.ResponseWriter
	s        *Server
	code     int
	bytes    int64
	reqID    string
	hsts     hstsMode  // what happens to Strict-Transport-Security (hsts.go)
	deadline time.Time // of the current write; renewed when half of SendTimeout is gone
	timedOut bool      // counted once
}

func (w *responseWriter) WriteHeader(code int) {
	if w.s.hsts != nil {
		w.s.applyHSTS(w.ResponseWriter.Header(), code, w.hsts)
	}
	if code >= 200 {
		h := w.ResponseWriter.Header()
		if w.s.serverHeader != nil {
			h["Server"] = w.s.serverHeader
		}
		if w.reqID != "" {
			h["X-Request-Id"] = []string{w.reqID}
		}
		if _, ok := h["Content-Type"]; !ok {
			// A present, empty Content-Type stops net/http from sniffing one: the client
			// gets the backend's headers, not a type the backend did not send. (Through
			// ReverseProxy it depended on timing whether the sniff ran.)
			h["Content-Type"] = nil
		}
		w.arm()
	}
	if w.code == 0 || w.code < 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	} else {
		w.arm()
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	if err != nil {
		w.writeFailed()
	}
	return n, err
}

// writeFailed counts a failed write as a send timeout when the deadline has passed (the
// error may be the deadline's own, or a later one on the broken connection).
func (w *responseWriter) writeFailed() {
	if !w.timedOut && !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
		w.timedOut = true
		w.s.limitHit(limitSendTimeout)
	}
}

// arm moves the write deadline to SendTimeout from now when less than half of it is left.
func (w *responseWriter) arm() {
	d := w.s.opts.SendTimeout
	if d <= 0 {
		return
	}
	now := time.Now()
	if w.deadline.Sub(now) < d/2 {
		w.deadline = now.Add(d)
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(w.deadline)
	}
}

func (w *responseWriter) Flush() {
	w.arm()
	if err := http.NewResponseController(w.ResponseWriter).Flush(); err != nil {
		w.writeFailed()
	}
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lookup finds a request's route. An Ingress table routes by host and path; a Gateway table
// (Table.Gateway set, `metalgate proxy --gateway`) by the listener port the connection arrived
// on and the whole request (Table.Match): the proxy listens on the listener ports themselves.
func lookup(t *table.Table, r *http.Request) *table.Route {
	if t.Gateway == nil {
		return t.Lookup(r.Host, r.URL.Path)
	}
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	ap, err := netip.ParseAddrPort(addrString(a))
	if err != nil {
		return nil
	}
	return t.Match(int32(ap.Port()), r)
}

// addrString is a's address, "" for none.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
