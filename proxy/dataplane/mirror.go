package dataplane

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// Request mirroring (Gateway API's RequestMirror filter, table.Mirror): a copy of a sample
// of a route's requests goes to each mirror backend, and the mirror's response is read (at
// most maxMirrorResponse) and thrown away. The client's request never waits for a mirror:
// a mirror is sent from a goroutine of its own, bounded three ways so that a hostile or
// broken mirror backend costs the proxy nothing more:
//   - at most maxMirrorsInFlight mirror requests at once, across all routes; more are
//     dropped and counted (metalgate_proxy_mirror_requests_total{result="dropped"});
//   - each mirror request ends after mirrorTimeout, whatever state it is in (the h1
//     transport closes the connection on cancel, so no read or write outlives it);
//   - a body is mirrored only when it is at most maxMirrorBody bytes: it is copied as the
//     primary request reads it, and the mirror is sent when the primary has read it whole.
//     The client's body is read once, by the primary forwarding, and never held back.
//
// Mirror requests go through the same h1 transport and pool as primary requests: a
// connection returns to the pool only after its response has been read to its end by its
// framing, and it is checked for unsolicited bytes before reuse, so a mirror's response can
// never be read by a primary request or the other way round. A response longer than
// maxMirrorResponse closes its connection.
const (
	maxMirrorsInFlight = 256
	mirrorTimeout      = 10 * time.Second
	maxMirrorBody      = 64 << 10
	maxMirrorResponse  = 64 << 10
)

// Results counted by metalgate_proxy_mirror_requests_total.
const (
	mirrorSent         = "sent"           // the mirror answered (any status)
	mirrorFailed       = "failed"         // no answer: connect error, timeout, broken response
	mirrorDropped      = "dropped"        // maxMirrorsInFlight were in flight
	mirrorBodyTooLarge = "body_too_large" // the body was larger than maxMirrorBody
	mirrorNoEndpoints  = "no_endpoints"   // the mirror backend has no endpoint (or is unresolved)
	mirrorUnsupported  = "unsupported"    // a protocol upgrade, or a backend protocol not mirrored (h2c, gRPC)
)

// mirrorLimit is the data plane's bound on mirror requests in flight. The zero value is
// ready: the defaults above (tests set lower ones).
type mirrorLimit struct {
	inflight atomic.Int64
	max      int64         // 0: maxMirrorsInFlight
	timeout  time.Duration // 0: mirrorTimeout
}

func (l *mirrorLimit) acquire() bool {
	max := l.max
	if max <= 0 {
		max = maxMirrorsInFlight
	}
	if l.inflight.Add(1) > max {
		l.inflight.Add(-1)
		return false
	}
	return true
}

func (l *mirrorLimit) release() { l.inflight.Add(-1) }

func (l *mirrorLimit) deadline() time.Duration {
	if l.timeout > 0 {
		return l.timeout
	}
	return mirrorTimeout
}

// mirrorCopy is one mirror request to send: to pool, r's method, URI and Host with header.
type mirrorCopy struct {
	pool   *pool
	method string
	uri    string
	host   string
	header http.Header
}

