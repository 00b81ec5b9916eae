package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// Error pages (ingress-nginx's custom-http-errors with default-backend, and the proxy's own
// --default-backend-service). A response whose status the route lists — the backend's, or
// the proxy's own 502, 503 or 504 — is replaced: the backend's body is discarded unread (its
// HTTP/1.1 connection closed, never pooled), and the client gets the original status with a
// page fetched from the error backend, asked as ingress-nginx asks it: GET / with X-Code,
// X-Format (the client's Accept), X-Original-URI, X-Namespace, X-Ingress-Name,
// X-Service-Name, X-Service-Port and X-Request-ID, and none of the client's own headers.
// Requests that match no route get the proxy's own error backend's page with 404.
//
// Bounded: the page is read whole before anything is sent, at most maxErrorPageBytes, within
// Options.ErrorPageTimeout. An error backend that fails (no endpoint, no answer, a page too
// large) gives the original status with a short built-in body. The page's own request is
// never intercepted, whatever its status: there is no loop.

// maxErrorPageBytes bounds an error page.
const maxErrorPageBytes = 1 << 20

var errErrorPageTooLarge = fmt.Errorf("error page larger than %d bytes", maxErrorPageBytes)

// intercepted is the reverse path's way from ModifyResponse to the error path: the
// backend's response (status code) is to be replaced by an error page from p.
type intercepted struct {
	code int
	p    *pool
}

func (e *intercepted) Error() string {
	return "status " + strconv.Itoa(e.code) + " replaced by an error page"
}

// pageFor returns the pool of the error backend that replaces a response of status code to
// request a, or nil when the response stands.
func (s *Server) pageFor(a *attempt, code int) *pool {
	if a == nil || a.route == nil || a.router == nil {
		return nil
	}
	ep := a.route.Options.Policy.ErrorPages
	if !ep.Intercepts(code) {
		return nil
	}
	be := ep.Backend
	if be == nil {
		be = a.router.table.ErrorBackend
	}
	if be == nil {
		return nil
	}
	return a.router.pools[be]
}

// answer writes the proxy's own error response code (msg the plain body), or the route's
// error page for it.
func (s *Server) answerError(w *responseWriter, r *http.Request, a *attempt, code int, msg string) {
	if p := s.pageFor(a, code); p != nil {
		s.errorPage(w, r, a, code, p)
		return
	}
	http.Error(w, msg, code)
}

// noRoute answers a request that matches no route: the proxy's error backend's page, else a
// plain 404.
func (s *Server) noRoute(w *responseWriter, r *http.Request, rt *router) {
	if be := rt.table.ErrorBackend; be != nil {
		if p := rt.pools[be]; p != nil {
			s.errorPage(w, r, &attempt{router: rt, in: r}, http.StatusNotFound, p)
			return
		}
	}
	http.Error(w, "no route for this host and path", http.StatusNotFound)
}

// errorPage answers with status code and the page the error backend p gives, or a built-in
// one when it fails.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, a *attempt, code int, p *pool) {
	in := a.in
	if in == nil {
		in = r
	}
	body, ctype, err := s.fetchErrorPage(in, a, code, p)
	if err != nil {
		s.countUpstream("error_page")
		s.opts.Logger.V(1).Info("error page failed", "error", err.Error(), "host", in.Host, "status", code)
		body, ctype = []byte(strconv.Itoa(code)+" "+http.StatusText(code)+"\n"), "text/plain; charset=utf-8"
	}
	h := w.Header()
	if ctype != "" {
		h["Content-Type"] = []string{ctype}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(code)
	if in.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// fetchErrorPage asks the error backend p for the page of status code.
func (s *Server) fetchErrorPage(in *http.Request, a *attempt, code int, p *pool) (body []byte, ctype string, err error) {
	e := p.bal.Pick("", nil)
	if e == nil {
		return nil, "", errNoEndpoint
	}
	ctx, cancel := context.WithTimeout(in.Context(), s.opts.ErrorPageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.Addr+"/", nil)
	if err != nil {
		return nil, "", fmt.Errorf("error page request: %w", err)
	}
	req.Host = in.Host
	uri := in.RequestURI
	if uri == "" {
		uri = in.URL.RequestURI()
	}
	h := req.Header
	h["User-Agent"] = []string{""}
	h["X-Code"] = []string{strconv.Itoa(code)}
	h["X-Format"] = []string{in.Header.Get("Accept")}
	h["X-Original-Uri"] = []string{uri}
	if a.route != nil {
		h["X-Namespace"] = []string{a.route.Source.Namespace}
		h["X-Ingress-Name"] = []string{a.route.Source.Name}
	}
	if be := a.backend(); be != nil {
		h["X-Service-Name"] = []string{be.Service.Name}
		h["X-Service-Port"] = []string{be.Port}
	}
	if a.reqID != "" {
		h["X-Request-Id"] = []string{a.reqID}
	}
	start := time.Now()
	e.Start()
	defer func() { e.End(time.Since(start)) }()
	resp, err := s.h1.do(ctx, e.Addr, nil, req, nil, nil, table.Timeouts{}, nil)
	if err != nil {
		return nil, "", fmt.Errorf("error page from %s: %w", e.Addr, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorPageBytes+1))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("error page from %s: %w", e.Addr, err)
	case len(body) > maxErrorPageBytes:
		return nil, "", errErrorPageTooLarge
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// backend is the backend the request went (or was to go) to: its pool's, else its route's.
func (a *attempt) backend() *table.Backend {
	if a.pool != nil {
		return a.pool.backend
	}
	if a.route != nil {
		return a.route.Backend
	}
	return nil
}

// interceptedError reports the reverse path's replaced response, for the error path.
func interceptedError(err error) (*intercepted, bool) {
	var ie *intercepted
	ok := errors.As(err, &ie)
	return ie, ok
}
