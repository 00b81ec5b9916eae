package dataplane

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/metalgate/metalgate/proxy/table"
)

// Gateway API's CORS filter (table.CORS with Gateway set; proxy/table/cors.go states
// the semantics): the preflight answer, and the headers of the responses the route forwards.
// ingress-nginx's flavour is corsHeaders (policy.go).

// The CORS response headers (Fetch standard §3.2.3).
const (
	acAllowOrigin      = "Access-Control-Allow-Origin"
	acAllowCredentials = "Access-Control-Allow-Credentials"
	acAllowMethods     = "Access-Control-Allow-Methods"
	acAllowHeaders     = "Access-Control-Allow-Headers"
	acExposeHeaders    = "Access-Control-Expose-Headers"
	acMaxAge           = "Access-Control-Max-Age"
)

// gatewayPreflight answers a preflight (OPTIONS with Origin and Access-Control-Request-Method)
// on a route with Gateway API's CORS filter: 204, with the CORS headers only when the
// origin, the method and every header asked for are allowed. Allowed methods and headers of
// "*" are answered with the ones asked for, never "*".
func gatewayPreflight(w http.ResponseWriter, r *http.Request, c *table.CORS) {
	h, g := w.Header(), c.Gateway
	varyOrigin(h)
	origin, method := r.Header.Get("Origin"), r.Header.Get("Access-Control-Request-Method")
	headers, ok := g.AllowsHeaders(r.Header.Values("Access-Control-Request-Headers"))
	if !ok || !g.AllowsOrigin(origin) || !g.AllowsMethod(method) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Set(acAllowOrigin, origin)
	if c.AllowCredentials {
		h.Set(acAllowCredentials, "true")
	}
	switch {
	case g.AnyMethod:
		h.Set(acAllowMethods, method)
	case c.AllowMethods != "":
		h.Set(acAllowMethods, c.AllowMethods)
	}
	switch {
	case g.AnyHeader && len(headers) > 0:
		h.Set(acAllowHeaders, strings.Join(headers, ", "))
	case !g.AnyHeader && c.AllowHeaders != "":
		h.Set(acAllowHeaders, c.AllowHeaders)
	}
	if v := exposeHeaders(nil, c); v != "" { // a preflight has no headers of its own to expose
		h.Set(acExposeHeaders, v)
	}
	h.Set(acMaxAge, strconv.Itoa(c.MaxAge))
	w.WriteHeader(http.StatusNoContent)
}

// gatewayCORSHeaders writes the CORS headers of a response the route forwarded, for a
// request from origin ("" when it had none). The backend's own Access-Control-* headers were
// removed before (stripCORS): only the filter speaks CORS for its route.
func gatewayCORSHeaders(h http.Header, c *table.CORS, origin string) {
	varyOrigin(h)
	if origin == "" || !c.Gateway.AllowsOrigin(origin) {
		return
	}
	h.Set(acAllowOrigin, origin)
	if c.AllowCredentials {
		h.Set(acAllowCredentials, "true")
	}
	if v := exposeHeaders(h, c); v != "" {
		h.Set(acExposeHeaders, v)
	}
}

// exposeHeaders is the Access-Control-Expose-Headers value for a response whose headers are
// h: the list configured; for "*", "*" without credentials, and with them (where a browser
// reads "*" as a header's name) the names of h's headers a script cannot read without it.
func exposeHeaders(h http.Header, c *table.CORS) string {
	if !c.Gateway.AnyExpose {
		return c.ExposeHeaders
	}
	if !c.AllowCredentials {
		return "*"
	}
	var names []string
	for k := range h {
		if !safelistedResponseHeader(k) && !isCORSHeader(k) && !forbiddenResponseHeader(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// safelistedResponseHeader: the Fetch standard's CORS-safelisted response-header names,
// which scripts read without being told.
func safelistedResponseHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Cache-Control", "Content-Language", "Content-Length", "Content-Type", "Expires", "Last-Modified", "Pragma":
		return true
	}
	return false
}

// forbiddenResponseHeader: the names a script never reads, exposed or not (Fetch standard
// §2.2.2).
func forbiddenResponseHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Set-Cookie", "Set-Cookie2":
		return true
	}
	return false
}

// isCORSHeader reports whether k is an Access-Control-* header.
func isCORSHeader(k string) bool {
	const prefix = "access-control-"
	return len(k) > len(prefix) && strings.EqualFold(k[:len(prefix)], prefix)
}

// stripCORS removes a backend's Access-Control-* response headers.
func stripCORS(h http.Header) {
	for k := range h {
		if isCORSHeader(k) {
			delete(h, k)
		}
	}
}

// varyOrigin adds Origin to Vary unless listed (or Vary is "*"): the answer depends on it,
// so a cache must not give one origin's answer to another.
func varyOrigin(h http.Header) {
	if !hasToken(h["Vary"], "Origin") && !hasToken(h["Vary"], "*") {
		h.Add("Vary", "Origin")
	}
}