// mirror prepares the copies of r for the route's mirrors that the sampling chooses, with
// the headers the route's own backend gets (outboundHeaders), and sends them: at once when r
// has no body, else when the primary forwarding has read the body whole (mirrorTee). It
// must be called after the request ID and the authentication headers are settled and before
// r is forwarded.
func (s *Server) mirror(rt *router, r *http.Request, a *attempt, ms []table.Mirror) {
	var copies []mirrorCopy
	var header http.Header
	for _, m := range ms {
		if m.Numerator < m.Denominator && (m.Numerator <= 0 || rand.IntN(m.Denominator) >= m.Numerator) {
			continue // not sampled
		}
		p := rt.pools[m.Backend]
		switch {
		case m.Backend == nil || m.Backend.Unresolved || p == nil || len(p.eps) == 0:
			s.countMirror(mirrorNoEndpoints)
			continue
		case r.Header.Get("Upgrade") != "" || !mirrorable(p):
			s.countMirror(mirrorUnsupported)
			continue
		case r.ContentLength > maxMirrorBody:
			s.countMirror(mirrorBodyTooLarge)
			continue
		}
		if header == nil {
			header = make(http.Header, len(r.Header)+8)
			s.outboundHeaders(r, a, func(k, v string) {
				k = http.CanonicalHeaderKey(k)
				header[k] = append(header[k], v)
			})
			delete(header, "Expect") // the body is whole: nothing to wait for
		}
		copies = append(copies, mirrorCopy{pool: p, method: r.Method, uri: r.URL.RequestURI(), host: upstreamHost(r, a), header: header})
	}
	if len(copies) == 0 {
		return
	}
	if a.body == nil {
		for i := range copies {
			s.sendMirror(&copies[i], nil)
		}
		return
	}
	a.body.ReadCloser = &mirrorTee{ReadCloser: a.body.ReadCloser, s: s, n: len(copies), done: func(body []byte) {
		for i := range copies {
			s.sendMirror(&copies[i], body)
		}
	}}
}

// mirrorable reports whether mirrors can be sent to p's backend: HTTP/1.1 in clear or over
// TLS.
func mirrorable(p *pool) bool {
	switch p.backend.Protocol {
	case table.ProtocolHTTP:
		return true
	case table.ProtocolHTTPS:
		return p.tls != nil && p.tls.refuse == nil
	}
	return false
}

// sendMirror sends c with body from a goroutine of its own, unless maxMirrorsInFlight are in
// flight (dropped, counted).
func (s *Server) sendMirror(c *mirrorCopy, body []byte) {
	lim := &s.limits.mirror
	if !lim.acquire() {
		s.countMirror(mirrorDropped)
		return
	}
	go func() {
		defer lim.release()
		ctx, cancel := context.WithTimeout(context.Background(), lim.deadline())
		defer cancel()
		s.countMirror(s.exchangeMirror(ctx, c, body))
	}()
}

// exchangeMirror sends one mirror request and discards its answer; it returns the result
// to count.
func (s *Server) exchangeMirror(ctx context.Context, c *mirrorCopy, body []byte) string {
	e := c.pool.bal.Pick("", nil)
	if e == nil {
		return mirrorNoEndpoints
	}
	scheme := "http://"
	if c.pool.backend.Protocol == table.ProtocolHTTPS {
		scheme = "https://"
	}
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, scheme+e.Addr+c.uri, rd)
	if err != nil {
		s.opts.Logger.V(1).Info("mirror request not sent", "error", err)
		return mirrorFailed
	}
	req.Host = c.host
	req.Header = c.header.Clone()
	start := time.Now()
	e.Start()
	defer func() { e.End(time.Since(start)) }()
	resp, err := s.h1.do(ctx, e.Addr, c.pool.tls, req, nil, nil, table.Timeouts{}, nil)
	if err != nil {
		s.opts.Logger.V(1).Info("mirror request failed", "backend", c.pool.backend.Key, "error", err)
		return mirrorFailed
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMirrorResponse))
	resp.Body.Close()
	if err != nil {
		return mirrorFailed
	}
	return mirrorSent
}

// mirrorTee copies a request body of at most maxMirrorBody bytes as the primary forwarding
// reads it, and calls done with the copy when it has been read whole (io.EOF). A larger
// body stops the copy (counted once per mirror); a failed read sends nothing.
type mirrorTee struct {
	io.ReadCloser
	s    *Server
	n    int // mirrors waiting for the body
	buf  []byte
	over bool
	done func([]byte)
}

func (t *mirrorTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if t.done == nil {
		return n, err
	}
	if !t.over {
		if len(t.buf)+n > maxMirrorBody {
			t.over, t.buf, t.done = true, nil, nil
			for i := 0; i < t.n; i++ {
				t.s.countMirror(mirrorBodyTooLarge)
			}
			return n, err
		}
		t.buf = append(t.buf, p[:n]...)
	}
	if err == io.EOF {
		done := t.done
		t.done = nil
		done(t.buf)
	}
	return n, err
}
