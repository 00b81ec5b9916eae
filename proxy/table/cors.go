package table

import (
	"slices"
	"strconv"
	"strings"
)

// GatewayCORS is what Gateway API's CORS filter adds to CORS. CORS.AllowMethods,
// AllowHeaders and ExposeHeaders hold the lists as sent (empty for "*" or unset),
// AllowCredentials and MaxAge their values.
type GatewayCORS struct {
	// AnyOrigin: allowOrigins is "*". Otherwise Origins are the patterns allowed (none: no
	// origin is).
	AnyOrigin bool
	Origins   []OriginPattern
	// AnyMethod: allowMethods is "*". Otherwise Methods besides GET, HEAD and POST, compared
	// case-sensitively (RFC 9110 §9.1).
	AnyMethod bool
	Methods   []string
	// AnyHeader: allowHeaders is "*". Otherwise Headers, compared case-insensitively.
	AnyHeader bool
	Headers   []string
	// AnyExpose: exposeHeaders lists "*".
	AnyExpose bool
}

// OriginPattern is one allowOrigins entry: scheme, host and port. With Wildcard, Host is the
// suffix after the "*" (".example.com"), or "" for any host.
type OriginPattern struct {
	Scheme   string // "http" or "https"
	Host     string // lower case
	Wildcard bool
	Port     int
}

// ParseOriginPattern parses an allowOrigins entry other than "*": http or https, a host of
// DNS labels (letters, digits, '-') whose leftmost label may be "*" (or a host of "*"
// alone), and an optional port.
func ParseOriginPattern(s string) (OriginPattern, bool) {
	scheme, host, port, ok := splitOrigin(s)
	if !ok || scheme != "http" && scheme != "https" {
		return OriginPattern{}, false
	}
	p := OriginPattern{Scheme: scheme, Port: port}
	if host == "*" {
		p.Wildcard = true
		return p, true
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, rest
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return OriginPattern{}, false
		}
	}
	p.Host = host
	if p.Wildcard {
		p.Host = "." + host
	}
	return p, true
}

// splitOrigin splits a serialized origin, scheme://host[:port] (RFC 6454 §6.2), into its
// scheme and host in lower case and its port (the scheme's well-known one when none is
// written; 0 for a scheme other than http and https). Anything more — a path, user
// information, a query, an empty label, "null" — is not an origin. The host may be an IPv6
// literal in brackets, or a name of letters, digits, '-', '_' and '*' in dot-separated labels.
func splitOrigin(s string) (scheme, host string, port int, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" || len(s) > 253+len("https://:65535") {
		return "", "", 0, false
	}
	scheme = strings.ToLower(scheme)
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", 0, false
		}
	}
	portText, hasPort := "", false
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", 0, false
		}
		host, rest = strings.ToLower(rest[:end+1]), rest[end+1:]
		if strings.Trim(host[1:end], "0123456789abcdef:.") != "" || end < 3 {
			return "", "", 0, false
		}
		if rest != "" {
			if portText, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return "", "", 0, false
			}
		}
	} else {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			rest, portText, hasPort = rest[:i], rest[i+1:], true
		}
		host = strings.ToLower(rest)
		for _, label := range strings.Split(host, ".") {
			if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_*") != "" {
				return "", "", 0, false
			}
		}
	}
	switch {
	case hasPort:
		n, err := strconv.Atoi(portText)
		if err != nil || n < 1 || n > 65535 || len(portText) > 5 || portText[0] < '0' || portText[0] > '9' {
			return "", "", 0, false
		}
		port = n
	case scheme == "http":
		port = 80
	case scheme == "https":
		port = 443
	}
	return scheme, host, port, true
}

// AllowsOrigin reports whether a request's Origin header is allowed (matchOrigin).
func (g *GatewayCORS) AllowsOrigin(origin string) bool {
	return matchOrigin(g.AnyOrigin, g.Origins, origin)
}

// matchOrigin is the one origin matcher of both CORS flavours: whether origin is allowed by
// any (every origin) or one of patterns. "null" and anything that is not a serialized origin
// never are; a "*" in the request's host matches nothing but itself in an exact pattern,
// never a wildcard's labels.
func matchOrigin(any bool, patterns []OriginPattern, origin string) bool {
	scheme, host, port, ok := splitOrigin(origin)
	if !ok || strings.Contains(host, "*") {
		return false
	}
	if any {
		return true
	}
	for _, p := range patterns {
		if p.Scheme != scheme || p.Port != port {
			continue
		}
		switch {
		case !p.Wildcard && host == p.Host,
			p.Wildcard && p.Host == "",
			p.Wildcard && len(host) > len(p.Host) && strings.HasSuffix(host, p.Host):
			return true
		}
	}
	return false
}

// AllowsMethod reports whether a preflight's Access-Control-Request-Method is allowed: the
// CORS-safelisted GET, HEAD and POST always (Fetch standard §2.2.1), others when listed.
func (g *GatewayCORS) AllowsMethod(m string) bool {
	if !ValidHeaderName(m) { // a method is a token (RFC 9110 §9.1), as a header name is
		return false
	}
	switch m {
	case "GET", "HEAD", "POST":
		return true
	}
	return g.AnyMethod || slices.Contains(g.Methods, m)
}

// AllowsHeaders splits a preflight's Access-Control-Request-Headers values into names and
// reports whether each is allowed; the names (trimmed, empty elements dropped) are what an
// answer for allowHeaders "*" echoes.
func (g *GatewayCORS) AllowsHeaders(values []string) ([]string, bool) {
	var names []string
	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if !ValidHeaderName(n) || !g.AnyHeader && !slices.ContainsFunc(g.Headers, func(h string) bool { return strings.EqualFold(h, n) }) {
				return nil, false
			}
			names = append(names, n)
		}
	}
	return names, true
}
