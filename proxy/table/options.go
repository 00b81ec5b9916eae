package table

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
)

// Protocol is how the proxy speaks to a backend.
type Protocol string

const (
	// ProtocolHTTP is HTTP/1.1 to the backend (the default); Upgrade (WebSocket) works over it.
	ProtocolHTTP Protocol = "http"
	// ProtocolH2C is HTTP/2 without TLS (prior knowledge) to the backend; gRPC needs it.
	ProtocolH2C Protocol = "h2c"
	// ProtocolHTTPS is HTTP/1.1 over TLS to the backend (Backend.TLS says how).
	ProtocolHTTPS Protocol = "https"
	// ProtocolGRPCS is HTTP/2 over TLS (ALPN h2) to the backend, for gRPC over TLS.
	ProtocolGRPCS Protocol = "grpcs"
)

// Algorithm names a load-balancing algorithm.
type Algorithm string

const (
	RoundRobin   Algorithm = "round-robin"
	LeastRequest Algorithm = "least-request"
	EWMA         Algorithm = "ewma"
	Hash         Algorithm = "hash"
)

// HashSource says what a hash-balanced backend hashes.
type HashSource string

const (
	HashByNone     HashSource = ""
	HashByHeader   HashSource = "header"
	HashByCookie   HashSource = "cookie"
	HashByClientIP HashSource = "client-ip"
)

// DefaultAffinityCookie is the cookie name of cookie affinity unless the Ingress names one.
const DefaultAffinityCookie = "metalgate-affinity"

// Balance is a backend's load-balancing policy.
type Balance struct {
	Algorithm Algorithm
	// HashBy and HashKey (header or cookie name) apply when Algorithm is Hash.
	HashBy  HashSource
	HashKey string
	// AffinityCookie, when not empty, pins a client to the endpoint named in this cookie; the
	// first pick uses Algorithm.
	AffinityCookie string
	// AffinityCookieAttrs are the affinity cookie's attributes.
	AffinityCookieAttrs CookieAttrs
	// AffinityMode is how a session keeps its endpoint (AffinityBalanced by default).
	AffinityMode AffinityMode
}

// CookieAttrs are the attributes of the affinity cookie (session-cookie-* in ingress-nginx).
// The zero value is the default: Path=/, a session cookie, SameSite=Lax, HttpOnly, Secure
// when the request came over HTTPS.
type CookieAttrs struct {
	Path string // "" is "/"
	// MaxAge and Expires, in seconds from the response, when not 0: the Max-Age and Expires
	// attributes (Expires is the older form; browsers prefer Max-Age when both are there).
	MaxAge, Expires int64
	SameSite        SameSite // "" is SameSiteLax
	// Secure always, not only on HTTPS (SameSite None implies it: browsers refuse it without).
	Secure bool
}

// SameSite is a cookie's SameSite attribute.
type SameSite string

const (
	SameSiteLax    SameSite = "Lax"
	SameSiteStrict SameSite = "Strict"
	SameSiteNone   SameSite = "None"
)

func (c CookieAttrs) String() string {
	return fmt.Sprintf("path=%s,max-age=%d,expires=%d,samesite=%s,secure=%t", c.Path, c.MaxAge, c.Expires, c.SameSite, c.Secure)
}

func (b Balance) String() string {
	s := string(b.Algorithm)
	if b.HashBy != HashByNone {
		s += "/" + string(b.HashBy) + ":" + b.HashKey
	}
	if b.AffinityCookie != "" {
		s += "/affinity:" + b.AffinityCookie
		if b.AffinityCookieAttrs != (CookieAttrs{}) {
			s += "[" + b.AffinityCookieAttrs.String() + "]"
		}
		if b.AffinityMode != AffinityBalanced {
			s += "/" + string(b.AffinityMode)
		}
	}
	return s
}

