package adminauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Reason is why a request was refused: the label of metalgate_admin_requests_refused_total.
type Reason string

const (
	// ReasonNoCredentials: no "Authorization: Bearer" token from a caller loopback does not
	// let through: not from loopback, or on the host network, where loopback counts for
	// nothing (401).
	ReasonNoCredentials Reason = "no_credentials"
	// ReasonInvalidToken: the API server did not authenticate the token (401).
	ReasonInvalidToken Reason = "invalid_token"
	// ReasonForbidden: the token's user may not get the path (403).
	ReasonForbidden Reason = "forbidden"
	// ReasonLoopbackOnly: the process has no API server to check tokens with (static mode), so
	// only loopback is served (403).
	ReasonLoopbackOnly Reason = "loopback_only"
	// ReasonReviewError: the API server could not be asked, or did not answer (503, not cached).
	ReasonReviewError Reason = "review_error"
	// ReasonBadPath: the path is not in canonical form ("..", "//"), so it is refused rather
	// than authorised under one name and served under another (400).
	ReasonBadPath Reason = "bad_path"
)

var reasons = []Reason{ReasonNoCredentials, ReasonInvalidToken, ReasonForbidden, ReasonLoopbackOnly, ReasonReviewError, ReasonBadPath}

// Options configure a Guard. The zero value serves loopback and the probe paths only.
type Options struct {
	// HostNetwork says the process shares the node's network namespace (the speaker): there,
	// loopback is every process on the node and every host-network pod on it, so a loopback
	// caller is no one in particular and gets no bypass — it needs a token like any other
	// caller. Requires Reviewer. Default false: loopback is the process's own Pod (the
	// controller, the proxies), reached from outside only through pods/portforward, which the
	// API server authorises.
	HostNetwork bool
	// Reviewer checks tokens and permissions with the API server. nil: no token is accepted,
	// only loopback callers get past the open paths (static mode, no API server).
	Reviewer Reviewer
	// OpenPaths are served to anyone (exact match on the URL path): the kubelet's probes come
	// from the node, not from loopback, and carry no token. Default: /healthz and /readyz.
	// Set an empty non-nil slice to open nothing.
	OpenPaths []string
	// AllowTTL is how long an allowed (token, verb, path) is remembered. Default: 1 minute. A
	// revoked token or permission keeps working for up to this long.
	AllowTTL time.Duration
	// DenyTTL is how long a refused (token, verb, path) is remembered. Default: 10 seconds.
	DenyTTL time.Duration
	// CacheSize bounds the allowed and the refused decisions remembered, each (least recently
	// used first out). Refusals have their own cache so that a flood of bad tokens cannot push
	// out the decisions of real scrapers. Default: 1024.
	CacheSize int
	// MaxReviews bounds the reviews in flight at once; more requests wait for a slot (at most
	// ReviewTimeout). Default: 4.
	MaxReviews int
	// ReviewTimeout bounds one decision (TokenReview + SubjectAccessReview). Default: 10 seconds.
	ReviewTimeout time.Duration
	// LogInterval: at most one log line per refusal reason per interval (the metric counts
	// every one). Default: 10 seconds.
	LogInterval time.Duration
	// Registerer receives metalgate_admin_requests_refused_total. Default: none (not exported).
	// Several Guards may share one Registerer: they share the counter.
	Registerer prometheus.Registerer
	// Logger for refusals. Default: discard.
	Logger logr.Logger
}

// Guard serves a request to the handler it wraps only when the caller may read it: on an open
// path, from loopback (unless Options.HostNetwork), or with a bearer token the API server
// authenticates and authorises for `get` (HEAD too; other methods: their lower-case name, as
// the API server's non-resource requests) on the URL path. Otherwise it answers 400, 401, 403 or 503 and counts the reason.
type Guard struct {
	opts     Options
	open     []string
	allowed  *cache.LRUExpireCache // decisionKey → User
	refused  *cache.LRUExpireCache // decisionKey → refusal
	sem      chan struct{}
	refusals *prometheus.CounterVec
	logEvery map[Reason]*rate.Sometimes
}

