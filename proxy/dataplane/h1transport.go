package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// h1Transport is the pool of HTTP/1.1 connections to endpoints, for both forwarding paths
// (the direct path, and ReverseProxy's round trips). It reads each response on the calling
// goroutine, and writes a request body from a goroutine of its own while the response is
// read (a backend may answer before it has read the body).
//
// Why not http.Transport: it puts a connection back in its pool as soon as a response
// without a body (HEAD, 204, 304) has been read, and only then looks for bytes left behind;
// a request that takes the connection in between reads them as its response. A hostile
// backend then answers one client's request with another's (TestHostileBackend found this
// with Go 1.26 under load). Here a connection goes back to the pool only when the response
// was complete by its framing and nothing else came with it (invariant 8: a response reaches
// only the client that asked for it). Anything else closes it:
//   - a body not read to its end (client gone, copy failed, a body cut by the backend);
//   - bytes buffered past the response: a HEAD or 204/304 answered with a body, a
//     Content-Length shorter than what was sent, data after a chunked body's last chunk;
//   - bytes that arrive on the connection while it is idle (looked for without reading when
//     it is taken from the pool);
//   - a response without a length (read to EOF), Connection: close, HTTP/1.0 without
//     keep-alive, a 101 or any other final status below 200;
//   - a request body not written whole, or a request canceled while in flight.
//
// Limits: the response head (1xx responses included, together) is read with at most
// maxHeaderBytes from the socket; at most max1xx informational responses; the head must come
// within responseTimeout, and each read of the body within readTimeout of the previous one.
type h1Transport struct {
	dial            func(ctx context.Context, network, addr string) (net.Conn, error)
	connectTimeout  time.Duration
	maxIdle         int
	idleTimeout     time.Duration
	responseTimeout time.Duration
	readTimeout     time.Duration
	maxHeaderBytes  int64
	max1xx          int
	// discarded counts a connection closed for a reason that points at a broken backend.
	discarded func(reason string)

	mu   sync.Mutex
	idle map[string][]*h1Conn
}

// Reasons a connection is discarded instead of pooled, for metrics.
const (
	discardUnreadBytes = "unread_bytes"      // bytes buffered past the response
	discardUnsolicited = "unsolicited_bytes" // bytes sent while the connection was idle
	discardIncomplete  = "incomplete"        // the body was not read to its end
)

var (
	errResponseHeadersTooLarge = errors.New("backend response headers too large")
	errTooMany1xx              = errors.New("backend sent too many 1xx responses")
	errHeaderLimit             = errors.New("read limit for response headers reached")
)

// h1Conn is one pooled connection. Its reader side is limited while a response head is read
// (limit), so a backend cannot make the proxy buffer an unbounded header.
type h1Conn struct {
	conn      net.Conn
	tls       *tls.Conn  // conn, when the backend speaks TLS
	idle      *idleCheck // nil when the connection has no file descriptor
	addr      string
	key       string // of the idle list it goes back to: addr, or the TLS settings' and addr
	limit     int64
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	// sendTimeout bounds each write of the current request (the route's proxy-send-timeout);
	// 0: none.
	sendTimeout time.Duration
}

// write is the writer under bw: with a send timeout, each write must finish within it.
func (c *h1Conn) write(p []byte) (int, error) {
	if c.sendTimeout > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.sendTimeout))
	}
	return c.conn.Write(p)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (c *h1Conn) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		return 0, errHeaderLimit
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.conn.Read(p)
	c.limit -= int64(n)
	return n, err
}

// directEligible reports whether req is one the direct path may carry: idempotent, without
// a body, not an Upgrade, not Expect: 100-continue. A stale pooled connection may be
// retried for such a request. A client's Connection: close (or HTTP/1.0 without keep-alive)
// is no reason to leave the direct path: it is about the client's connection, which the
// server closes after the response on either path; the backend never sees it (hop-by-hop).
func directEligible(req *http.Request) bool {
	return !hasBody(req) && isIdempotent(req.Method) && req.Header.Get("Upgrade") == "" && req.Header.Get("Expect") == "" &&
		req.Trailer == nil
}

func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0
}

// poolKey files connections by endpoint and, for TLS, by the settings they were made with:
// a connection is never shared between backends that verify or authenticate differently.
func poolKey(addr string, td *tlsDest) string {
	if td == nil {
		return addr
	}
	return td.key + "\x00" + addr
}

