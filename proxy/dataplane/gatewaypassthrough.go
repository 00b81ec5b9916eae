package dataplane

import (
	"bytes"
	"io"
	"net"
	"time"
)

// TLS passthrough on a Gateway (TLSRoutes on TLS listeners in mode Passthrough): the same
// data path as ssl-passthrough (passthrough.go) — the ClientHello read on a goroutine of its
// own within ReadHeaderTimeout and at most maxClientHello bytes, then a raw TCP splice to an
// endpoint with the ClientHello sent first — chosen per listener port by
// table.GatewayPassthrough. What differs is the miss: a connection to a passthrough port whose
// server name no route of that port takes (none sent, not TLS, too large, too slow, a name of
// another listener or another tenant) is closed, never terminated here nor given to another
// route. Connections to the Gateway's HTTPS ports go to the HTTPS server unread.

// routeGateway decides connection c of a Gateway table's listener (rt, the table when c was
// accepted).
func (l *passthroughListener) routeGateway(c net.Conn, rt *router) {
	port := localPort(c)
	if _, passthrough := rt.table.GatewayPassthrough(port, ""); !passthrough {
		l.track(c, false)
		l.serveTLS(c, nil)
		return
	}
	if d := l.s.opts.ReadHeaderTimeout; d > 0 {
		_ = c.SetReadDeadline(time.Now().Add(d))
	}
	hello, sni := readClientHello(c)
	_ = c.SetReadDeadline(time.Time{})
	// The table in use now: the route and the pools of one table.
	if rt = l.s.current.Load(); rt != nil {
		if r, _ := rt.table.GatewayPassthrough(port, sni); r != nil {
			be := r.Backend
			if len(r.Split) > 0 {
				be = pickWeighted(r.Split).Backend
			}
			if p := rt.pools[be]; p != nil {
				l.pass(c, hello, p)
				l.track(c, false)
				return
			}
		}
	}
	l.s.tlsHandshake(handshakeNoRoute)
	l.track(c, false)
	c.Close()
}

// serveTLS gives c to the HTTPS server, with the bytes already read from it (hello) first.
func (l *passthroughListener) serveTLS(c net.Conn, hello []byte) {
	if len(hello) > 0 {
		c = &prefixedConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), c)}
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}
