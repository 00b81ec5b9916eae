package dataplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// The data plane's files, by job: server.go (this file: lifecycle, listeners, transports),
// handler.go (one request: normalise, route, limits, the response writer), path.go (path
// normalisation), headers.go (the header policy of both forwarding paths), upstream.go
// (endpoint choice, retries, passive health, the error path; ReverseProxy's transport),
// direct.go (the direct path, which skips ReverseProxy), h1transport.go (the HTTP/1.1
// connection pool both paths use), listener.go (client connection limits), router.go (a
// table compiled for serving), metrics.go and routemetrics.go (the metrics; per-route series
// resolved at Swap), accesslog.go (the JSON access log and its non-blocking writer), trace.go
// (W3C trace context checks).

// Server is the data plane. Create it with New, install tables with Swap, serve with Serve.
type Server struct {
	opts    Options
	current atomic.Pointer[router]
	swapMu  sync.Mutex   // one Swap at a time: refs follows current
	refs    endpointRefs // the endpoints of current's pools
	// endpointChanges: when each backend's endpoints last changed (with Metrics only).
	endpointChanges endpointChanges
	registry        *balancer.Registry
	h1              *h1Transport    // every HTTP/1.1 exchange with an endpoint
	outside         *outsideAuth    // authentication services outside the cluster (outsideauth.go)
	h2c             *http.Transport // h2c and gRPC backends
	tls             *tlsDests       // https and grpcs backends' TLS settings (and grpcs transports)
	std             *http.Transport // tests only (stdlibTransport): http.Transport for HTTP/1.1, as a reference
	direct          bool            // the direct path is on
	proxy           *httputil.ReverseProxy
	defCert         *tls.Certificate
	paths           pathPolicy
	// serverHeader is the Server response header's value, nil for none; shared by every
	// response (cap 1, so an append never writes into it).
	serverHeader []string
	// hsts is the Strict-Transport-Security value, nil when the proxy leaves the header
	// alone (Options.HSTS "-"); shared like serverHeader.
	hsts                []string
	httpPort, httpsPort string // X-Forwarded-Port
	affinityKey         []byte
	tickets             atomic.Pointer[tls.Config] // session ticket keys (sessions.go)
	limits              *limiters                  // rate limits' state, across tables
	auth                *basicAuth                 // basic authentication checks, across tables
	alog                *accessLog                 // nil: no access log
	draining            atomic.Bool                // shutdown has begun (Serve's ctx ended)
	// reencodeQueries: GODEBUG sets urlmaxqueryparams, with which ReverseProxy re-encodes
	// every query; the direct path then leaves all requests to it.
	reencodeQueries bool
}