// splitPoolKey is the TLS settings' key ("" for plain connections) and the endpoint of a
// poolKey.
func splitPoolKey(key string) (tlsKey, addr string) {
	if i := strings.LastIndexByte(key, 0); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

func (t *h1Transport) get(ctx context.Context, addr string, td *tlsDest, connect time.Duration, took *time.Duration) (*h1Conn, bool, error) {
	if td != nil && td.refuse != nil {
		return nil, false, td.refuse
	}
	key := poolKey(addr, td)
	now := time.Now()
	t.mu.Lock()
	for {
		list := t.idle[key]
		if len(list) == 0 {
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		if now.Sub(c.idleSince) >= t.idleTimeout {
			c.conn.Close()
			continue
		}
		t.mu.Unlock()
		switch c.idle.state() {
		case idleOK:
			return c, true, nil
		case idleUnsolicited:
			t.discarded(discardUnsolicited)
		}
		c.conn.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	if connect <= 0 {
		connect = t.connectTimeout
	}
	dctx := ctx
	if connect > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, connect)
		defer cancel()
	}
	dialed := time.Now()
	nc, err := t.dial(dctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &h1Conn{conn: nc, addr: addr, key: key}
	// The idle check looks at the socket (under TLS too: any record arriving while the
	// connection is idle disqualifies it).
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.idle = newIdleCheck(raw)
		}
	}
	if td != nil && td.conf != nil { // a tlsDest without conf only keys the pool (outsideauth.go)
		if c.tls, err = handshake(dctx, nc, td, addr); err != nil {
			return nil, false, err
		}
		c.conn = c.tls
	}
	if took != nil {
		*took = time.Since(dialed)
	}
	c.br = bufio.NewReaderSize(c, 16<<10)
	c.bw = bufio.NewWriterSize(writerFunc(c.write), 8<<10)
	return c, false, nil
}

func (t *h1Transport) put(c *h1Conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) < t.maxIdle {
		t.idle[c.key] = append(t.idle[c.key], c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.conn.Close()
}

// retain closes the idle connections keep refuses (by the TLS settings they were made with,
// "" for plain ones, and their endpoint).
func (t *h1Transport) retain(keep func(tlsKey, addr string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, list := range t.idle {
		if keep(splitPoolKey(key)) {
			continue
		}
		for _, c := range list {
			c.conn.Close()
		}
		delete(t.idle, key)
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *h1Transport) CloseIdleConnections() { t.retain(func(string, string) bool { return false }) }

// RoundTrip serves ReverseProxy: the request is written by req.Write, and 1xx responses go
// to the client trace in req's context (ReverseProxy's, which forwards them). A 101 answer
// to an Upgrade request has the connection as its body (an io.ReadWriteCloser, as
// ReverseProxy wants).
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var tm table.Timeouts
	var td *tlsDest
	var connect *time.Duration
	if a, ok := req.Context().Value(attemptKey{}).(*attempt); ok {
		if a.route != nil {
			tm = a.route.Options.Policy.Timeouts
		}
		td = a.pool.tls
		connect = &a.connect
	}
	return t.do(req.Context(), req.URL.Host, td, req, nil, traceGot1xx(req.Context()), tm, connect)
}

// do sends a request to addr over a pooled connection and reads the response. The request
// head is written by head (a request without a body), or the request by req.Write when head
// is nil; req gives the method for reading the response (HEAD has no body). got1xx, when
// set, receives each informational response (not 101) before the final one; an error from
// it fails the request. tm overrides the transport's timeouts for this request where set.
// connect, when set, receives the time a new connection took to connect (0: a pooled one).
func (t *h1Transport) do(ctx context.Context, addr string, td *tlsDest, req *http.Request, head func(*bufio.Writer) error,
	got1xx func(code int, h http.Header) error, tm table.Timeouts, connect *time.Duration) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx, addr, td, tm.Connect, connect)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		c.sendTimeout = tm.Send
		resp, sent, err := t.exchange(ctx, c, req, head, got1xx, tm.Read)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
		// A pooled connection the backend closed while idle fails before any response
		// byte: a request without a body that may be repeated is safe to send once more,
		// on a new connection.
		if reused && attempt == 0 && !sent && ctx.Err() == nil && staleConnError(err) && directEligible(req) {
			continue
		}
		if head != nil || !hasBody(req) {
			closeBody(req) // else the body's writer closes it (Request.Write does, always)
		}
		return nil, err
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// exchange writes the request on c and reads the response head. sent reports whether any
// response byte (a 1xx included) had come back when it failed. It is one function because
// it is one state machine over one connection (cancel watch, write, 1xx loop, head limits,
// framing checks) whose error paths share the deferred cleanup; hack/mutations.py pins
// several of its lines.
func (t *h1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request, head func(*bufio.Writer) error,
	got1xx func(int, http.Header) error, read time.Duration) (resp *http.Response, sent bool, err error) {
	// A cancel closes the connection: whatever is in progress (write, head, body) ends at
	// once, and the connection is never pooled (the body's finish sees stop fail).
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer func() {
		if err != nil {
			stop()
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
		}
	}()
	headTimeout, bodyTimeout := t.responseTimeout, t.readTimeout
	if read > 0 { // the route's proxy-read-timeout: for the head and each read of the body
		headTimeout, bodyTimeout = read, read
	}
	var deadline time.Time
	if headTimeout > 0 {
		deadline = time.Now().Add(headTimeout)
	}
	if c.sendTimeout <= 0 {
		_ = c.conn.SetWriteDeadline(time.Time{}) // a pooled connection may keep an earlier one
	}
	// The response timeout bounds the wait for the response head, a read: the request head
	// goes into the socket buffer (a write blocked on a full one ends when ctx does).
	_ = c.conn.SetReadDeadline(deadline)
	var wrote chan error
	switch {
	case head != nil:
		err = head(c.bw)
	case hasBody(req):
		// The body goes out while the response is read. A body that cannot be written
		// whole (the client's failed, the backend closed) closes the connection, so the
		// read below does not wait for an answer to half a request.
		wrote = make(chan error, 1)
		go func() {
			err := req.Write(c.bw)
			if err == nil {
				err = c.bw.Flush()
			}
			if err != nil {
				c.conn.Close()
			}
			wrote <- err
		}()
	default:
		err = req.Write(c.bw)
	}
	if err != nil {
		return nil, false, err
	}
	if wrote == nil {
		if err := c.bw.Flush(); err != nil {
			return nil, false, err
		}
	}
	c.limit = t.maxHeaderBytes
	for n1xx := 0; ; {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			if c.limit <= 0 {
				err = errResponseHeadersTooLarge
			} else if wrote != nil {
				// The request body's error says more than the read that it cut short.
				select {
				case werr := <-wrote:
					if werr != nil {
						err = werr
					}
				default:
				}
			}
			return nil, n1xx > 0, err
		}
		code := resp.StatusCode
		if code < 100 || code >= 200 || code == http.StatusSwitchingProtocols {
			break
		}
		// 1xx informational (103 Early Hints): the final response follows. The limit is
		// not reset: the heads of all of them share maxHeaderBytes.
		if n1xx++; n1xx > t.max1xx {
			return nil, true, errTooMany1xx
		}
		if got1xx != nil {
			if err := got1xx(code, resp.Header); err != nil {
				return nil, true, err
			}
		}
	}
	c.limit = math.MaxInt64
	if resp.StatusCode == http.StatusSwitchingProtocols && req.Header.Get("Upgrade") != "" {
		// The connection is the upgraded stream's now; it ends with the request (stop stays
		// registered) and is never pooled.
		_ = c.conn.SetReadDeadline(time.Time{})
		resp.Body = &upgraded{Reader: c.br, conn: c.conn}
		return resp, true, nil
	}
	b := &h1Body{rc: resp.Body, c: c, t: t, stop: stop, wrote: wrote, readTimeout: bodyTimeout,
		reusable: !resp.Close && resp.StatusCode >= 200}
	b.refresh(time.Now())
	resp.Body = b
	return resp, true, nil
}

func staleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// upgraded is a connection after a 101: reads come through the reader that read the
// response head (it may hold the first bytes of the new protocol).
type upgraded struct {
	io.Reader
	conn net.Conn
}

func (u *upgraded) Write(p []byte) (int, error) { return u.conn.Write(p) }
func (u *upgraded) Close() error                { return u.conn.Close() }

// h1Body returns its connection to the pool when the body has been read to the end by its
// framing, the request was written whole and nothing is left over, and closes it otherwise.
type h1Body struct {
	rc    io.ReadCloser
	c     *h1Conn
	t     *h1Transport
	stop  func() bool // ends the cancel watch; false when the cancel already ran
	wrote chan error  // the request body's writer, when there is one
	// readTimeout bounds each read (the transport's, or the route's); 0: none.
	readTimeout time.Duration
	reusable    bool
	eof         bool
	done        bool
	deadline    time.Time // of the next read; renewed when half of readTimeout is gone
}

// refresh moves the read deadline to readTimeout from now when less than half of it is left,
// so a body read in many small reads costs few timer updates.
func (b *h1Body) refresh(now time.Time) {
	d := b.readTimeout
	if d <= 0 {
		_ = b.c.conn.SetReadDeadline(time.Time{})
		return
	}
	if b.deadline.Sub(now) < d/2 {
		b.deadline = now.Add(d)
		_ = b.c.conn.SetReadDeadline(b.deadline)
	}
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.readTimeout > 0 {
		b.refresh(time.Now())
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
		b.finish()
	}
	return n, err
}

func (b *h1Body) Close() error {
	if b.rc == http.NoBody {
		b.eof = true // complete by its framing: HEAD, 204, 304, Content-Length: 0
	}
	b.finish()
	return nil
}

// tlsClean reports whether a TLS connection holds nothing past the response (tlsLeftover).
func (b *h1Body) tlsClean() bool {
	leftover, ok := tlsLeftover(b.c.tls)
	if leftover {
		b.t.discarded(discardUnreadBytes)
	}
	return ok
}

func (b *h1Body) finish() {
	if b.done {
		return
	}
	b.done = true
	live := b.stop()
	written := true
	if b.wrote != nil {
		select {
		case err := <-b.wrote:
			written = err == nil
		default:
			written = false // still writing: closing the connection ends the writer
		}
	}
	switch {
	case !b.eof:
		// Closing first: a body's Close would read the rest of it.
		b.c.conn.Close()
		if live {
			b.t.discarded(discardIncomplete)
		}
		return
	case b.c.br.Buffered() > 0:
		b.t.discarded(discardUnreadBytes)
	case !b.reusable || !live || !written:
	case b.c.tls != nil && !b.tlsClean():
	default:
		_ = b.rc.Close()
		b.t.put(b.c)
		return
	}
	b.c.conn.Close()
}