// Options are a route's settings: an Ingress's from its annotations (proxy/ingress), a
// Gateway API route's from DefaultOptions and its filters (proxy/gatewayapi).
type Options struct {
	Protocol Protocol
	Balance  Balance
	// MaxBodyBytes limits request bodies; 0 means the server's default, -1 unlimited.
	MaxBodyBytes int64
	// SSLPassthrough passes the TLS connections for the Ingress's hosts, undecrypted, to the
	// backend of each rule's first path (Table.Passthrough).
	SSLPassthrough bool
	// UseRegex makes the Ingress's Prefix and ImplementationSpecific paths regular
	// expressions (Anchored at the start, case-insensitive), as ingress-nginx's use-regex.
	UseRegex bool
	// ServerAliases are more hosts that the Ingress's rules serve.
	ServerAliases []string
	// Canary, when set, makes the Ingress a canary of the routes with its hosts and paths:
	// it claims no host and routes only the requests the rule selects.
	Canary *CanaryRule
	Policy Policy
}

// DefaultOptions are the settings of a route that asks for nothing: plain HTTP to the
// backend, round robin.
func DefaultOptions() Options {
	return Options{Protocol: ProtocolHTTP, Balance: Balance{Algorithm: RoundRobin}}
}

// The variables an auth-signin URL may hold (ingress-nginx's nginx variables of these names).
// The data plane fills them in, each escaped for where it stands in the URL.
const (
	SigninScheme            = "$scheme"              // http or https, as the client came
	SigninHost              = "$host"                // the request's host (the redirect policy's)
	SigninBestHTTPHost      = "$best_http_host"      // the same
	SigninRequestURI        = "$request_uri"         // the request's path and query
	SigninEscapedRequestURI = "$escaped_request_uri" // the same, query-escaped
)

// SigninVariables lists the variables a signin URL may hold.
func SigninVariables() []string {
	return []string{SigninEscapedRequestURI, SigninBestHTTPHost, SigninRequestURI, SigninScheme, SigninHost}
}

// SigninVariableAt returns the auth-signin variable s starts with, or "" (a '$' that starts
// none, or one that goes on with more name characters, is literal).
func SigninVariableAt(s string) string {
	if s == "" || s[0] != '$' {
		return ""
	}
	for _, v := range SigninVariables() {
		if strings.HasPrefix(s, v) && (len(s) == len(v) || !nameByte(s[len(v)])) {
			return v
		}
	}
	return ""
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// ValidSignin reports whether v, its variables filled in with sample values, is an absolute
// http:// or https:// URL with a host and no user part. A 401 sends the client there, so
// anything else (javascript:, a protocol-relative or relative URL, a user@ host that reads
// as another host) is refused.
func ValidSignin(v string) bool {
	var b strings.Builder
	for i := 0; i < len(v); {
		c := v[i]
		if c <= ' ' || c == 0x7f || c == '\\' {
			return false
		}
		name := SigninVariableAt(v[i:])
		switch name {
		case "":
			b.WriteByte(c)
			i++
			continue
		case SigninScheme:
			b.WriteString("https")
		case SigninHost, SigninBestHTTPHost:
			b.WriteString("host.example")
		case SigninRequestURI:
			b.WriteString("/p?q=1")
		case SigninEscapedRequestURI:
			b.WriteString("%2Fp%3Fq%3D1")
		}
		i += len(name)
	}
	u, err := url.Parse(b.String())
	if err != nil || u.User != nil || u.Opaque != "" || !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") {
		return false
	}
	h := u.Hostname()
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return ValidHostname(h)
}

// ValidHostname reports whether h is a DNS host name: dot-separated labels of letters,
// digits and '-' (not at either end of a label), at most 63 bytes each and 253 in all.
func ValidHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func ValidHeaderName(n string) bool { return headerNameRE.MatchString(n) }

func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// ProtectedHeader: the framing and hop-by-hop headers, which only the proxy sets.
func ProtectedHeader(n string) bool {
	switch CanonicalHeader(n) {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer",
		"Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization":
		return true
	}
	return false
}

// CanonicalHeader is textproto's canonical form for valid names ("x-user" → "X-User").
func CanonicalHeader(n string) string {
	b := []byte(strings.ToLower(n))
	upper := true
	for i, c := range b {
		if upper && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		upper = c == '-'
	}
	return string(b)
}
