package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The access log: one JSON object per line per request (or per sampled request), written to
// AccessLog (stdout in `metalgate proxy`) from a buffer by a goroutine of its own, so that a
// slow or stuck output never holds a request: when the buffer is full, lines are dropped and
// counted (metalgate_proxy_access_log_dropped_total). Every string a client chose (host,
// path, user agent, method) is escaped as JSON (control characters as \u00XX, invalid UTF-8
// as U+FFFD) and cut to a bounded length, so a hostile request is still exactly one valid
// line.

// accessLogFields lists the access log's fields, in the order they are written.
var accessLogFields = [...]string{"time", "client", "peer", "method", "host", "path", "protocol", "status",
	"bytes_in", "bytes_out", "duration", "namespace", "source_kind", "source", "service", "upstream",
	"upstream_status", "upstream_duration", "retries", "user_agent", "request_id", "trace_id"}

// AccessLogFieldNames lists the access log's fields, in the order they are written.
func AccessLogFieldNames() []string { return append([]string(nil), accessLogFields[:]...) }

// The field indices of accessLogFields.
const (
	fieldTime = iota
	fieldClient
	fieldPeer
	fieldMethod
	fieldHost
	fieldPath
	fieldProtocol
	fieldStatus
	fieldBytesIn
	fieldBytesOut
	fieldDuration
	fieldNamespace
	fieldSourceKind
	fieldSource
	fieldService
	fieldUpstream
	fieldUpstreamStatus
	fieldUpstreamDuration
	fieldRetries
	fieldUserAgent
	fieldRequestID
	fieldTraceID
)

// Caps, in bytes, of the strings a client chose.
const (
	maxLogHost      = 256
	maxLogPath      = 2048
	maxLogUserAgent = 256
	maxLogMethod    = 32
	// accessLogBuffer is how many bytes of lines may wait for the output.
	accessLogBuffer = 1 << 20
)

// fieldSet is a set of accessLogFields indices.
type fieldSet uint32

func (f fieldSet) has(i int) bool { return f&(1<<i) != 0 }

// parseAccessLogFields reads a field selection: names of accessLogFields (nil: all).
func parseAccessLogFields(names []string) (fieldSet, error) {
	if len(names) == 0 {
		return 1<<len(accessLogFields) - 1, nil
	}
	var f fieldSet
	for _, n := range names {
		i := -1
		for j, v := range accessLogFields {
			if strings.TrimSpace(n) == v {
				i = j
			}
		}
		if i < 0 {
			return 0, fmt.Errorf("access log field %q: unknown (want some of %s)", n, strings.Join(accessLogFields[:], ", "))
		}
		f |= 1 << i
	}
	return f, nil
}

// accessLog writes lines to w without ever blocking a request.
type accessLog struct {
	w       io.Writer
	fields  fieldSet
	query   bool          // the path is logged with its query
	sample  float64       // fraction of requests logged
	n       atomic.Uint64 // requests seen (sampling)
	dropped func(lines int)
	limit   int

	mu       sync.Mutex
	buf      []byte // lines waiting for the writer
	lines    int    // in buf
	spare    []byte // the buffer the writer last wrote, for reuse
	writing  bool   // a writer goroutine runs
	idle     *sync.Cond
	linebufs sync.Pool // of *[]byte: buffers to build lines in

	second atomic.Pointer[logSecond] // the last second a line's time was in
}

// logSecond is one second's timestamp up to its fraction ("2006-01-02T15:04:05."), formatted
// once and shared by every line logged in that second: only the microseconds are formatted
// per line.
type logSecond struct {
	unix   int64
	prefix []byte
}

// appendTime appends t as "2006-01-02T15:04:05.000000Z" (UTC, microseconds), the same text as
// t.UTC().AppendFormat with that layout.
func (l *accessLog) appendTime(b []byte, t time.Time) []byte {
	sec := t.Unix()
	c := l.second.Load()
	if c == nil || c.unix != sec {
		c = &logSecond{unix: sec, prefix: time.Unix(sec, 0).UTC().AppendFormat(nil, "2006-01-02T15:04:05.")}
		l.second.Store(c)
	}
	b = append(b, c.prefix...)
	us := t.Nanosecond() / 1000
	var digits [6]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + us%10)
		us /= 10
	}
	b = append(b, digits[:]...)
	return append(b, 'Z')
}

