package dataplane

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/metalgate/metalgate/proxy/balancer"
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
	resp, done, why := s.askAuth(r, ea, a)
	if resp == nil {
		return fail(why)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	done()
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

// askAuth sends the check of r to the route's authentication service: a Service's endpoint
// (Backend) or an outside host (Outside). It returns the response, whose body the caller
// drains and closes and then calls done; or, when there is none, why.
func (s *Server) askAuth(r *http.Request, ea *table.ExternalAuth, a *attempt) (resp *http.Response, done func(), why string) {
	ctx, cancel := context.WithTimeout(r.Context(), authCheckTimeout)
	newReq := func(addr string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, ea.Method, "http://"+addr+ea.Path, nil)
		if err != nil {
			return nil, err
		}
		req.Host = ea.Host
		s.authHeaders(req.Header, r, ea, a)
		return req, nil
	}
	if o := ea.Outside; o != nil {
		req, err := newReq(o.Addr())
		if err != nil {
			cancel()
			return nil, nil, err.Error()
		}
		resp, err := s.outside.h1.do(ctx, o.Addr(), s.outside.dest(o), req, nil, nil, table.Timeouts{}, nil)
		if err != nil {
			cancel()
			return nil, nil, err.Error()
		}
		return resp, cancel, ""
	}
	rt := s.current.Load()
	if ea.Backend == nil || rt == nil {
		cancel()
		return nil, nil, "auth-url refused"
	}
	var e *balancer.Endpoint
	if p := rt.pools[ea.Backend]; p != nil && len(p.eps) > 0 {
		e = p.bal.Pick("", nil)
	}
	if e == nil {
		cancel()
		return nil, nil, "no endpoint of the authentication service"
	}
	req, err := newReq(e.Addr)
	if err != nil {
		cancel()
		return nil, nil, err.Error()
	}
	start := time.Now()
	e.Start()
	resp, err = s.h1.do(ctx, e.Addr, nil, req, nil, nil, table.Timeouts{}, nil)
	if err != nil {
		e.End(time.Since(start))
		cancel()
		return nil, nil, err.Error()
	}
	return resp, func() { e.End(time.Since(start)); cancel() }, ""
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
