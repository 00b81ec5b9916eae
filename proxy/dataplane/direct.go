package dataplane

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/metalgate/metalgate/proxy/balancer"
	"github.com/metalgate/metalgate/proxy/table"
)

// The direct path forwards the most common request, a GET or HEAD without a body (from an
// HTTP/1.x or an HTTP/2 client: the backend gets HTTP/1.1 either way, and the client's
// server writes the response in its own framing), straight from the inbound request to the
// h1 transport and back, without
// ReverseProxy's outbound copy of the request (header map clone, rewrite, Request.Write).
// It keeps ReverseProxy's semantics, which every other request still goes through: the
// headers come from the same policy (headers.go), 1xx responses are forwarded, bodies of
// unknown length and event streams are flushed as they arrive, trailers are passed on, and a
// body that fails half-way aborts the response. Every data-plane test runs on both paths
// (forEachPath), and a differential fuzz test compares them on broken backend responses.

// takesDirectPath reports whether r may take the direct path to pool p.
func (s *Server) takesDirectPath(r *http.Request, p *pool) bool {
	return s.direct && (p.backend.Protocol == table.ProtocolHTTP || p.backend.Protocol == table.ProtocolHTTPS) && (r.ProtoMajor == 1 || r.ProtoMajor == 2) &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) && directEligible(r) && plainHost(r.Host) &&
		!s.reencodeQueries && plainQuery(r.URL.RawQuery)
}

// plainQuery accepts the queries ReverseProxy forwards unchanged: no ';', only well-formed
// %-escapes, at most 10,000 parameters. It re-encodes any other query (dropping what does not
// parse, so that the backend cannot read parameters differently), and so must see it.
func plainQuery(q string) bool {
	if strings.Count(q, "&") >= 10000 {
		return false
	}
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
		}
	}
	return true
}

// plainHost accepts the Host values the direct path writes as they are: anything else (which
// net/http would clean before writing) goes through ReverseProxy.
func plainHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_') {
			return false
		}
	}
	return true
}

// forwardDirect sends r on the direct path and copies the response to w.
func (s *Server) forwardDirect(w *responseWriter, r *http.Request, a *attempt) {
	ctx := r.Context()
	got1xx := func(code int, h http.Header) error {
		// As ReverseProxy does: the 1xx goes out with its own headers, which are then cleared.
		removeHopByHop(h)
		dst := w.Header()
		for k, vv := range h {
			dst[k] = append(dst[k], vv...)
		}
		w.WriteHeader(code)
		clear(dst)
		return nil
	}
	resp, err := s.send(ctx, a, true, true, func(e *balancer.Endpoint, _ int) (*http.Response, error) {
		return s.h1.do(ctx, e.Addr, a.pool.tls, r, func(bw *bufio.Writer) error { return s.writeHead(bw, r, a) }, got1xx, a.route.Options.Policy.Timeouts, &a.connect)
	})
	if err != nil {
		s.failed(w, r, a, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// No upgrade was asked for: the backend is broken. The connection is not reused.
		s.failed(w, r, a, errors.New("backend switched protocols without an upgrade request"))
		return
	}
	if p := s.pageFor(a, resp.StatusCode); p != nil {
		discard(resp) // unread: the connection is closed, not pooled
		s.errorPage(w, r, a, resp.StatusCode, p)
		return
	}
	s.responseHeaders(resp.Header, resp.StatusCode, a, r.Header.Get("Origin"))
	h := w.Header()
	for k, vv := range resp.Header {
		if h[k] == nil {
			h[k] = vv // resp.Header is ours and not used again: share its values
		} else {
			h[k] = append(h[k], vv...)
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	stream := resp.ContentLength < 0 || eventStream(resp.Header.Get("Content-Type"))
	if stream {
		w.Flush() // a stream's head goes out before its first part, as ReverseProxy's does
	}
	if err := copyBody(w, resp.Body, stream); err != nil {
		if ctx.Value(http.ServerContextKey) != nil {
			// The status line is out: the only way to tell the client is to cut the response.
			panic(http.ErrAbortHandler)
		}
		return
	}
	if len(resp.Trailer) > 0 {
		w.Flush() // trailers need a chunked response, even for a short body
		for k, vv := range resp.Trailer {
			if len(resp.Trailer) != announced {
				k = http.TrailerPrefix + k // a trailer the backend did not announce
			}
			h[k] = append(h[k], vv...)
		}
	}
}

// writeHead writes r's request line and headers for the backend, from the header policy.
func (s *Server) writeHead(bw *bufio.Writer, r *http.Request, a *attempt) error {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(upstreamHost(r, a))
	bw.WriteString("\r\n")
	s.outboundHeaders(r, a, func(k, v string) {
		if v == "" && k == "User-Agent" {
			return // ReverseProxy's way of sending none
		}
		bw.WriteString(k)
		bw.WriteString(": ")
		bw.WriteString(clean(v))
		bw.WriteString("\r\n")
	})
	_, err := bw.WriteString("\r\n")
	return err
}

// clean turns CR and LF in a header value into spaces, as Request.Write does, so that no
// value can start another header or request.
func clean(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return v
}

// copyBody copies a response body to the client, flushing after each read when flush (a
// stream: the client must see each part as the backend sends it).
func copyBody(w *responseWriter, body io.Reader, flush bool) error {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flush {
				w.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
