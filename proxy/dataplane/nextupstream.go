package dataplane

import (
	"context"
	"errors"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// When a request goes to another endpoint (ingress-nginx's proxy-next-upstream; send
// applies it):
//
//   - only before anything of the response reached the client: a response passed on
//     (http_NNN) is discarded unread, and the client sees only the last attempt's answer;
//   - never a request with a body, nor a protocol upgrade: the body is streamed to the
//     backend, never buffered, so a second endpoint could not be sent it again;
//   - a request with a non-idempotent method (POST, PATCH, LOCK…) only when nothing was
//     sent (a connection that could not be made), unless the route says non_idempotent;
//   - always to an endpoint the request has not tried; when none is left, the last answer
//     (or error) stands;
//   - at most Tries attempts in all (0: each endpoint once), and none begins once Timeout
//     has passed since the first.
//
// Without a policy on the route: connection failures of requests without a body only, on up
// to Options.Retries other endpoints. Each attempt after the first counts in
// metalgate_proxy_retries_total.

// nextPolicy is the retry policy of one request.
type nextPolicy struct {
	on       table.NextUpstreamOn
	tries    int       // attempts in all; 0: every endpoint once
	deadline time.Time // no attempt begins after it; zero: none
	legacy   bool      // no route policy: connection failures only
}

// nextPolicyOf is a's route's policy, from start (the first attempt).
func (s *Server) nextPolicyOf(a *attempt, start time.Time) nextPolicy {
	var nu *table.NextUpstream
	if a.route != nil {
		nu = a.route.Options.Policy.NextUpstream
	}
	if nu == nil {
		return nextPolicy{on: table.NextError, tries: 1 + s.opts.Retries, legacy: true}
	}
	p := nextPolicy{on: nu.On, tries: nu.Tries}
	if nu.On == 0 {
		p.tries = 1 // off
	}
	if nu.Timeout > 0 {
		p.deadline = start.Add(nu.Timeout)
	}
	return p
}

// again reports whether, after attempt try (0-based) of a request, another may begin: tries
// and time are left, the client is still there, and an endpoint is left untried.
func (p nextPolicy) again(ctx context.Context, a *attempt, try int) bool {
	if p.tries > 0 && try+1 >= p.tries {
		return false
	}
	if !p.deadline.IsZero() && !time.Now().Before(p.deadline) {
		return false
	}
	return ctx.Err() == nil && len(a.tried) < len(a.pool.eps)
}

// afterError reports whether a failed attempt may be passed on: replayable says the request
// has no body and no upgrade, idempotent its method.
func (p nextPolicy) afterError(err error, replayable, idempotent bool) bool {
	if !replayable || errors.Is(err, context.Canceled) {
		return false
	}
	if isConnectError(err) {
		// Nothing was sent: any method may go elsewhere. A connect timeout is a timeout
		// for nginx, a refused connection an error.
		if isTimeout(err) && !p.legacy {
			return p.on&table.NextTimeout != 0
		}
		return p.on&table.NextError != 0
	}
	if p.legacy || !idempotent && p.on&table.NextNonIdempotent == 0 {
		return false
	}
	switch {
	case isTimeout(err):
		return p.on&table.NextTimeout != 0
	case invalidHeader(err):
		return p.on&table.NextInvalidHeader != 0
	default:
		return p.on&table.NextError != 0
	}
}

// afterStatus reports whether a response of status code may be passed on.
func (p nextPolicy) afterStatus(code int, replayable, idempotent bool) bool {
	return replayable && (idempotent || p.on&table.NextNonIdempotent != 0) && p.on.Status(code)
}

// invalidHeader reports a malformed or oversized response head (nginx's invalid_header).
func invalidHeader(err error) bool {
	var pe *textproto.ProtocolError
	return errors.As(err, &pe) || errors.Is(err, errResponseHeadersTooLarge) || errors.Is(err, errTooMany1xx) ||
		strings.Contains(err.Error(), "malformed HTTP")
}

// discard drops a response passed on to another endpoint: its body is closed unread (an
// HTTP/1.1 connection with a body left is closed, never pooled).
func discard(resp *http.Response) {
	if resp.Body != nil && resp.Body != http.NoBody {
		_ = resp.Body.Close()
	}
}
