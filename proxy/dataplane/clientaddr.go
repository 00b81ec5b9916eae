package dataplane

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// The client address: who a request is from, for the allow and deny lists, the rate limits,
// X-Real-Ip and the access log (docs/proxy.md, "Client address").
//
//   - A connection from an address that is not a trusted proxy: the connection's address
//     (the PROXY protocol's, when the listener takes it from that source).
//   - A connection from a trusted proxy: X-Forwarded-For, every header line joined, walked
//     from the right; the first hop that is not itself a trusted proxy is the client (when
//     every hop is trusted, the left-most one).
//   - A hop on that walk that is missing or does not parse makes the client unknown (the
//     zero netip.Addr). It is never taken to be the trusted proxy itself: an allow-list that
//     covers a load balancer's range would then admit everyone behind it. Unknown is denied
//     by allow and deny lists alike and shares one rate-limit key.
//
// A hop is an address as load balancers write it: "192.0.2.1", "192.0.2.1:5678",
// "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:443", with spaces around; an IPv4-mapped
// IPv6 address is its IPv4 address. Anything else ("unknown", an obfuscated RFC 7239
// identifier, an address with a zone, a bad port) does not parse. The Forwarded header
// (RFC 7239) is passed on to the backend but never decides the client.

// client returns the connection's address (host of RemoteAddr) and whether it is a trusted
// proxy.
func (s *Server) client(r *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(s.opts.TrustedProxies) == 0 {
		return host, false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host, false
	}
	return host, s.trustedAddr(ip.Unmap())
}

// realClient is the client address of r (the rules above); the zero Addr when it is
// unknown.
func (s *Server) realClient(r *http.Request, a *attempt) netip.Addr {
	ip, err := netip.ParseAddr(a.clientIP)
	if err != nil {
		return netip.Addr{}
	}
	ip = ip.Unmap()
	if !a.trusted {
		return ip
	}
	lines := r.Header.Values("X-Forwarded-For")
	if len(lines) == 0 {
		return netip.Addr{} // a trusted proxy that names no client
	}
	hops := strings.Split(strings.Join(lines, ","), ",")
	var client netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		ip, ok := parseHop(hops[i])
		if !ok {
			return netip.Addr{}
		}
		if !s.trustedAddr(ip) {
			return ip
		}
		client = ip // a trusted proxy too: look further left
	}
	return client
}

// parseHop parses one X-Forwarded-For hop (the forms above).
func parseHop(h string) (netip.Addr, bool) {
	h = strings.TrimSpace(h)
	host := h
	switch {
	case strings.HasPrefix(h, "["): // "[v6]" or "[v6]:port"
		end := strings.IndexByte(h, ']')
		if end < 0 || !validPort(h[end+1:]) {
			return netip.Addr{}, false
		}
		host = h[1:end]
	case strings.Count(h, ":") == 1: // "v4:port"
		var port string
		host, port, _ = strings.Cut(h, ":")
		if !validPort(":" + port) {
			return netip.Addr{}, false
		}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" || strings.HasPrefix(h, "[") && !ip.Is6() || strings.Count(h, ":") == 1 && !ip.Is4() {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// validPort reports whether s is "" or ":" and a port number.
func validPort(s string) bool {
	if s == "" {
		return true
	}
	if s[0] != ':' || len(s) < 2 || len(s) > 6 {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(s[1:])
	return err == nil && n <= 65535
}

func (s *Server) trustedAddr(ip netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
