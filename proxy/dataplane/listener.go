package dataplane

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
)

// limitListener caps the connections a listener has open at once, in all and per client
// address. A connection over a cap is closed as soon as it is accepted (the client sees a
// reset or EOF, at once, rather than a queue that never moves) and counted.
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
		addr := clientAddr(c)
		if l.perClient > 0 && addr.IsValid() {
			l.mu.Lock()
			if l.byAddr[addr] >= l.perClient {
				l.mu.Unlock()
				l.active.Add(-1)
				l.s.limitHit(limitMaxConnectionsPerClient)
				c.Close()
				continue
			}
			l.byAddr[addr]++
			l.mu.Unlock()
		}
		l.gauge()
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *limitListener) release(addr netip.Addr) {
	l.active.Add(-1)
	if l.perClient > 0 && addr.IsValid() {
		l.mu.Lock()
		if n := l.byAddr[addr] - 1; n > 0 {
			l.byAddr[addr] = n
		} else {
			delete(l.byAddr, addr) // the map holds only clients with connections open
		}
		l.mu.Unlock()
	}
	l.gauge()
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

// limitedConn gives its place back when closed (by the server, or by a handler that
// hijacked it for an upgrade).
type limitedConn struct {
	net.Conn
	l    *limitListener
	addr netip.Addr
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
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
