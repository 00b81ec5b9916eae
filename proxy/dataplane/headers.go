package dataplane

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/metalgate/metalgate/proxy/table"
)

// The header policy, in one place for both forwarding paths. The direct path writes the
// outbound request head from outboundHeaders; ReverseProxy's Rewrite builds Out.Header from
// the same function. Responses from either path go through responseHeaders.
//
// Request headers a backend never sees from a client:
//   - hop-by-hop headers (RFC 9110 §7.6.1) and every header the Connection header names;
//   - Content-Length, Transfer-Encoding, Host and Trailer: the framing is this hop's own;
//   - Expect: the client's 100-continue is answered here (net/http sends 100 Continue when
//     the body is first read), and the body goes to the backend at once, as nginx does;
//   - the forwarding headers (X-Forwarded-*, X-Real-IP, Forwarded) and X-Request-Id, unless
//     the client is a trusted proxy (then they are extended, not replaced);
//   - a traceparent that is not valid W3C Trace Context, and a tracestate without a valid
//     traceparent (trace.go); valid ones pass unchanged;
//   - names with '_' (unless AllowUnderscoreHeaders): CGI and WSGI servers map '-' and '_'
//     to the same variable, so X_Forwarded_For would read as X-Forwarded-For behind them.
//     nginx drops them by default for the same reason;
//   - ingress-nginx's client-certificate headers (ssl-client-cert, ssl-client-verify,
//     ssl-client-subject-dn, ssl-client-issuer-dn, in any case, with '-' or '_'): a backend
//     written for ingress-nginx trusts "ssl-client-verify: SUCCESS", so only the proxy sets
//     them, on hosts with client-certificate authentication (clientauth.go, after the
//     client's headers); a client's own copy is a forgery and never reaches a backend or an
//     authentication service.

// hopByHop are the headers that describe one connection (RFC 9110 §7.6.1, and the ones
// httputil.ReverseProxy removes).
var hopByHop = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// dropped reports the request headers no backend receives as the client sent them.
func dropped(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "Forwarded",
		"X-Real-Ip", "X-Request-Id",
		"Traceparent", "Tracestate", // forwarded after validation (trace.go)
		"Host", "Content-Length", "Expect":
		return true
	}
	return clientCertHeader(k)
}

// clientCertHeaders are ingress-nginx's client-certificate headers, lower case with '-'.
var clientCertHeaders = [...]string{"ssl-client-cert", "ssl-client-verify", "ssl-client-subject-dn", "ssl-client-issuer-dn"}

// clientCertHeader reports whether k names one of clientCertHeaders, in any case and with
// '_' read as '-' (CGI and WSGI servers read them as the same variable).
func clientCertHeader(k string) bool {
	if len(k) < len("ssl-client-cert") || k[0]|0x20 != 's' {
		return false // the common case, without a loop
	}
	for _, h := range clientCertHeaders {
		if len(k) != len(h) {
			continue
		}
		same := true
		for i := 0; i < len(k) && same; i++ {
			c := k[i]
			if c == '_' {
				c = '-'
			} else if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			same = c == h[i]
		}
		if same {
			return true
		}
	}
	return false
}

// forwarding is what the forwarding headers of a request say: the values of a trusted
// proxy's headers extended with this hop, else this hop's alone.
type forwarding struct {
	priorFor       string // X-Forwarded-For from a trusted proxy, joined; empty otherwise
	priorForwarded string // Forwarded from a trusted proxy, joined; empty otherwise
	proto          string
	host           string
	port           string
	realIP         string // X-Real-Ip: "" when the client is unknown (none is sent)
}

func (s *Server) forwarded(in *http.Request, a *attempt) forwarding {
	f := forwarding{proto: "http", host: in.Host, realIP: a.clientIP, port: s.httpPort}
	if in.TLS != nil {
		f.proto, f.port = "https", s.httpsPort
	}
	if a.trusted {
		if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			f.priorFor = strings.Join(prior, ", ")
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			f.proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			f.host = v
		}
		if v := in.Header.Get("X-Forwarded-Port"); v != "" {
			f.port = v
		}
		switch ip := s.realClient(in, a); {
		case in.Header.Get("X-Real-Ip") != "":
			f.realIP = in.Header.Get("X-Real-Ip")
		case ip.IsValid():
			f.realIP = ip.String()
		default:
			f.realIP = "" // unknown (clientaddr.go): not the trusted proxy's own address
		}
		if prior := in.Header.Values("Forwarded"); len(prior) > 0 {
			f.priorForwarded = strings.Join(prior, ", ")
		}
	}
	return f
}

