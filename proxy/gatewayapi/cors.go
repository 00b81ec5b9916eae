package gatewayapi

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// DefaultCORSMaxAge is Access-Control-Max-Age when maxAge is unset (the spec's default).
const DefaultCORSMaxAge = 5

// corsMethods are the methods allowMethods takes (HTTPMethodWithWildcard's enum).
var corsMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true}

// gatewayCORS maps an HTTPRoute CORS filter onto Policy.CORS. why, when not "", names the
// field refused and the reason ("cors.allowOrigins[2]: …").
func gatewayCORS(f *gatewayv1.HTTPCORSFilter) (*table.CORS, string) {
	if f == nil {
		return nil, "cors: the filter's settings are missing"
	}
	g := &table.GatewayCORS{}
	c := &table.CORS{Gateway: g, AllowCredentials: f.AllowCredentials != nil && *f.AllowCredentials, MaxAge: int(f.MaxAge)}
	switch {
	case f.MaxAge < 0:
		return nil, fmt.Sprintf("cors.maxAge: %d is not a number of seconds, at least 1", f.MaxAge)
	case f.MaxAge == 0:
		c.MaxAge = DefaultCORSMaxAge
	}
	for i, o := range f.AllowOrigins {
		field := fmt.Sprintf("cors.allowOrigins[%d]", i)
		c.AllowOrigins = append(c.AllowOrigins, string(o))
		if o == "*" {
			if len(f.AllowOrigins) > 1 {
				return nil, field + ": * cannot be listed with other origins"
			}
			g.AnyOrigin = true
			continue
		}
		p, ok := table.ParseOriginPattern(string(o))
		if !ok {
			return nil, fmt.Sprintf("%s: %q is not an origin: http:// or https://, a host whose leftmost label may be *, an optional port", field, o)
		}
		g.Origins = append(g.Origins, p)
	}
	var why string
	if g.Methods, g.AnyMethod, why = corsList("cors.allowMethods", f.AllowMethods, true,
		func(m string) bool { return corsMethods[m] }, "a method (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH or *)"); why != "" {
		return nil, why
	}
	if g.Headers, g.AnyHeader, why = corsList("cors.allowHeaders", f.AllowHeaders, true, table.ValidHeaderName, "a header name"); why != "" {
		return nil, why
	}
	// "*" among exposeHeaders exposes every header: the names listed beside it add nothing.
	expose, anyExpose, why := corsList("cors.exposeHeaders", f.ExposeHeaders, false, table.ValidHeaderName, "a header name")
	if why != "" {
		return nil, why
	}
	g.AnyExpose = anyExpose
	c.AllowMethods, c.AllowHeaders = strings.Join(g.Methods, ", "), strings.Join(g.Headers, ", ")
	if !g.AnyExpose {
		c.ExposeHeaders = strings.Join(expose, ", ")
	}
	return c, ""
}

// corsList checks the entries of a CORS list field: "*" sets wildcard (and must stand alone
// when alone is set), every other entry must be valid (what says what it must be).
func corsList[T ~string](field string, values []T, alone bool, valid func(string) bool, what string) (list []string, wildcard bool, why string) {
	for i, v := range values {
		switch {
		case v == "*" && alone && len(values) > 1:
			return nil, false, fmt.Sprintf("%s[%d]: * cannot be listed with other values", field, i)
		case v == "*":
			wildcard = true
		case !valid(string(v)):
			return nil, false, fmt.Sprintf("%s[%d]: %q is not %s", field, i, v, what)
		default:
			list = append(list, string(v))
		}
	}
	return list, wildcard, ""
}