// transports sets up the forwarding transports of s: its own HTTP/1.1 transport (h1), HTTP/2
// without TLS (h2c), HTTP/2 over TLS per destination (tls), and, for tests, the standard
// library's HTTP/1.1 (std).
func (s *Server) transports(opts Options) {
	// The h1 transport bounds each dial itself (ConnectTimeout, or the route's); http.Transport
	// (h2c backends) gets a dialer with the timeout.
	dial, dialTimed := opts.DialContext, opts.DialContext
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
		dialTimed = (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	var p1, p2 http.Protocols
	p1.SetHTTP1(true)
	p2.SetUnencryptedHTTP2(true)
	base := func(p *http.Protocols) *http.Transport {
		return &http.Transport{
			DialContext:            dialTimed,
			Protocols:              p,
			MaxIdleConns:           0, // no global cap: the per-endpoint cap bounds it
			MaxIdleConnsPerHost:    opts.MaxIdlePerEndpoint,
			IdleConnTimeout:        opts.UpstreamIdleTimeout,
			ResponseHeaderTimeout:  opts.ResponseHeaderTimeout,
			MaxResponseHeaderBytes: opts.MaxResponseHeaderBytes,
			ExpectContinueTimeout:  time.Second,
			DisableCompression:     true, // pass bodies through as the backend sent them
			WriteBufferSize:        32 << 10,
			ReadBufferSize:         32 << 10,
		}
	}
	s.h2c = base(&p2)
	var p2tls http.Protocols
	p2tls.SetHTTP2(true)
	s.tls = &tlsDests{newH2: func(conf *tls.Config) *http.Transport {
		t := base(&p2tls)
		t.TLSClientConfig = conf
		t.TLSHandshakeTimeout = opts.ConnectTimeout
		return t
	}}
	if opts.stdlibTransport {
		s.std = base(&p1)
	}
	s.direct = !opts.DisableDirectPath && !opts.stdlibTransport
	s.h1 = &h1Transport{dial: dial, connectTimeout: opts.ConnectTimeout, maxIdle: opts.MaxIdlePerEndpoint, idleTimeout: opts.UpstreamIdleTimeout,
		responseTimeout: opts.ResponseHeaderTimeout, readTimeout: opts.UpstreamReadTimeout,
		maxHeaderBytes: opts.MaxResponseHeaderBytes, max1xx: opts.Max1xxResponses,
		discarded: s.discarded, idle: map[string][]*h1Conn{}}
	s.outside = newOutsideAuth(opts, s.discarded)
}

// New returns a data plane with no table: every request gets 503 until the first Swap.
func New(opts Options) (*Server, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, registry: balancer.NewRegistry(), refs: endpointRefs{}, defCert: opts.DefaultCertificate,
		reencodeQueries: strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams"),
		paths:           pathPolicy{slashes: opts.EscapedSlashes, mergeSlashes: !opts.KeepDuplicateSlashes},
		httpPort:        strconv.Itoa(opts.PublicHTTPPort), httpsPort: strconv.Itoa(opts.PublicHTTPSPort),
		affinityKey: opts.AffinityKey,
		limits:      newLimiters(opts.RateLimitIPv6Prefix, opts.rateLimitClients),
		auth:        newBasicAuth(opts.AuthCheckSlots, opts.AuthCheckWait, opts.AuthCheckNice, opts.authCompare),
	}
	s.tickets.Store(&tls.Config{})
	if opts.authClock != nil {
		s.auth.slots.now = opts.authClock
	}
	if opts.AuthCheckNice > 0 {
		// Fail at start, not silently per check, where threads' nice values cannot be set.
		if err := probeThreadNice(opts.AuthCheckNice); err != nil {
			return nil, fmt.Errorf("password checks at nice %d (--auth-check-nice; 0 runs them at the proxy's own priority): %w", opts.AuthCheckNice, err)
		}
	}
	if opts.ServerHeader != "-" {
		s.serverHeader = []string{opts.ServerHeader}
	}
	if opts.HSTS != "-" {
		s.hsts = []string{opts.HSTS}
	}
	if opts.AccessLog != nil {
		fields, _ := parseAccessLogFields(opts.AccessLogFields) // checked by defaults
		s.alog = newAccessLog(opts.AccessLog, fields, opts.AccessLogQuery, opts.AccessLogSample, func(n int) {
			if opts.Metrics != nil {
				opts.Metrics.AccessLogDropped.Add(float64(n))
			}
		})
	}
	if m := opts.Metrics; m != nil && m.certs != nil {
		certs := func() []table.ServedCertificate {
			if r := s.current.Load(); r != nil {
				return r.table.Certificates()
			}
			return nil
		}
		m.certs.source.Store(&certs)
	}
	if m := opts.Metrics; m != nil && m.backends != nil {
		view := func() backendView {
			return backendView{r: s.current.Load(), changed: s.endpointChanges.snapshot()}
		}
		m.backends.source.Store(&view)
	}
	if len(s.affinityKey) == 0 {
		s.affinityKey = make([]byte, 32)
		if _, err := rand.Read(s.affinityKey); err != nil {
			return nil, fmt.Errorf("generate affinity cookie key: %w", err)
		}
	}
	if s.defCert == nil {
		c, err := SelfSignedCertificate("metalgate-proxy-default")
		if err != nil {
			return nil, err
		}
		s.defCert = c
	}
	s.transports(opts)
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

// rewrite builds ReverseProxy's outbound request: the header set comes from the policy
// (outboundHeaders), as the direct path's does. The endpoint is chosen later, in the round
// trip, so a retry can choose another.
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	a := pr.In.Context().Value(attemptKey{}).(*attempt)
	in, out := pr.In, pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = "endpoint.invalid" // replaced by the round trip
	out.Host = upstreamHost(in, a)
	up := out.Header.Get("Upgrade") // ReverseProxy set Connection and Upgrade for an upgrade
	h := make(http.Header, len(in.Header)+8)
	s.outboundHeaders(in, a, func(k, v string) { h[k] = append(h[k], v) })
	if up != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{up}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // Request.Write then sends none, as the direct path
	}
	out.Header = h
}