// outboundHeaders calls add with every header the backend receives for in, in the order
// they are written: the client's own headers that pass the policy above, Te: trailers when
// the client accepts trailers, then this hop's forwarding headers and the request ID.
// Values may hold CR or LF; the writer must clean them (Request.Write and header do).
func (s *Server) outboundHeaders(in *http.Request, a *attempt, emit func(k, v string)) {
	var edits *table.HeaderEdits
	switch {
	case a.target != nil: // the rule's edits and its backendRef's, merged
		if !a.target.RequestHeaders.Empty() {
			edits = &a.target.RequestHeaders
		}
	case a.route != nil:
		if p := &a.route.Options.Policy; !p.RequestHeaders.Empty() {
			edits = &p.RequestHeaders
		}
	}
	add := emit
	if edits != nil || a.authSet != nil {
		add = func(k, v string) {
			if edits != nil && edited(edits, k) { // removed, or replaced by a set below
				return
			}
			if _, ok := a.authSet[k]; ok { // the authentication service's, not the client's
				return
			}
			emit(k, v)
		}
	}
	conn := in.Header["Connection"]
	for k, vv := range in.Header {
		if dropped(k) || listed(conn, k) || !s.opts.AllowUnderscoreHeaders && strings.IndexByte(k, '_') >= 0 {
			continue
		}
		for _, v := range vv {
			add(k, v)
		}
	}
	if a.route != nil && a.route.Options.Policy.ForwardedPrefix != "" {
		add("X-Forwarded-Prefix", a.route.Options.Policy.ForwardedPrefix)
	}
	if hasToken(in.Header["Te"], "trailers") {
		add("Te", "trailers")
	}
	f := s.forwarded(in, a)
	if f.priorFor != "" {
		add("X-Forwarded-For", f.priorFor+", "+a.clientIP)
	} else {
		add("X-Forwarded-For", a.clientIP)
	}
	add("X-Forwarded-Proto", f.proto)
	add("X-Forwarded-Host", f.host)
	if f.port != "" {
		add("X-Forwarded-Port", f.port)
	}
	if f.realIP != "" {
		add("X-Real-Ip", f.realIP)
	}
	forwarded := "for=" + forwardedFor(a.clientIP) + ";host=" + quoteForwarded(in.Host) + ";proto=" + quoteForwarded(f.proto)
	if f.priorForwarded != "" {
		forwarded = f.priorForwarded + ", " + forwarded
	}
	add("Forwarded", forwarded)
	add("X-Request-Id", a.reqID)
	if a.clientCert != nil {
		a.clientCert.emit(add)
	}
	if a.traceparent != "" {
		add("Traceparent", a.traceparent)
		if a.tracestate != "" {
			add("Tracestate", a.tracestate)
		}
	}
	for k, vv := range a.authSet {
		for _, v := range vv {
			emit(k, v)
		}
	}
	if edits != nil {
		for _, h := range edits.Set {
			emit(h.Name, h.Value)
		}
		for _, h := range edits.Add {
			emit(h.Name, h.Value)
		}
	}
}

// upstreamHost is the Host header the backend sees: the client's, or the route's
// upstream-vhost.
func upstreamHost(in *http.Request, a *attempt) string {
	if a.route != nil && a.route.Options.Policy.UpstreamHost != "" {
		return a.route.Options.Policy.UpstreamHost
	}
	return in.Host
}

// responseHeaders applies the response policy to a backend's header h before it is copied
// to the client: hop-by-hop headers go (but for a 101, whose Connection and Upgrade
// ReverseProxy checks and passes on), the backend's Server header goes (responseWriter
// writes ours), the affinity cookie is added when the balancer chose the endpoint, then the
// route's response header edits and, for a request from origin, its CORS headers (a Gateway
// API CORS filter first removes the backend's own Access-Control-* headers).
func (s *Server) responseHeaders(h http.Header, status int, a *attempt, origin string) {
	if status != http.StatusSwitchingProtocols {
		removeHopByHop(h)
	}
	delete(h, "Server")
	affinityCookie(h, a)
	if a == nil || a.route == nil {
		return
	}
	p := &a.route.Options.Policy
	gatewayCORS := p.CORS != nil && p.CORS.Gateway != nil
	if gatewayCORS {
		stripCORS(h) // before the route's own edits, which may set them
	}
	respEdits := &p.ResponseHeaders
	if a.target != nil { // the rule's edits and its backendRef's, merged
		respEdits = &a.target.ResponseHeaders
	}
	if !respEdits.Empty() {
		editHeaders(h, respEdits)
	}
	switch {
	case gatewayCORS:
		gatewayCORSHeaders(h, p.CORS, origin)
	case p.CORS != nil && origin != "":
		corsHeaders(h, p.CORS, origin)
	}
}

// removeHopByHop deletes a message's hop-by-hop headers, those named in Connection too.
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
	for _, k := range hopByHop {
		delete(h, k)
	}
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

// forwardedFor is the client address as a Forwarded for= value: RFC 7239 §6 quotes and
// brackets IPv6.
func forwardedFor(ip string) string {
	if strings.Contains(ip, ":") {
		return `"[` + ip + `]"`
	}
	return ip
}

// quoteForwarded returns v as an RFC 7239 value: a token as it is, anything else quoted.
func quoteForwarded(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return strconv.Quote(v)
		}
	}
	return v
}

// eventStream reports a Content-Type of text/event-stream (parameters ignored).
func eventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}
