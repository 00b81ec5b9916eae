package dataplane

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/metalgate/metalgate/proxy/table"
)

// The route policy (table.Policy), applied here for both forwarding paths. Before the
// request is forwarded, in this order: a refused route (403: a protection it asks for cannot
// be enforced), the address lists (403), the rate limit (429), the fixed redirect, the
// redirect to HTTPS, app-root, a CORS preflight (204), external then basic authentication
// (401; 429 or 503 when the namespace's password checks are busy, authslots.go). What the backend
// sees (rewritten path, Host, X-Forwarded-Prefix, header edits) is written by the header
// policy (headers.go) and the path rewrite below; what the client sees (response header
// edits, CORS headers) by responseHeaders.

// answer runs the checks and redirects of route's policy. It reports whether it answered the
// request itself, in which case nothing is forwarded.
func (s *Server) answer(w *responseWriter, r *http.Request, route *table.Route, a *attempt) bool {
	p := &route.Options.Policy
	if p.Refuse != "" {
		// A protection the proxy cannot enforce: closed, never open (the Warning says why).
		s.limitHit(limitRefusedRoute)
		http.Error(w, "forbidden", http.StatusForbidden)
		return true
	}
	if len(p.Allow) > 0 || len(p.Deny) > 0 {
		if !allowed(a.realIP, p.Allow, p.Deny) {
			s.limitHit(limitSourceRange)
			http.Error(w, "forbidden", http.StatusForbidden)
			return true
		}
	}
	if p.RateLimit != nil {
		ns, owner := limitOwner(route)
		if wait, ok := s.limits.take(ns, owner, a.realIP, p.RateLimit); !ok {
			s.limitHit(limitRate)
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return true
		}
		if p.RateLimit.Connections > 0 {
			a.release = s.limits.enter(ns, owner, a.realIP, p.RateLimit)
			if a.release == nil {
				s.limitHit(limitRate)
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many requests in flight", http.StatusTooManyRequests)
				return true
			}
		}
	}
	if rd := p.Redirect; rd != nil {
		http.Redirect(w, r, rd.URL, rd.Code)
		return true
	}
	if rr := p.RequestRedirect; rr != nil {
		loc, ok := redirectLocation(r, route, rr)
		if !ok {
			s.badRedirectHost(w)
			return true
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(rr.Code)
		return true
	}
	if s.redirectsToHTTPS(r, route, a) {
		host, ok := redirectHost(r, route)
		if !ok {
			s.badRedirectHost(w)
			return true
		}
		if s.httpsPort != "443" {
			host = net.JoinHostPort(host, s.httpsPort)
		} else {
			host = bracketed(host)
		}
		u := url.URL{Scheme: "https", Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), p.HTTPSRedirect)
		return true
	}
	if p.AppRoot != "" && r.URL.Path == "/" {
		http.Redirect(w, r, p.AppRoot, http.StatusFound)
		return true
	}
	if c := p.CORS; c != nil && r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		if c.Gateway != nil {
			gatewayPreflight(w, r, c)
			return true
		}
		h := w.Header()
		corsHeaders(h, c, r.Header.Get("Origin"))
		if h.Get(acAllowOrigin) != "" {
			h.Set(acAllowMethods, c.AllowMethods)
			h.Set(acAllowHeaders, c.AllowHeaders)
			h.Set(acMaxAge, strconv.Itoa(c.MaxAge))
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	if ea := p.ExternalAuth; ea != nil && s.externalAuth(w, r, ea, a) {
		return true
	}
	if ba := p.BasicAuth; ba != nil {
		user, pass, hasAuth := r.BasicAuth()
		ns, _ := limitOwner(route) // password checks are counted per namespace (authslots.go)
		ok, err := s.auth.check(r.Context(), ns, ba, user, pass, hasAuth)
		switch {
		case errors.Is(err, errAuthQueueFull):
			s.limitHit(limitAuthQueue)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many authentication checks waiting", http.StatusTooManyRequests)
			return true
		case errors.Is(err, errAuthWait):
			s.limitHit(limitAuthWait)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "authentication busy", http.StatusServiceUnavailable)
			return true
		case err != nil:
			return true // the client is gone
		}
		if !ok {
			s.limitHit(limitAuth)
			w.Header().Set("WWW-Authenticate", `Basic realm=`+strconv.Quote(ba.Realm)+`, charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return true
		}
	}
	return false
}

// redirectsToHTTPS reports whether route answers r with a redirect to https:// (ssl-redirect,
// force-ssl-redirect).
func (s *Server) redirectsToHTTPS(r *http.Request, route *table.Route, a *attempt) bool {
	p := &route.Options.Policy
	return p.HTTPSRedirect != 0 && (!p.HTTPSOnlyTLS || route.TLS) && s.forwarded(r, a).proto != "https"
}

// limitOwner is the namespace and the source (kind, namespace, name) of the object that
// defined route: rate limits are kept per namespace and per object.
func limitOwner(route *table.Route) (ns, name string) {
	return route.Source.Namespace, route.Source.String()
}

// allowed reports whether ip passes the lists: not in deny, and in allow when allow is set.
func allowed(ip netip.Addr, allow, deny []netip.Prefix) bool {
	if !ip.IsValid() {
		return false
	}
	for _, p := range deny {
		if p.Contains(ip) {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// corsHeaders adds the CORS response headers for a request from origin, when the policy
// allows that origin ("*" answers "*"; a listed origin, wildcards included, is echoed).
func corsHeaders(h http.Header, c *table.CORS, origin string) {
	allow := ""
	switch {
	case slices.Contains(c.AllowOrigins, "*"):
		allow = "*"
	case c.AllowsOrigin(origin):
		allow = origin
	}
	if allow == "" {
		return
	}
	h.Set(acAllowOrigin, allow)
	if allow != "*" {
		h.Add("Vary", "Origin")
	}
	if c.AllowCredentials {
		h.Set(acAllowCredentials, "true")
	}
	if c.ExposeHeaders != "" {
		h.Set(acExposeHeaders, c.ExposeHeaders)
	}
}

// redirectLocation is the Location of a RequestRedirect for r, which route matched: each part
// the request's own unless rr sets it (the request's host as the redirect policy allows it,
// else false); the port left out when it is the scheme's well-known one (Gateway API: no
// port for http on 80 or https on 443).
func redirectLocation(r *http.Request, route *table.Route, rr *table.RequestRedirect) (string, bool) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host, port := rr.Host, ""
	if host == "" {
		h, ok := redirectHost(r, route)
		if !ok {
			return "", false
		}
		host = h
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			port = strconv.Itoa(int(ap.Port())) // the listener's port
		}
	}
	if rr.Scheme != "" {
		scheme, port = rr.Scheme, "" // the new scheme's well-known port
	}
	if rr.Port != 0 {
		port = strconv.Itoa(rr.Port)
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else {
		host = bracketed(host)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	switch {
	case rr.FullPath != nil:
		u.Path, u.RawPath = *rr.FullPath, ""
	case rr.PrefixPath != nil:
		u.Path, u.RawPath = replacePrefix(route, *rr.PrefixPath, r.URL.Path), ""
	}
	return u.String(), true
}

// replacePrefix is path with the prefix route matched replaced by target (an Exact route's
// whole path is the prefix).
func replacePrefix(route *table.Route, target, path string) string {
	if route.PathType == "Exact" {
		return target
	}
	rest := strings.TrimPrefix(path, strings.TrimRight(route.Path, "/"))
	out := strings.TrimRight(target, "/") + rest
	if out == "" || out[0] != '/' {
		out = "/" + out
	}
	return out
}

// rewritePath applies the route's rewrite to r's path (the query is kept): the matched prefix
// replaced by the target, or with a regex route the whole path replaced by the target with
// $1…$9 from the route's groups. The result is checked by rewrittenPath; an error leaves r
// as it was and means 400.
func (p pathPolicy) rewritePath(r *http.Request, route *table.Route) error {
	rw := route.Options.Policy.Rewrite
	if rw == nil {
		return nil
	}
	path := r.URL.Path
	var out string
	switch {
	case rw.Regex && route.Regex != nil:
		m := route.Regex.FindStringSubmatchIndex(path)
		if m == nil {
			return nil
		}
		out = string(route.Regex.ExpandString(nil, rw.Target, path, m))
	case route.PathType == "Exact":
		out = rw.Target
	default:
		out = replacePrefix(route, rw.Target, path)
	}
	out, err := p.rewrittenPath(out)
	if err != nil {
		return err
	}
	r.URL.Path, r.URL.RawPath = out, ""
	return nil
}

var (
	errRewriteDotSegment = errors.New("the rewritten path holds a dot-segment")
	errRewriteAuthority  = errors.New("the rewritten path begins with '//'")
)

// rewrittenPath checks and tidies a rewritten path (decoded, as URL.Path). The client's path
// was normalised before routing, but a rewrite builds a new one: a group glued to the
// target's text ("/file-(.*)" to "/static/$1" with "/file-../secret") or a group that starts
// with '/' can form dot-segments or a leading "//" that were not in the normalised path.
// Resolving such a path here would not help — "/static/../secret" is "/secret", the very
// path the rewrite's target was meant to keep the client away from — so it is refused:
//   - a "." or ".." segment, with '/' or '\' as the separator (a '\' or an encoded slash
//     kept by EscapedSlashesKeep is one to some backends), is refused;
//   - runs of '/' become one (MergeSlashes);
//   - a path still beginning with "//" (MergeSlashes off) is refused: some backends read it
//     as "//host/…", a network-path reference;
//   - a path not beginning with '/' gets one.
func (p pathPolicy) rewrittenPath(out string) (string, error) {
	if out == "" || out[0] != '/' {
		out = "/" + out
	}
	for rest := out[1:]; ; {
		i := strings.IndexAny(rest, "/\\")
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if seg == "." || seg == ".." {
			return "", errRewriteDotSegment
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	if p.mergeSlashes && strings.Contains(out, "//") {
		var b strings.Builder
		b.Grow(len(out))
		for i := 0; i < len(out); i++ {
			if out[i] == '/' && i > 0 && out[i-1] == '/' {
				continue
			}
			b.WriteByte(out[i])
		}
		out = b.String()
	}
	if strings.HasPrefix(out, "//") {
		return "", errRewriteAuthority
	}
	return out, nil
}

// editHeaders applies header edits to h: remove, then set, then add.
func editHeaders(h http.Header, e *table.HeaderEdits) {
	for _, n := range e.Remove {
		delete(h, n)
	}
	for _, hd := range e.Set {
		h[hd.Name] = []string{hd.Value}
	}
	for _, hd := range e.Add {
		h[hd.Name] = append(h[hd.Name], hd.Value)
	}
}

// edited reports whether the request header edits replace or remove header k.
func edited(e *table.HeaderEdits, k string) bool {
	for _, n := range e.Remove {
		if n == k {
			return true
		}
	}
	for _, hd := range e.Set {
		if hd.Name == k {
			return true
		}
	}
	return false
}

// canaryChosen decides whether a request goes to the canary, as ingress-nginx does: the
// header first ("always", "never", or the configured value or pattern; another value is
// ignored), then the cookie ("always", "never"), then the weight.
func canaryChosen(r *http.Request, c *table.CanaryRule) bool {
	if c.Header != "" {
		if v := r.Header.Get(c.Header); v != "" {
			switch {
			case c.HeaderValue != "":
				if v == c.HeaderValue {
					return true
				}
			case c.HeaderPattern != nil:
				if c.HeaderPattern.MatchString(v) {
					return true
				}
			case v == "always":
				return true
			case v == "never":
				return false
			}
		}
	}
	if c.Cookie != "" {
		if ck, err := r.Cookie(c.Cookie); err == nil {
			switch ck.Value {
			case "always":
				return true
			case "never":
				return false
			}
		}
	}
	return c.Weight > 0 && rand.IntN(c.WeightTotal) < c.Weight
}
