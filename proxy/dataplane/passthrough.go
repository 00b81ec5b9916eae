package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/metalgate/metalgate/proxy/balancer"
)

// TLS passthrough (ssl-passthrough): with Options.SSLPassthrough the HTTPS listener reads each
// connection's ClientHello first — on a goroutine of its own, within ReadHeaderTimeout, so a
// silent client never holds up the others — and looks up its server name in the table. A
// passthrough host's connection goes, undecrypted and with the ClientHello it sent, to an
// endpoint of its backend; every other connection goes to the HTTPS server with the bytes
// read so far put back in front, and is served as without passthrough.

// maxClientHello bounds what is read (and kept) before the decision: a ClientHello is one
// handshake message, at most a few records.
const maxClientHello = 64 << 10

// passthroughIdleTimeout closes a passed-through connection on which neither side sent
// anything for this long (the proxy cannot see inside it to do better).
const passthroughIdleTimeout = 10 * time.Minute

var errHelloRead = errors.New("client hello read")

type passthroughListener struct {
	net.Listener
	s     *Server
	ctx   context.Context
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu     sync.Mutex
	active map[net.Conn]struct{} // passed-through connections (both sides), closed by Close
}

func (s *Server) passthroughListener(ctx context.Context, ln net.Listener) net.Listener {
	l := &passthroughListener{Listener: ln, s: s, ctx: ctx, conns: make(chan net.Conn), errs: make(chan error),
		done: make(chan struct{}), active: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *passthroughListener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.route(c)
		}()
	}
}

// Accept returns the connections the HTTPS server serves.
func (l *passthroughListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, ends every passed-through connection and waits for the goroutines.
func (l *passthroughListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		for c := range l.active {
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return err
}

func (l *passthroughListener) track(c net.Conn, on bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		select {
		case <-l.done:
			return false
		default:
		}
		l.active[c] = struct{}{}
	} else {
		delete(l.active, c)
	}
	return true
}

// route reads c's ClientHello and passes c through or on to the HTTPS server.
func (l *passthroughListener) route(c net.Conn) {
	// Tracked until the HTTPS server has it: Close ends a client that is still silent.
	if !l.track(c, true) {
		c.Close()
		return
	}
	if rt := l.s.current.Load(); rt != nil && rt.table.Gateway != nil {
		l.routeGateway(c, rt) // a Gateway's listener (gatewaypassthrough.go)
		return
	}
	if d := l.s.opts.ReadHeaderTimeout; d > 0 {
		_ = c.SetReadDeadline(time.Now().Add(d))
	}
	hello, sni := readClientHello(c)
	_ = c.SetReadDeadline(time.Time{})
	if rt := l.s.current.Load(); rt != nil && sni != "" {
		if be := rt.table.Passthrough(sni); be != nil {
			if p := rt.pools[be]; p != nil {
				l.pass(c, hello, p)
				l.track(c, false)
				return
			}
		}
	}
	l.track(c, false)
	l.serveTLS(c, hello)
}

// readClientHello reads from c until the TLS server code has the ClientHello (or fails),
// recording every byte read; sni is the server name it carries ("" if none or not TLS).
func readClientHello(c net.Conn) (hello []byte, sni string) {
	var buf bytes.Buffer
	rc := &recordingConn{Conn: c, r: io.TeeReader(io.LimitReader(c, maxClientHello), &buf)}
	err := tls.Server(rc, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, errHelloRead
	}}).Handshake()
	if !errors.Is(err, errHelloRead) {
		sni = ""
	}
	return buf.Bytes(), sni
}

// recordingConn reads through r and writes nothing (an alert from the aborted handshake must
// not reach the client, whose connection is served afterwards).
type recordingConn struct {
	net.Conn
	r io.Reader
}

func (c *recordingConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

// prefixedConn is a connection whose first bytes were already read: they are read again first.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// pass connects c to an endpoint of p (another one after a failed connection, as a request
// would), sends hello and copies both ways until either side closes or idles out.
func (l *passthroughListener) pass(c net.Conn, hello []byte, p *pool) {
	defer c.Close()
	s := l.s
	key := ""
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		key = a.IP.String()
	}
	var tried []*balancer.Endpoint
	var up net.Conn
	for try := 0; try <= s.opts.Retries && up == nil; try++ {
		e := p.bal.Pick(key, func(e *balancer.Endpoint) bool {
			for _, t := range tried {
				if t == e {
					return true
				}
			}
			return false
		})
		if e == nil {
			break
		}
		tried = append(tried, e)
		ctx, cancel := context.WithTimeout(l.ctx, s.opts.ConnectTimeout)
		conn, err := s.h1.dial(ctx, "tcp", e.Addr)
		cancel()
		if err != nil {
			if e.Failed(s.opts.FailureThreshold, s.opts.EjectFor, time.Now()) {
				s.ejected(e)
			}
			continue
		}
		e.Succeeded()
		up = conn
	}
	if up == nil {
		s.countUpstream("connect")
		return
	}
	defer up.Close()
	if !l.track(up, true) {
		return
	}
	defer l.track(up, false)
	stop := context.AfterFunc(l.ctx, func() { c.Close(); up.Close() })
	defer stop()
	if _, err := up.Write(hello); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		idleCopy(c, up)
		closeWrite(c)
	}()
	idleCopy(up, c)
	closeWrite(up)
	<-done
}

// idleCopy copies src to dst until EOF, an error, or passthroughIdleTimeout without a byte.
func idleCopy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(time.Now().Add(passthroughIdleTimeout))
		n, err := src.Read(buf)
		if n > 0 {
			_ = dst.SetWriteDeadline(time.Now().Add(passthroughIdleTimeout))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close() // a reset or a timeout: the other side must not wait
			}
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
