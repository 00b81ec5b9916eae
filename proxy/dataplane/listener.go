package dataplane

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

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
