package dataplane

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// authCheckTimeout bounds one check with an authentication service.
const authCheckTimeout = 15 * time.Second

// externalAuth asks the route's authentication service about r (ingress-nginx's
// auth_request): the request's headers, no body, GET unless auth-method. A 2xx lets it
// through, with auth-response-headers copied into what the backend sees; 401 sends the
// client to auth-signin when set, else answers 401 (with the service's challenge); 403
// answers 403; anything else (5xx, no answer, no endpoint) answers 500. It reports whether it
// answered the request.
func (s *Server) externalAuth(w *responseWriter, r *http.Request, ea *table.ExternalAuth, a *attempt) bool {
	fail := func(why string) bool {
		s.limitHit(limitAuth)
		s.opts.Logger.V(1).Info("external authentication failed", "reason", why, "host", r.Host, "path", r.URL.Path)
		http.Error(w, "authentication service unavailable", http.StatusInternalServerError)
		return true
	}
	rt := s.current.Load()
	if ea.Backend == nil || rt == nil {
		return fail("auth-url refused")
	}
	p := rt.pools[ea.Backend]
	if p == nil || len(p.eps) == 0 {
		return fail("no endpoint of the authentication service")
	}
	e := p.bal.Pick("", nil)
	if e == nil {
		return fail("no endpoint of the authentication service")
	}
	ctx, cancel := context.WithTimeout(r.Context(), authCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, ea.Method, "http://"+e.Addr+ea.Path, nil)
	if err != nil {
		return fail(err.Error())
	}
	req.Host = ea.Host
	s.authHeaders(req.Header, r, ea, a)
	start := time.Now()
	e.Start()
	resp, err := s.h1.do(ctx, e.Addr, nil, req, nil, nil, table.Timeouts{}, nil)
	if err != nil {
		e.End(time.Since(start))
		return fail(err.Error())
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	e.End(time.Since(start))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		a.authSet = make(http.Header, len(ea.ResponseHeaders))
		for _, k := range ea.ResponseHeaders {
			if vv := resp.Header.Values(k); len(vv) > 0 {
				a.authSet[k] = vv
			} else {
				a.authSet[k] = nil // dropped: the client may not supply it itself
			}
		}
		return false
	case code == http.StatusUnauthorized && ea.Signin != "":
		host, ok := redirectHost(r, a.route)
		if !ok {
			s.badRedirectHost(w)
			return true
		}
		s.limitHit(limitAuth)
		http.Redirect(w, r, signinURL(ea.Signin, r, redirectScheme(s.forwarded(r, a).proto), host), http.StatusFound)
		return true
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		s.limitHit(limitAuth)
		if c := resp.Header.Values("WWW-Authenticate"); code == http.StatusUnauthorized && len(c) > 0 {
			w.Header()["Www-Authenticate"] = c
		}
		http.Error(w, http.StatusText(code), code)
		return true
	default:
		return fail("the authentication service answered " + resp.Status)
	}
}

// authHeaders is the header set of an authentication check: the client's headers (not the
// hop-by-hop or framing ones), then what ingress-nginx adds for the service.
func (s *Server) authHeaders(h http.Header, r *http.Request, ea *table.ExternalAuth, a *attempt) {
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if dropped(k) || listed(conn, k) || !s.opts.AllowUnderscoreHeaders && strings.IndexByte(k, '_') >= 0 {
			continue
		}
		h[k] = vv
	}
	f := s.forwarded(r, a)
	original := f.proto + "://" + r.Host + r.URL.RequestURI()
	redirect := r.URL.RequestURI()
	if ea.RequestRedirect != "" {
		redirect = ea.RequestRedirect
	}
	for k, v := range map[string]string{
		"X-Original-Url": original, "X-Original-Method": r.Method, "X-Auth-Request-Redirect": redirect,
		"X-Forwarded-For": a.clientIP, "X-Real-Ip": f.realIP, "X-Forwarded-Proto": f.proto, "X-Forwarded-Host": r.Host,
		"X-Forwarded-Uri": r.URL.RequestURI(), "X-Sent-From": "metalgate",
	} {
		h[k] = []string{v}
	}
	if f.realIP == "" {
		delete(h, "X-Real-Ip") // the client is unknown
	}
	h["User-Agent"] = append([]string(nil), r.Header.Values("User-Agent")...)
	if len(h["User-Agent"]) == 0 {
		h["User-Agent"] = []string{""}
	}
}