func newAccessLog(w io.Writer, fields fieldSet, query bool, sample float64, dropped func(int)) *accessLog {
	l := &accessLog{w: w, fields: fields, query: query, sample: sample, dropped: dropped, limit: accessLogBuffer}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// sampled reports whether this request is logged: a fraction sample of requests, evenly
// spread (the n-th request is logged when floor(n*sample) moves).
func (l *accessLog) sampled() bool {
	if l.sample >= 1 {
		return true
	}
	n := l.n.Add(1)
	return uint64(float64(n)*l.sample) != uint64(float64(n-1)*l.sample)
}

// write queues one line (ending in '\n'), or drops it when the queue is full. A writer
// goroutine runs while lines wait, and ends when none does.
func (l *accessLog) write(line []byte) {
	l.mu.Lock()
	if len(l.buf)+len(line) > l.limit {
		l.mu.Unlock()
		l.dropped(1)
		return
	}
	l.buf = append(l.buf, line...)
	l.lines++
	start := !l.writing
	l.writing = true
	l.mu.Unlock()
	if start {
		go l.drain()
	}
}

func (l *accessLog) drain() {
	l.mu.Lock()
	for len(l.buf) > 0 {
		b, n := l.buf, l.lines
		l.buf, l.lines, l.spare = l.spare[:0], 0, nil
		l.mu.Unlock()
		_, err := l.w.Write(b)
		if err != nil {
			l.dropped(n)
		}
		l.mu.Lock()
		if cap(b) <= l.limit*2 {
			l.spare = b[:0]
		}
	}
	l.writing = false
	l.idle.Broadcast()
	l.mu.Unlock()
}

// flush waits until every queued line is written (tests, and shutdown).
func (l *accessLog) flush() {
	l.mu.Lock()
	for l.writing {
		l.idle.Wait()
	}
	l.mu.Unlock()
}

// logRequest writes r's access log line.
func (s *Server) logRequest(start time.Time, elapsed time.Duration, r *http.Request, a *attempt, rw *responseWriter) {
	l := s.alog
	bp, _ := l.linebufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := (*bp)[:0]
	sep := byte('{')
	key := func(i int) bool {
		if !l.fields.has(i) {
			return false
		}
		b = append(b, sep, '"')
		b = append(b, accessLogFields[i]...)
		b = append(b, '"', ':')
		sep = ','
		return true
	}
	if key(fieldTime) {
		b = append(b, '"')
		b = l.appendTime(b, start)
		b = append(b, '"')
	}
	if key(fieldClient) {
		// The address every rule judges (the PROXY protocol's, or a trusted proxy's
		// X-Forwarded-For); peer is the connection's. A request refused before routing has
		// not had its client read yet.
		if a.clientIP == "" {
			a.clientIP, a.trusted = s.client(r)
		}
		if ip := s.realClient(r, a); ip.IsValid() {
			b = append(b, '"')
			b = ip.AppendTo(b)
			b = append(b, '"')
		} else {
			b = appendJSONString(b, r.RemoteAddr, maxLogHost)
		}
	}
	if key(fieldPeer) {
		b = appendJSONString(b, r.RemoteAddr, maxLogHost)
	}
	if key(fieldMethod) {
		b = appendJSONString(b, r.Method, maxLogMethod)
	}
	if key(fieldHost) {
		b = appendJSONString(b, r.Host, maxLogHost)
	}
	if key(fieldPath) {
		// The request target as the client sent it, before normalisation and rewrites.
		p := r.RequestURI
		if i := strings.IndexByte(p, '?'); i >= 0 && !l.query {
			p = p[:i]
		}
		b = appendJSONString(b, p, maxLogPath)
	}
	if key(fieldProtocol) {
		b = appendJSONString(b, r.Proto, maxLogMethod)
	}
	if key(fieldStatus) {
		b = strconv.AppendInt(b, int64(rw.code), 10)
	}
	if key(fieldBytesIn) {
		b = strconv.AppendInt(b, a.bytesIn(), 10)
	}
	if key(fieldBytesOut) {
		b = strconv.AppendInt(b, rw.bytes, 10)
	}
	if key(fieldDuration) {
		b = strconv.AppendFloat(b, elapsed.Seconds(), 'f', 6, 64)
	}
	id := a.routeIdentity()
	for i, v := range id {
		if key(fieldNamespace + i) {
			b = appendJSONString(b, v, maxLogHost)
		}
	}
	upstream := ""
	if a.chosen != nil {
		upstream = a.chosen.Addr
	}
	if key(fieldUpstream) {
		b = appendJSONString(b, upstream, maxLogHost)
	}
	if key(fieldUpstreamStatus) {
		b = strconv.AppendInt(b, int64(a.upStatus), 10)
	}
	if key(fieldUpstreamDuration) {
		b = strconv.AppendFloat(b, a.upstreamTotal().Seconds(), 'f', 6, 64)
	}
	if key(fieldRetries) {
		b = strconv.AppendInt(b, int64(max(len(a.tried)-1, 0)), 10)
	}
	if key(fieldUserAgent) {
		b = appendJSONString(b, r.Header.Get("User-Agent"), maxLogUserAgent)
	}
	if key(fieldRequestID) {
		b = appendJSONString(b, rw.reqID, maxLogHost)
	}
	if key(fieldTraceID) {
		b = appendJSONString(b, traceID(a.traceparent), maxLogHost)
	}
	if sep == '{' {
		b = append(b, '{')
	}
	b = append(b, '}', '\n')
	l.write(b)
	*bp = b
	l.linebufs.Put(bp)
}

// appendJSONString appends s, cut to limit bytes, as a JSON string: '"' and '\' escaped,
// control characters and U+2028/U+2029 as \uXXXX, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string, limit int) []byte {
	const hex = "0123456789abcdef"
	if len(s) > limit {
		s = s[:limit]
	}
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
