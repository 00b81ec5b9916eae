package dataplane

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Transport is the fast HTTP/1.1 path to endpoints for the common request: idempotent,
// without a body, not an Upgrade, not Expect: 100-continue. It writes the request and reads
// the response on the calling goroutine over a pooled keep-alive connection, where
// http.Transport hands each request to two goroutines per connection. Everything else goes
// through http.Transport, which stays the reference semantics (the same tests run on both).
type h1Transport struct {
	dial            func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle         int
	idleTimeout     time.Duration
	responseTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*h1Conn
}

type h1Conn struct {
	net.Conn
	addr      string
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// h1Eligible reports whether the fast path may carry req.
func h1Eligible(req *http.Request) bool {
	return (req.Body == nil || req.Body == http.NoBody) && req.ContentLength == 0 &&
		isIdempotent(req.Method) && req.Header.Get("Upgrade") == "" && req.Header.Get("Expect") == "" &&
		!req.Close && req.Trailer == nil
}

func (t *h1Transport) get(ctx context.Context, addr string) (*h1Conn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for {
		list := t.idle[addr]
		if len(list) == 0 {
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		if now.Sub(c.idleSince) < t.idleTimeout {
			t.mu.Unlock()
			return c, true, nil
		}
		c.Conn.Close()
	}
	t.mu.Unlock()
	nc, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &h1Conn{Conn: nc, addr: addr, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 8<<10)}, false, nil
}

func (t *h1Transport) put(c *h1Conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[c.addr]) < t.maxIdle {
		t.idle[c.addr] = append(t.idle[c.addr], c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.Conn.Close()
}

// retain closes the idle connections of endpoints no longer in any table.
func (t *h1Transport) retain(keep map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, list := range t.idle {
		if keep[addr] {
			continue
		}
		for _, c := range list {
			c.Conn.Close()
		}
		delete(t.idle, addr)
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *h1Transport) CloseIdleConnections() { t.retain(nil) }

var longAgo = time.Unix(1, 0)

func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.do(req.Context(), req.URL.Host, req, nil)
}

// do sends a request to addr over a pooled connection and reads the response. The request
// head is written by head, or by req.Write when head is nil; req gives the method for reading
// the response (HEAD has no body).
func (t *h1Transport) do(ctx context.Context, addr string, req *http.Request, head func(*bufio.Writer) error) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(ctx, c, req, head)
		if err == nil {
			return resp, nil
		}
		c.Conn.Close()
		// A pooled connection the backend closed while idle fails before any response
		// byte: the request (idempotent, no body) is safe to send once more on a new one.
		if reused && attempt == 0 && ctx.Err() == nil && staleConnError(err) {
			continue
		}
		return nil, err
	}
}

func (t *h1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request, head func(*bufio.Writer) error) (*http.Response, error) {
	// The response timeout bounds the wait for the response, a read: the request head goes
	// into the socket buffer (a write blocked on a full one ends when ctx does).
	if t.responseTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(t.responseTimeout))
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(longAgo) })
	defer stop()
	var err error
	if head != nil {
		err = head(c.bw)
	} else {
		err = req.Write(c.bw)
	}
	if err != nil {
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // 1xx informational (103 Early Hints): the final response follows
		}
		if !stop() {
			return nil, context.Cause(ctx) // canceled at the last moment: the deadline is poisoned
		}
		if t.responseTimeout > 0 {
			_ = c.SetReadDeadline(time.Time{})
		}
		resp.Body = &h1Body{rc: resp.Body, c: c, t: t, reusable: !resp.Close}
		return resp, nil
	}
}

func staleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// h1Body returns its connection to the pool when the body has been read to the end, and
// closes it otherwise (an unread remainder would corrupt the next response).
type h1Body struct {
	rc       io.ReadCloser
	c        *h1Conn
	t        *h1Transport
	reusable bool
	eof      bool
	done     bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
		b.finish()
	}
	return n, err
}

func (b *h1Body) Close() error {
	if b.done {
		return nil
	}
	if b.rc == http.NoBody {
		b.eof = true
	}
	b.finish()
	return nil
}

func (b *h1Body) finish() {
	if b.done {
		return
	}
	b.done = true
	_ = b.rc.Close()
	if b.eof && b.reusable {
		b.t.put(b.c)
		return
	}
	b.c.Conn.Close()
}