// Swap installs a new table. Requests already routed keep the old one; new requests use t.
// Backends t shares with the table in use (a table patched for an endpoint change) keep
// their pools; the endpoints no backend of t has any more are forgotten, with their pooled
// connections.
func (s *Server) Swap(t *table.Table) {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	prev := s.current.Load()
	r, added, removed := compile(t, prev, s.registry, s.affinityKey)
	if m := s.opts.Metrics; m != nil {
		s.endpointChanges.update(added, removed, time.Now())
		var ps *tableSeries
		if prev != nil {
			ps = prev.series
		}
		r.series = m.compileSeries(t, ps)
	}
	s.tls.update(r)
	s.current.Store(r)
	if dropped := s.refs.update(added, removed); len(dropped) > 0 {
		s.registry.Forget(dropped)
	}
	// Every Swap sweeps the idle connections, not only those of the dropped addresses: a
	// request routed by the old table may have put one back since the last Swap.
	// So are those made with TLS settings no backend has any more (a rotated Secret, a
	// changed annotation): they could never be taken again.
	s.h1.retain(func(tlsKey, addr string) bool { return s.refs[addr] > 0 && (tlsKey == "" || s.tls.has(tlsKey)) })
	s.outside.retain(t)
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
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			r := s.current.Load()
			if r != nil && r.table.Gateway != nil {
				// A Gateway's HTTPS listener: its own certificate for the name on the port
				// the connection came to, or no handshake (never a default certificate).
				port := localPort(hello.Conn)
				if c := r.table.GatewayHandshakeCertificate(port, hello); c != nil {
					return c, nil
				}
				s.tlsHandshake(handshakeNoCertificate)
				return nil, fmt.Errorf("%s on port %d has a certificate for server name %q", noListenerCertificate, port, hello.ServerName)
			}
			if r != nil && hello.ServerName != "" {
				if c := r.table.HandshakeCertificate(hello); c != nil {
					return c, nil
				}
			}
			return s.defCert, nil
		},
		// Called on every handshake the server accepts (client certificates are asked for
		// by the hosts that want one, and judged per request: clientauth.go); failures are
		// counted from the http.Server's error log (handshakeLog).
		VerifyConnection: func(cs tls.ConnectionState) error {
			s.tlsHandshake(handshakeOK)
			if cs.DidResume {
				s.sessionTicket(ticketResumed)
			}
			return nil
		},
	}
	s.sessionTickets(c, "")
	c.GetConfigForClient = s.clientAuthConfig(c)
	return c
}