// New returns a Guard; its counter is registered with opts.Registerer.
func New(opts Options) (*Guard, error) {
	if opts.HostNetwork && opts.Reviewer == nil {
		return nil, errors.New("admin guard: HostNetwork needs a Reviewer (on the host network loopback is no credential, so without the API server no caller could be served)")
	}
	if opts.OpenPaths == nil {
		opts.OpenPaths = []string{"/healthz", "/readyz"}
	}
	if opts.AllowTTL <= 0 {
		opts.AllowTTL = time.Minute
	}
	if opts.DenyTTL <= 0 {
		opts.DenyTTL = 10 * time.Second
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 1024
	}
	if opts.MaxReviews <= 0 {
		opts.MaxReviews = 4
	}
	if opts.ReviewTimeout <= 0 {
		opts.ReviewTimeout = 10 * time.Second
	}
	if opts.LogInterval <= 0 {
		opts.LogInterval = 10 * time.Second
	}
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metalgate_admin_requests_refused_total",
		Help: "Requests to the admin (metrics, debug) port refused, by reason: no_credentials, invalid_token, forbidden, loopback_only, review_error, bad_path.",
	}, []string{"reason"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(refusals); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("register admin metrics: %w", err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("register admin metrics: %w", err)
			}
			refusals = existing
		}
	}
	g := &Guard{
		opts:     opts,
		open:     slices.Clone(opts.OpenPaths),
		allowed:  cache.NewLRUExpireCache(opts.CacheSize),
		refused:  cache.NewLRUExpireCache(opts.CacheSize),
		sem:      make(chan struct{}, opts.MaxReviews),
		refusals: refusals,
		logEvery: map[Reason]*rate.Sometimes{},
	}
	for _, r := range reasons {
		refusals.WithLabelValues(string(r)) // exported at 0, so rate() works from the start
		g.logEvery[r] = &rate.Sometimes{Interval: opts.LogInterval}
	}
	return g, nil
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := g.check(r); ref != nil {
			g.refuse(w, r, ref)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusal is the answer to a request that may not be served.
type refusal struct {
	reason Reason
	code   int
	user   string // who the token belongs to, when known
	err    error  // ReasonReviewError only
}

// check returns nil when r may be served.
func (g *Guard) check(r *http.Request) *refusal {
	p := r.URL.Path
	if slices.Contains(g.open, p) || (!g.opts.HostNetwork && IsLoopback(r.RemoteAddr)) {
		return nil
	}
	if !canonical(p) {
		return &refusal{reason: ReasonBadPath, code: http.StatusBadRequest}
	}
	if g.opts.Reviewer == nil {
		return &refusal{reason: ReasonLoopbackOnly, code: http.StatusForbidden}
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return &refusal{reason: ReasonNoCredentials, code: http.StatusUnauthorized}
	}
	verb := verbOf(r.Method)
	key := decisionKey{token: sha256.Sum256([]byte(token)), verb: verb, path: p}
	if _, ok := g.allowed.Get(key); ok {
		return nil
	}
	if v, ok := g.refused.Get(key); ok {
		ref := v.(refusal)
		return &ref
	}
	ref := g.review(r.Context(), token, verb, p)
	switch {
	case ref == nil:
		g.allowed.Add(key, struct{}{}, g.opts.AllowTTL)
	case ref.reason != ReasonReviewError:
		g.refused.Add(key, *ref, g.opts.DenyTTL)
	}
	return ref
}

// decisionKey identifies one decision. The token is kept as a hash only.
type decisionKey struct {
	token      [sha256.Size]byte
	verb, path string
}

// review asks the API server who token is and whether they may verb path.
func (g *Guard) review(ctx context.Context, token, verb, p string) *refusal {
	// The caller hanging up must not waste a review another caller with the same token waits
	// for (the answer is cached), but a review never outlives ReviewTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.ReviewTimeout)
	defer cancel()
	select {
	case g.sem <- struct{}{}:
		defer func() { <-g.sem }()
	case <-ctx.Done():
		return &refusal{reason: ReasonReviewError, code: http.StatusServiceUnavailable, err: fmt.Errorf("wait for a review slot: %w", ctx.Err())}
	}
	u, ok, err := g.opts.Reviewer.Authenticate(ctx, token)
	if err != nil {
		return &refusal{reason: ReasonReviewError, code: http.StatusServiceUnavailable, err: err}
	}
	if !ok {
		return &refusal{reason: ReasonInvalidToken, code: http.StatusUnauthorized}
	}
	allowed, err := g.opts.Reviewer.Authorize(ctx, u, verb, p)
	if err != nil {
		return &refusal{reason: ReasonReviewError, code: http.StatusServiceUnavailable, user: u.Name, err: err}
	}
	if !allowed {
		return &refusal{reason: ReasonForbidden, code: http.StatusForbidden, user: u.Name}
	}
	return nil
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, ref *refusal) {
	g.refusals.WithLabelValues(string(ref.reason)).Inc()
	g.logEvery[ref.reason].Do(func() {
		kv := []any{"reason", ref.reason, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path}
		if ref.user != "" {
			kv = append(kv, "user", ref.user)
		}
		if ref.err != nil {
			g.opts.Logger.Error(ref.err, "Admin request not reviewed", kv...)
			return
		}
		g.opts.Logger.Info("Admin request refused", kv...)
	})
	var msg string
	switch ref.reason {
	case ReasonNoCredentials, ReasonInvalidToken:
		// RFC 6750 §3: a 401 names the scheme it wants.
		w.Header().Set("WWW-Authenticate", `Bearer realm="metalgate"`)
		msg = "Unauthorized: send a bearer token the API server accepts, or connect from loopback (kubectl port-forward)"
		if g.opts.HostNetwork {
			msg = "Unauthorized: send a bearer token the API server accepts (this port is on the host network: every caller needs one)"
		}
	case ReasonForbidden:
		msg = fmt.Sprintf("Forbidden: user %q may not %s %s (grant it with a ClusterRole rule on nonResourceURLs)", ref.user, verbOf(r.Method), r.URL.Path)
	case ReasonLoopbackOnly:
		msg = "Forbidden: this process answers on loopback only (kubectl port-forward)"
	case ReasonReviewError:
		msg = "Service Unavailable: could not review the token with the API server"
	case ReasonBadPath:
		msg = "Bad Request: path not in canonical form"
	}
	http.Error(w, msg, ref.code)
}

// IsLoopback reports whether remoteAddr ("ip:port", as in http.Request.RemoteAddr) is in
// 127.0.0.0/8 or ::1, IPv4-mapped IPv6 included. Anything unparsable is not loopback.
func IsLoopback(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// bearer returns the token of an "Authorization: Bearer <token>" header value (the scheme is
// case-insensitive, RFC 7235 §2.1).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// verbOf maps an HTTP method to the verb of a non-resource request, as the API server does
// (lower-case method), with HEAD read as get.
func verbOf(method string) string {
	if method == http.MethodHead || method == "" {
		return "get"
	}
	return strings.ToLower(method)
}

// canonical reports whether p is an absolute, clean path (a trailing slash allowed): no
// ".", "..", or empty segments that a mux would resolve to another path than the one
// authorised.
func canonical(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	c := path.Clean(p)
	return c == p || c+"/" == p
}
