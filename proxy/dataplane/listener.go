package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
)

// limitListener caps the connections a listener has open at once, in all and per client
// address. A connection over a cap is closed (the client sees a reset or EOF, at once,
// rather than a queue that never moves) and counted. The total is counted when a connection
// is accepted. The per-client count needs the client's address: the connection's own, or,
// when the listener takes the PROXY protocol, the address the PROXY header names, so that
// clients behind a load balancer are counted each on their own, not as the load balancer.
// That header is read on the connection's first read (never in Accept, where one slow
// sender would hold up every other), so such a connection is counted, or closed, then.
type limitListener struct {
	net.Listener
	s         *Server
	name      string
	max       int64
	perClient int
	active    atomic.Int64
	open      prometheus.Gauge // nil without metrics

	mu     sync.Mutex
	byAddr map[netip.Addr]int
}

func (s *Server) limitListener(ln net.Listener, name string) net.Listener {
	if s.opts.MaxConnections <= 0 && s.opts.MaxConnectionsPerClient <= 0 && s.opts.Metrics == nil {
		return ln
	}
	l := &limitListener{Listener: ln, s: s, name: name, max: int64(s.opts.MaxConnections),
		perClient: s.opts.MaxConnectionsPerClient, byAddr: map[netip.Addr]int{}}
	if m := s.opts.Metrics; m != nil {
		l.open = m.ClientConnections.WithLabelValues(name)
	}
	return l
}

// errPerClient ends a connection over MaxConnectionsPerClient.
var errPerClient = errors.New("too many connections from this client")

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.active.Add(1); l.max > 0 && n > l.max {
			l.active.Add(-1)
			l.s.limitHit(limitMaxConnections) // counted first: whoever sees the close sees the count
			c.Close()
			continue
		}
		lc := &limitedConn{Conn: c, l: l}
		if l.perClient > 0 {
			if _, proxied := c.(*proxyproto.Conn); proxied {
				lc.admitOnRead = true
			} else if lc.admit() != nil {
				lc.Close()
				continue
			}
		}
		l.gauge()
		return lc, nil
	}
}

func (l *limitListener) gauge() {
	if l.open != nil {
		l.open.Set(float64(l.active.Load()))
	}
}

func clientAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// limitedConn holds its places under the caps and gives them back when closed (by the
// server, or by a handler that hijacked it for an upgrade).
type limitedConn struct {
	net.Conn
	l           *limitListener
	admitOnRead bool // the per-client count waits for the PROXY header (set in Accept)
	admitOnce   sync.Once
	admitErr    error
	closeOnce   sync.Once
	// under l.mu:
	addr    netip.Addr // the client it is counted as, when counted
	counted bool
	closed  bool
}

// admit counts the connection under its client's address (for a PROXY-protocol connection
// this reads the header, within the listener's ReadHeaderTimeout), or refuses it: the
// client has MaxConnectionsPerClient open already.
func (c *limitedConn) admit() error {
	addr := clientAddr(c.Conn)
	l := c.l
	l.mu.Lock()
	switch {
	case c.closed:
		l.mu.Unlock()
		return net.ErrClosed
	case !addr.IsValid():
		l.mu.Unlock()
		return nil
	case l.byAddr[addr] >= l.perClient:
		l.mu.Unlock()
		l.s.limitHit(limitMaxConnectionsPerClient)
		return errPerClient
	}
	l.byAddr[addr]++
	c.addr, c.counted = addr, true
	l.mu.Unlock()
	return nil
}

func (c *limitedConn) Read(b []byte) (int, error) {
	if c.admitOnRead {
		c.admitOnce.Do(func() {
			if c.admitErr = c.admit(); c.admitErr != nil {
				c.Close()
			}
		})
		if c.admitErr != nil {
			return 0, c.admitErr
		}
	}
	return c.Conn.Read(b)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(c.release)
	return err
}

func (c *limitedConn) release() {
	l := c.l
	l.active.Add(-1)
	l.mu.Lock()
	c.closed = true
	if c.counted {
		if n := l.byAddr[c.addr] - 1; n > 0 {
			l.byAddr[c.addr] = n
		} else {
			delete(l.byAddr, c.addr) // the map holds only clients with connections open
		}
	}
	l.mu.Unlock()
	l.gauge()
}

// CloseWrite lets the server half-close a plain TCP connection, as it does unwrapped.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ProxyProtocol says whether a listener takes the PROXY protocol (v1 or v2, HAProxy's) in
// front of each connection, for deployments behind another load balancer that passes the
// client's address that way.
type ProxyProtocol string

const (
	ProxyProtocolOff      ProxyProtocol = ""         // no PROXY header is read (default)
	ProxyProtocolOptional ProxyProtocol = "optional" // a trusted source may send one
	ProxyProtocolRequired ProxyProtocol = "required" // a trusted source must send one
)

// proxyProtocolListener reads the PROXY header of connections from the trusted sources; the
// address it gives becomes the connection's RemoteAddr (the client address of every rule:
// X-Forwarded-For, source ranges, rate limits, the access log). A connection from any other
// source that sends a PROXY header is refused (it would be a forged client address); with
// ProxyProtocolRequired, so is any connection from another source. The header is read on
// the connection's first read, not in Accept, within ReadHeaderTimeout.
func (s *Server) proxyProtocolListener(ln net.Listener, mode ProxyProtocol) net.Listener {
	if mode == ProxyProtocolOff {
		return ln
	}
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if trusted(o.Upstream, s.opts.ProxyProtocolFrom) {
				if mode == ProxyProtocolRequired {
					return proxyproto.REQUIRE, nil
				}
				return proxyproto.USE, nil
			}
			if mode == ProxyProtocolRequired {
				s.limitHit(limitProxyProtocol)
				return proxyproto.REJECT, proxyproto.ErrInvalidUpstream // closed; Accept goes on
			}
			return proxyproto.REJECT, nil
		},
	}
}

func trusted(a net.Addr, from []netip.Prefix) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range from {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
