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

// The direct path forwards the most common request, an HTTP/1.x GET or HEAD without a body,
// straight from the inbound request to the fast HTTP/1.1 transport and back, without
// ReverseProxy's outbound copy of the request (header map clone, rewrite, Request.Write).
// It keeps ReverseProxy's semantics, which every other request still goes through: the
// same headers are dropped (hop-by-hop, the client's forwarding headers) and added, the
// response's hop-by-hop headers are dropped, bodies of unknown length and event streams are
// flushed as they arrive, trailers are passed on, and a body that fails half-way aborts the
// response. The forwarding tests run on both paths (TestReferenceTransport).

// direct reports whether r may take the direct path to pool p.
func (s *Server) direct(r *http.Request, p *pool) bool {
	return s.fast != nil && p.backend.Protocol != table.ProtocolH2C && r.ProtoMajor == 1 &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) && h1Eligible(r) && plainHost(r.Host) &&
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

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
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

// dropped reports the request headers the direct path does not forward: those that describe
// one connection (hop-by-hop, RFC 9110 §7.6.1), the client's forwarding headers and request
// ID, which this hop replaces, and those Request.Write leaves out (Host is written first; a
// GET or HEAD without a body needs no length).
func dropped(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "Forwarded",
		"X-Real-Ip", "X-Request-Id",
		"Host", "Content-Length":
		return true
	}
	return false
}

// forward sends r on the direct path and copies the response to w.
func (s *Server) forward(w *responseWriter, r *http.Request, a *attempt) {
	ctx := r.Context()
	resp, err := s.send(ctx, a, true, func(e *balancer.Endpoint, _ int) (*http.Response, error) {
		return s.fast.do(ctx, e.Addr, r, func(bw *bufio.Writer) error { return s.writeHead(bw, r, a) })
	})
	if err != nil {
		s.failed(w, r, a, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// No upgrade was asked for: the backend is broken.
		s.failed(w, r, a, errors.New("backend switched protocols without an upgrade request"))
		return
	}
	removeHopByHop(resp.Header)
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
	affinityCookie(h, a)
	w.WriteHeader(resp.StatusCode)
	if err := copyBody(w, resp.Body, resp.ContentLength < 0 || eventStream(resp.Header.Get("Content-Type"))); err != nil {
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

// writeHead writes r's request line and headers for the backend: r's own headers without the
// hop-by-hop ones and the client's forwarding headers, then this hop's forwarding headers
// and the request ID.
func (s *Server) writeHead(bw *bufio.Writer, r *http.Request, a *attempt) error {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if dropped(k) || listed(conn, k) {
			continue
		}
		for _, v := range vv {
			if v == "" && k == "User-Agent" {
				continue // ReverseProxy's way of sending none
			}
			header(bw, k, v)
		}
	}
	if hasToken(r.Header["Te"], "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	f := s.forwarded(r, a)
	bw.WriteString("X-Forwarded-For: ")
	if f.priorFor != "" {
		bw.WriteString(clean(f.priorFor))
		bw.WriteString(", ")
	}
	bw.WriteString(a.clientIP)
	bw.WriteString("\r\n")
	header(bw, "X-Forwarded-Proto", f.proto)
	header(bw, "X-Forwarded-Host", f.host)
	if f.port != "" {
		header(bw, "X-Forwarded-Port", f.port)
	}
	header(bw, "X-Real-Ip", f.realIP)
	bw.WriteString("Forwarded: ")
	if f.priorForwarded != "" {
		bw.WriteString(clean(f.priorForwarded))
		bw.WriteString(", ")
	}
	bw.WriteString("for=")
	bw.WriteString(forwardedFor(a.clientIP))
	bw.WriteString(";host=")
	bw.WriteString(quoteForwarded(r.Host))
	bw.WriteString(";proto=")
	bw.WriteString(clean(f.proto))
	bw.WriteString("\r\n")
	header(bw, "X-Request-Id", a.reqID)
	_, err := bw.WriteString("\r\n")
	return err
}

// header writes one header line; like Request.Write it turns CR and LF in the value into
// spaces, so that no value can start another header or request.
func header(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(clean(v))
	bw.WriteString("\r\n")
}

func clean(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return v
}

// listed reports whether header k is named in the Connection header's values (and so is
// hop-by-hop).
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// hasToken reports whether a comma-separated header has token (case-insensitive).
func hasToken(vv []string, token string) bool {
	return listed(vv, token)
}

// removeHopByHop deletes a response's hop-by-hop headers, those named in Connection too.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if tok = strings.TrimSpace(tok); tok != "" {
				h.Del(tok)
			}
		}
	}
	for _, k := range [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		delete(h, k)
	}
}

// eventStream reports a Content-Type of text/event-stream (parameters ignored).
func eventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
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
