package dataplane

import (
	"net"
	"sync/atomic"
	"syscall"
)

// quickAckWrites is how many of a TLS connection's first writes are each followed by
// TCP_QUICKACK: the server's flight of a full TLS 1.3 handshake or of a resumed TLS 1.2 one
// (1), or a HelloRetryRequest and then that flight (2). The client speaks last in those
// handshakes.
const quickAckWrites = 2

// quickAckListener makes each accepted TCP connection acknowledge at once the segment that
// follows each of its first quickAckWrites writes, rather than after the kernel's delayed-ACK
// time (40 ms or more on Linux).
//
// Why: in a TLS 1.3 handshake (and a resumed TLS 1.2 one) the client's Finished is the last
// handshake message, and the server has nothing to send after it: Go's server sends its
// session tickets in its first flight, before the client's Finished, where OpenSSL sends
// them after it. Having just sent that flight, Linux's TCP is in its interactive (delayed-
// ACK) mode, so the Finished is acknowledged only when the delayed-ACK timer fires. A client
// with Nagle's algorithm on (ab, OpenSSL's s_client, some HTTP libraries: TCP_NODELAY is the
// client's choice) holds its request until that acknowledgement, so every new connection
// waited 40 ms before its first request (measured: 44 ms a connection against nginx's
// 1.2 ms, docs/benchmarks.md). TCP_QUICKACK after the flight leaves that mode, and sends at
// once an acknowledgement already held back. It costs one setsockopt per counted write; it is
// not kept (the kernel goes back to delaying ACKs by its own rules), so later requests and
// responses are not changed. Under TLS passthrough the writes are the backend's flight as the
// proxy copies it: a flight that arrives in more than quickAckWrites parts still waits.
func quickAckListener(ln net.Listener) net.Listener { return &ackListener{Listener: ln} }

type ackListener struct{ net.Listener }

func (l *ackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &ackConn{Conn: tc, raw: raw}, nil
}

// ackConn is an accepted connection that sets TCP_QUICKACK after each of its first
// quickAckWrites writes that sent something.
type ackConn struct {
	net.Conn
	raw    syscall.RawConn
	writes atomic.Int32
}

func (c *ackConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 && c.writes.Load() < quickAckWrites && c.writes.Add(1) <= quickAckWrites {
		// After the write: sending data is what puts the socket in delayed-ACK mode.
		_ = c.raw.Control(setQuickAck)
	}
	return n, err
}

// CloseWrite half-closes the connection, as the unwrapped connection does.
func (c *ackConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

func setQuickAck(fd uintptr) {
	_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
}
