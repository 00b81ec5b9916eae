package dataplane

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/metalgate/metalgate/proxy/table"
)

// The redirect policy (docs/proxy.md, "Redirect policy"). A Location that the proxy builds
// from the request (ssl-redirect and force-ssl-redirect, a Gateway RequestRedirect without
// a hostname, auth-signin's $host and rd=) names only a host the route serves:
//   - a rule with an exact host: that host;
//   - a wildcard rule ("*.example.com"): the request's host, when it is a valid host name
//     under the wildcard's domain (one label more for an Ingress; one or more for a Gateway
//     API route, as each matches);
//   - a host-less rule (and a default backend): the request's host, when it is a valid host
//     name or IP address literal.
//
// The port, when the Host has one, must be a port number. A Host that fails this gets 400
// and no Location: '/', '@', '\', '%', spaces and every other byte that has no place in a
// host name could make the Location name another host, or another URL altogether. Redirects
// to a fixed target (permanent-redirect, temporary-redirect, app-root, a RequestRedirect
// with a hostname) do not use the Host.

// redirectHost returns the host (lowercase, without brackets or port) that a Location built
// for r on route may name, or false.
func redirectHost(r *http.Request, route *table.Route) (string, bool) {
	hp, host, rest := r.Host, r.Host, ""
	literal := false
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", false
		}
		ip, err := netip.ParseAddr(hp[1:end])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", false
		}
		host, rest, literal = ip.String(), hp[end+1:], true
	} else if i := strings.IndexByte(hp, ':'); i >= 0 {
		host, rest = hp[:i], hp[i:]
	}
	if rest != "" && (!validPort(rest) || rest == ":") {
		return "", false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !literal {
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
			literal = true
		} else if !table.ValidHostname(host) {
			return "", false
		}
	}
	switch {
	case route == nil || route.Host == "":
		return host, true
	case strings.HasPrefix(route.Host, "*."):
		// An Ingress wildcard covers one label; a Gateway API one, one or more.
		under, found := strings.CutSuffix(host, route.Host[1:])
		return host, !literal && found && under != "" && (route.Source.IsGateway() || !strings.Contains(under, "."))
	default:
		return route.Host, true // the request's Host matched it
	}
}

// badRedirectHost answers a request whose Host no redirect may name.
func (s *Server) badRedirectHost(w http.ResponseWriter) {
	s.limitHit(limitRedirectHost)
	http.Error(w, "bad Host header for a redirect: want a host name the route serves, with an optional port", http.StatusBadRequest)
}

// bracketed is host as a URL's host part: an IPv6 literal in brackets.
func bracketed(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// redirectScheme is the scheme the client came with, as a Location may name it: https or
// http, whatever else a trusted proxy's X-Forwarded-Proto says.
func redirectScheme(proto string) string {
	if strings.EqualFold(proto, "https") {
		return "https"
	}
	return "http"
}

// signinURL fills the variables of an auth-signin URL (table.SigninVariableAt), each escaped
// for where it stands: as it is in the scheme and host (where only $scheme and $host are
// whole), path-escaped in the path (a '?' or '#' of the value cannot end it),
// query-escaped in the query and fragment (a '&' or '=' of the value cannot add a
// parameter, such as a second rd=). Without variables it adds rd= with the URL the client
// asked for. host is the request's host as the redirect policy allows it.
func signinURL(signin string, r *http.Request, scheme, host string) string {
	hostport := bracketed(host)
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		hostport = net.JoinHostPort(host, port)
	}
	original := scheme + "://" + hostport + r.URL.RequestURI()
	if !strings.Contains(signin, "$") {
		sep := "?"
		if strings.Contains(signin, "?") {
			sep = "&"
		}
		return signin + sep + "rd=" + url.QueryEscape(original)
	}
	const (
		inAuthority = iota // scheme and host
		inPath
		inQuery // query and fragment
	)
	where := inAuthority
	start := strings.Index(signin, "://") + len("://") // validated: an absolute URL
	var b strings.Builder
	for i := 0; i < len(signin); {
		c := signin[i]
		switch {
		case i >= start && where == inAuthority && c == '/':
			where = inPath
		case where != inQuery && (c == '?' || c == '#'):
			where = inQuery
		}
		name := table.SigninVariableAt(signin[i:])
		if name == "" {
			b.WriteByte(c)
			i++
			continue
		}
		i += len(name)
		var v string
		switch name {
		case table.SigninScheme:
			v = scheme
		case table.SigninHost, table.SigninBestHTTPHost:
			v = hostport
		case table.SigninRequestURI:
			v = r.URL.RequestURI()
			if where == inAuthority && i > start { // "https://login.example$request_uri"
				where = inPath
			}
		case table.SigninEscapedRequestURI:
			b.WriteString(url.QueryEscape(r.URL.RequestURI())) // escaped already, wherever it is
			continue
		}
		switch where {
		case inAuthority:
			if name != table.SigninScheme && name != table.SigninHost && name != table.SigninBestHTTPHost {
				v = url.QueryEscape(v)
			}
		case inPath:
			v = strings.ReplaceAll(url.PathEscape(v), "%2F", "/")
		case inQuery:
			v = url.QueryEscape(v)
		}
		b.WriteString(v)
	}
	return b.String()
}