// localPort is the local port of conn (the listener port it was accepted on), 0 when unknown.
func localPort(conn net.Conn) int32 {
	if conn == nil {
		return 0
	}
	ap, err := netip.ParseAddrPort(addrString(conn.LocalAddr()))
	if err != nil {
		return 0
	}
	return int32(ap.Port())
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
		Handler:           drainHandler{s},
		Protocols:         &p,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.ClientIdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: s.opts.HTTP2MaxConcurrentStreams,
			// A client that stops reading the connection is dropped: nothing it has asked
			// for is written for this long.
			WriteByteTimeout: s.opts.HTTP2WriteTimeout,
			// A dead peer is found by a ping when the connection has been quiet.
			SendPingTimeout: s.opts.ClientIdleTimeout / 2,
			PingTimeout:     15 * time.Second,
		},
		// A response's write deadline (SendTimeout) stays on the connection after it; the
		// server's own writes for the next request (a 400 or 431) must not inherit it.
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateIdle && s.opts.SendTimeout > 0 {
				_ = c.SetWriteDeadline(time.Time{})
			}
		},
		ErrorLog: log.New(handshakeLog{s}, "", 0),
	}
	if tls {
		srv.TLSConfig = s.TLSConfig()
	}
	return srv
}

// Serve serves plain HTTP on httpLn and HTTPS on httpsLn (either may be nil) until ctx ends,
// then shuts down gracefully:
//
//	ctx ends ─► draining (Draining true: not ready) for ShutdownDelay: the listeners still
//	            accept, every response says Connection: close (HTTP/1) or comes with a
//	            GOAWAY (HTTP/2), so clients take their next requests elsewhere
//	         ─► Shutdown: listeners close, idle connections close, requests in flight get
//	            ShutdownTimeout
//
// The delay is the time load balancers and endpoints take to stop sending new connections
// to a replica that is no longer ready; a connection refused in it would be a failed
// request (issue #25). Each listener accepts at most MaxConnections connections at once
// (and MaxConnectionsPerClient from one address).
func (s *Server) Serve(ctx context.Context, httpLn, httpsLn net.Listener) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var servers []*http.Server
	start := func(ln net.Listener, tls bool, name string, pp ProxyProtocol) {
		if ln == nil {
			return
		}
		if tls {
			// Innermost, so that it sees the socket's own writes: the handshake's flight
			// (quickack_linux.go).
			ln = quickAckListener(ln)
		}
		// The per-client cap counts the client the PROXY header names, once it is read
		// (listener.go).
		ln = s.limitListener(s.proxyProtocolListener(ln, pp), name)
		if tls && s.opts.SSLPassthrough {
			ln = s.passthroughListener(ctx, ln)
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
	start(httpLn, false, "http", s.opts.ProxyProtocolHTTP)
	start(httpsLn, true, "https", s.opts.ProxyProtocolHTTPS)
	var err error
	select {
	case <-ctx.Done():
		s.draining.Store(true)
		if d := s.opts.ShutdownDelay; d > 0 {
			s.opts.Logger.Info("shutting down: not ready, still accepting connections while load balancers drop this replica", "delay", d)
			after := time.After
			if s.opts.delayOver != nil {
				after = s.opts.delayOver
			}
			select {
			case <-after(d):
			case err = <-errs:
			}
		}
	case err = <-errs:
	}
	s.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	wg.Wait()
	s.CloseIdleConnections()
	if s.alog != nil {
		s.alog.flush()
	}
	return err
}

// Draining reports whether shutdown has begun: the proxy is not ready, and still serves.
func (s *Server) Draining() bool { return s.draining.Load() }

// drainHandler is the client-facing handler: while draining, each response asks the client
// to go: net/http closes an HTTP/1 connection after a response whose header says
// Connection: close, and turns that header on an HTTP/2 response into a GOAWAY (streams in
// flight finish). Upgrades (WebSocket) keep their own Connection header: the connection
// becomes the tunnel, which Shutdown does not cut.
type drainHandler struct{ s *Server }

func (h drainHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.s.draining.Load() && r.Header.Get("Upgrade") == "" {
		w.Header()["Connection"] = []string{"close"}
	}
	h.s.ServeHTTP(w, r)
}

// CloseIdleConnections closes the idle connections to endpoints.
func (s *Server) CloseIdleConnections() {
	s.h1.CloseIdleConnections()
	s.outside.h1.CloseIdleConnections()
	s.h2c.CloseIdleConnections()
	s.tls.closeIdle()
	if s.std != nil {
		s.std.CloseIdleConnections()
	}
}

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
