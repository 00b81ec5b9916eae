package ingress

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// Annotation prefixes. Every metalgate.io/NAME below has the ingress-nginx form
// nginx.ingress.kubernetes.io/NAME (unless noted), read when Input.NginxAnnotations is set;
// the metalgate.io form wins when both are present. docs/proxy.md has the table.
const (
	PrefixMetalgate = "metalgate.io/"
	PrefixNginx     = "nginx.ingress.kubernetes.io/"
)

// Annotation names (without prefix) that other code refers to.
const (
	AnnotationBackendProtocol = PrefixMetalgate + "backend-protocol"
	AnnotationSSLRedirect     = PrefixMetalgate + "ssl-redirect"
	AnnotationBodySize        = PrefixMetalgate + "proxy-body-size"
	AnnotationLoadBalance     = PrefixMetalgate + "load-balance"
	AnnotationHashBy          = PrefixMetalgate + "hash-by"
	AnnotationAffinity        = PrefixMetalgate + "affinity"
)

// options are an Ingress's settings read from its annotations: the route's table.Options,
// and what Build resolves from other objects (Secrets, Services) before it places the routes.
type options struct {
	table.Options
	// auth is the basic-auth Secret to read at build time (Policy.BasicAuth comes from it).
	auth *authRef
	// extAuth is the external authentication to resolve at build time.
	extAuth *extAuthRef
	// backendTLS is the proxy-ssl-* annotations, resolved at build time (Backend.TLS).
	backendTLS *table.BackendTLSRef
	// clientTLS is the auth-tls-* annotations, resolved at build time (clienttls.go).
	clientTLS *table.ClientAuthRef
	// errorPages is custom-http-errors with default-backend, resolved at build time
	// (Policy.ErrorPages; errorpages.go).
	errorPages *errorPagesRef
}

// extAuthRef is auth-url and its companions as written.
type extAuthRef struct {
	key             string
	url             string
	signin          string
	method          string
	responseHeaders []string
	requestRedirect string
}

// authRef names the htpasswd Secret of basic authentication.
type authRef struct {
	key       string // the annotation, for problems
	namespace string // "" for the Ingress's own
	name      string
	asMap     bool // auth-map: each key a user, each value a hash; else auth-file: key "auth"
	realm     string
	// unsupported says why the annotation cannot be honoured; the route then refuses all.
	unsupported string
}

// annotationReader reads one Ingress's annotations: the metalgate.io form of a name, else
// (when nginx is set) its nginx.ingress.kubernetes.io form. It remembers what it read, so
// that the nginx annotations nobody read can be reported.
type annotationReader struct {
	ann      map[string]string
	nginx    bool
	read     map[string]bool
	problems []problemText
}

// problemText is one problem found in the annotations, with its reason.
type problemText struct{ reason, msg string }

// get returns the value of annotation name (without prefix) and its full key.
func (a *annotationReader) get(name string) (key, val string, ok bool) {
	return a.getAs(name, name)
}

// getAs is get where the nginx form has another name.
func (a *annotationReader) getAs(name, nginxName string) (key, val string, ok bool) {
	if v, ok := a.ann[PrefixMetalgate+name]; ok {
		a.read[PrefixMetalgate+name] = true
		if nginxName != "" && a.nginx {
			a.read[PrefixNginx+nginxName] = true // shadowed: the metalgate.io form wins
		}
		return PrefixMetalgate + name, strings.TrimSpace(v), true
	}
	if nginxName != "" && a.nginx {
		if v, ok := a.ann[PrefixNginx+nginxName]; ok {
			a.read[PrefixNginx+nginxName] = true
			return PrefixNginx + nginxName, strings.TrimSpace(v), true
		}
	}
	return "", "", false
}

// nginxOnly reads an annotation that has only an ingress-nginx form.
func (a *annotationReader) nginxOnly(name string) (key, val string, ok bool) {
	if !a.nginx {
		return "", "", false
	}
	if v, ok := a.ann[PrefixNginx+name]; ok {
		a.read[PrefixNginx+name] = true
		return PrefixNginx + name, strings.TrimSpace(v), true
	}
	return "", "", false
}

func (a *annotationReader) bad(key, val, want string) {
	a.problems = append(a.problems, problemText{table.ReasonInvalidAnnotation,
		fmt.Sprintf("annotation %s=%q is invalid (want %s); using the default", key, val, want)})
}

func (a *annotationReader) boolean(name string) (bool, string, bool) {
	key, v, ok := a.get(name)
	if !ok {
		return false, "", false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.bad(key, v, "true or false")
		return false, key, false
	}
	return b, key, true
}

// snippets are the ingress-nginx annotations that paste configuration text into nginx.conf:
// how ingress-nginx got its remote-code-execution CVEs (CVE-2021-25742, CVE-2025-1974 and
// others). metalgate has no configuration language to paste into and refuses them by name.
var snippets = map[string]bool{
	"configuration-snippet": true, "server-snippet": true, "auth-snippet": true, "stream-snippet": true,
	"modsecurity-snippet": true, "location-snippet": true, "main-snippet": true, "http-snippet": true,
	"auth-proxy-set-headers": true,
}

// parseOptions reads an Ingress's annotations (with nginx: their ingress-nginx forms too).
// Invalid values fall back to the default; every problem is returned with its reason.
func parseOptions(ann map[string]string, nginx bool) (options, []problemText) {
	a := &annotationReader{ann: ann, nginx: nginx, read: map[string]bool{}}
	o := options{Options: table.DefaultOptions()}
	a.protocol(&o)
	a.backendTLS(&o)
	a.balance(&o)
	a.paths(&o)
	a.redirects(&o)
	a.forwarding(&o)
	a.access(&o)
	a.cors(&o)
	a.timeouts(&o)
	a.canary(&o)
	a.basicAuth(&o)
	a.externalAuth(&o)
	a.clientTLS(&o)
	a.protections(&o)
	a.errorPages(&o)   // errorpages.go
	a.nextUpstream(&o) //
	a.affinityMode(&o) //
	if b, _, ok := a.boolean("ssl-passthrough"); ok {
		o.SSLPassthrough = b
	}
	if key, v, ok := a.get("proxy-body-size"); ok {
		n, err := ParseSize(v)
		switch {
		case err != nil:
			a.bad(key, v, "a size such as 0, 512k, 8m or 1g")
		case n == 0:
			o.MaxBodyBytes = -1
		default:
			o.MaxBodyBytes = n
		}
	}
	a.unread()
	return o, a.problems
}

func (a *annotationReader) protocol(o *options) {
	key, v, ok := a.get("backend-protocol")
	if !ok {
		return
	}
	switch strings.ToLower(v) {
	case "http", "http1", "":
		o.Protocol = table.ProtocolHTTP
	case "h2c", "grpc":
		o.Protocol = table.ProtocolH2C
	case "https":
		o.Protocol = table.ProtocolHTTPS
	case "grpcs":
		o.Protocol = table.ProtocolGRPCS
	default:
		a.bad(key, v, "http, https, h2c, grpc or grpcs")
	}
}

func (a *annotationReader) balance(o *options) {
	if key, v, ok := a.get("load-balance"); ok {
		switch alg := table.Algorithm(strings.ReplaceAll(strings.ToLower(v), "_", "-")); alg {
		case table.RoundRobin, table.LeastRequest, table.EWMA, table.Hash:
			o.Balance.Algorithm = alg
		case "peak-ewma":
			o.Balance.Algorithm = table.EWMA
		default:
			a.bad(key, v, "round-robin, least-request, ewma or hash")
		}
	}
	lbSet := a.ann[PrefixMetalgate+"load-balance"] != "" || a.nginx && a.ann[PrefixNginx+"load-balance"] != ""
	if key, v, ok := a.getAs("hash-by", ""); ok {
		src, name, _ := strings.Cut(v, ":")
		switch table.HashSource(strings.ToLower(src)) {
		case table.HashByHeader, table.HashByCookie:
			if name == "" {
				a.bad(key, v, "header:NAME, cookie:NAME or client-ip")
				break
			}
			o.Balance.HashBy, o.Balance.HashKey = table.HashSource(strings.ToLower(src)), name
		case table.HashByClientIP:
			o.Balance.HashBy = table.HashByClientIP
		default:
			a.bad(key, v, "header:NAME, cookie:NAME or client-ip")
		}
	} else if key, v, ok := a.nginxOnly("upstream-hash-by"); ok {
		// ingress-nginx hashes an nginx variable: the ones that name a request part map.
		switch {
		case v == "$remote_addr" || v == "$binary_remote_addr":
			o.Balance.HashBy = table.HashByClientIP
		case strings.HasPrefix(v, "$http_") && len(v) > 6:
			o.Balance.HashBy, o.Balance.HashKey = table.HashByHeader, strings.ReplaceAll(v[6:], "_", "-")
		case strings.HasPrefix(v, "$cookie_") && len(v) > 8:
			o.Balance.HashBy, o.Balance.HashKey = table.HashByCookie, v[8:]
		default:
			a.bad(key, v, "$remote_addr, $http_NAME or $cookie_NAME (other nginx variables do not exist here)")
		}
	}
	if o.Balance.HashBy != table.HashByNone && !lbSet {
		o.Balance.Algorithm = table.Hash // hash-by alone implies hashing
	}
	if o.Balance.Algorithm == table.Hash && o.Balance.HashBy == table.HashByNone {
		o.Balance.HashBy = table.HashByClientIP
	}
	if o.Balance.Algorithm != table.Hash {
		o.Balance.HashBy, o.Balance.HashKey = table.HashByNone, ""
	}
	_, cookieName, _ := a.getAs("affinity-cookie-name", "session-cookie-name") // read: alone it does nothing
	if key, v, ok := a.get("affinity"); ok {
		switch strings.ToLower(v) {
		case "cookie":
			o.Balance.AffinityCookie = table.DefaultAffinityCookie
			if cookieName != "" {
				o.Balance.AffinityCookie = cookieName
			}
		case "", "none":
		default:
			a.bad(key, v, "cookie or none")
		}
	}
	o.Balance.AffinityCookieAttrs = a.cookieAttrs() // read even without affinity: alone they do nothing
	if o.Balance.AffinityCookie == "" {
		o.Balance.AffinityCookieAttrs = table.CookieAttrs{}
	}
}

// cookieAttrs reads the affinity cookie's attributes (ingress-nginx's session-cookie-path,
// -max-age, -expires, -samesite, -secure). A bad value is a problem naming the annotation,
// and that attribute keeps its default.
func (a *annotationReader) cookieAttrs() table.CookieAttrs {
	var c table.CookieAttrs
	if key, v, ok := a.getAs("affinity-cookie-path", "session-cookie-path"); ok {
		if validCookiePath(v) {
			c.Path = v
		} else {
			a.bad(key, v, "a path starting with /, without ';', spaces or control characters")
		}
	}
	seconds := func(name, nginxName string, to *int64) {
		if key, v, ok := a.getAs(name, nginxName); ok {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n <= 0 {
				a.bad(key, v, "a number of seconds, more than 0")
				return
			}
			*to = n
		}
	}
	seconds("affinity-cookie-max-age", "session-cookie-max-age", &c.MaxAge)
	seconds("affinity-cookie-expires", "session-cookie-expires", &c.Expires)
	if key, v, ok := a.getAs("affinity-cookie-samesite", "session-cookie-samesite"); ok {
		switch strings.ToLower(v) {
		case "lax":
			c.SameSite = table.SameSiteLax
		case "strict":
			c.SameSite = table.SameSiteStrict
		case "none":
			c.SameSite = table.SameSiteNone
		default:
			a.bad(key, v, "None, Lax or Strict")
		}
	}
	if key, v, ok := a.getAs("affinity-cookie-secure", "session-cookie-secure"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.bad(key, v, "true or false")
		}
		c.Secure = b
	}
	if c.SameSite == table.SameSiteNone {
		c.Secure = true // browsers refuse SameSite=None without Secure
	}
	return c
}

// validCookiePath reports whether p can be a cookie's Path attribute as it is: it starts with
// '/' and holds no ';' (which would end the attribute and start another: "/; Domain=…"),
// space or control character (RFC 6265 §4.1.1, path-value).
func validCookiePath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if b := p[i]; b < 0x21 || b >= 0x7f || b == ';' {
			return false
		}
	}
	return true
}

// paths reads use-regex, rewrite-target and server-alias.
func (a *annotationReader) paths(o *options) {
	useRegex, _, _ := a.boolean("use-regex")
	o.UseRegex = useRegex
	if key, v, ok := a.get("rewrite-target"); ok {
		switch {
		case v == "" || v[0] != '/':
			a.bad(key, v, "a path starting with /, with $1…$9 for groups of a regex path")
		case strings.HasPrefix(key, PrefixNginx) || strings.Contains(v, "$"):
			// ingress-nginx: rewrite-target makes the paths regular expressions and replaces
			// the whole path; groups are $1…$9.
			o.UseRegex = true
			o.Policy.Rewrite = &table.Rewrite{Target: v, Regex: true}
		default:
			o.Policy.Rewrite = &table.Rewrite{Target: v, Regex: o.UseRegex}
		}
	}
	if key, v, ok := a.get("server-alias"); ok {
		for _, h := range SplitList(v) {
			h = strings.ToLower(h)
			if !validHost(h) || h == "" || strings.ContainsAny(h, "/:") {
				a.bad(key, v, "host names separated by commas or spaces")
				o.ServerAliases = nil
				break
			}
			o.ServerAliases = append(o.ServerAliases, h)
		}
	}
}

// redirects reads ssl-redirect, force-ssl-redirect, app-root and the fixed redirects.
func (a *annotationReader) redirects(o *options) {
	if b, key, ok := a.boolean("ssl-redirect"); ok && b {
		o.Policy.HTTPSRedirect = 308
		// ingress-nginx redirects only hosts with TLS; metalgate's own annotation always.
		o.Policy.HTTPSOnlyTLS = strings.HasPrefix(key, PrefixNginx)
	}
	if b, _, ok := a.boolean("force-ssl-redirect"); ok && b {
		o.Policy.HTTPSRedirect, o.Policy.HTTPSOnlyTLS = 308, false
	}
	if key, v, ok := a.get("app-root"); ok {
		if v == "" || v[0] != '/' || strings.ContainsAny(v, " \t\r\n") {
			a.bad(key, v, "a path starting with /")
		} else {
			o.Policy.AppRoot = v
		}
	}
	fixed := func(name, nginxName, codeName, nginxCodeName string, def int, codes ...int) {
		ckey, cv, cok := a.getAs(codeName, nginxCodeName) // read: alone it does nothing
		key, v, ok := a.getAs(name, nginxName)
		if !ok {
			return
		}
		if !validRedirectTarget(v) {
			a.bad(key, v, "an absolute URL (https://host/path) or a path starting with /")
			return
		}
		r := &table.Redirect{URL: v, Code: def}
		if cok {
			n, err := strconv.Atoi(cv)
			if err != nil || !contains(codes, n) {
				a.bad(ckey, cv, fmt.Sprintf("one of %v", codes))
			} else {
				r.Code = n
			}
		}
		if o.Policy.Redirect == nil {
			o.Policy.Redirect = r
		}
	}
	fixed("permanent-redirect", "permanent-redirect", "permanent-redirect-code", "permanent-redirect-code", 301, 301, 308)
	fixed("temporary-redirect", "temporal-redirect", "temporary-redirect-code", "temporal-redirect-code", 302, 302, 303, 307)
}

func validRedirectTarget(v string) bool {
	if v == "" || strings.ContainsAny(v, " \t\r\n") {
		return false
	}
	return v[0] == '/' && !strings.HasPrefix(v, "//") || strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://")
}

// forwarding reads upstream-vhost, x-forwarded-prefix and the header edits.
func (a *annotationReader) forwarding(o *options) {
	if key, v, ok := a.get("upstream-vhost"); ok {
		if v == "" || !table.ValidHeaderValue(v) || strings.ContainsAny(v, " /") {
			a.bad(key, v, "a host name, with an optional :port")
		} else {
			o.Policy.UpstreamHost = v
		}
	}
	if key, v, ok := a.get("x-forwarded-prefix"); ok {
		if v == "" || !table.ValidHeaderValue(v) {
			a.bad(key, v, "a path prefix such as /app")
		} else {
			o.Policy.ForwardedPrefix = v
		}
	}
	edits := func(e *table.HeaderEdits, kind string) {
		if key, v, ok := a.getAs(kind+"-headers-set", ""); ok {
			e.Set = a.headerLines(key, v)
		}
		if key, v, ok := a.getAs(kind+"-headers-add", ""); ok {
			e.Add = a.headerLines(key, v)
		}
		if key, v, ok := a.getAs(kind+"-headers-remove", ""); ok {
			for _, n := range SplitList(v) {
				if !table.ValidHeaderName(n) || table.ProtectedHeader(n) {
					a.bad(key, v, "header names separated by commas (not the framing or hop-by-hop ones)")
					e.Remove = nil
					break
				}
				e.Remove = append(e.Remove, table.CanonicalHeader(n))
			}
		}
	}
	edits(&o.Policy.RequestHeaders, "request")
	edits(&o.Policy.ResponseHeaders, "response")
}

// headerLines parses "Name: value" lines (one a line).
func (a *annotationReader) headerLines(key, v string) []table.Header {
	var out []table.Header
	for _, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !table.ValidHeaderName(name) || table.ProtectedHeader(name) || !table.ValidHeaderValue(value) {
			a.bad(key, v, `"Name: value" lines (not the framing or hop-by-hop headers)`)
			return nil
		}
		out = append(out, table.Header{Name: table.CanonicalHeader(name), Value: value})
	}
	return out
}

// access reads the address lists and the rate limits.
func (a *annotationReader) access(o *options) {
	cidrs := func(name, nginxName string) []netip.Prefix {
		key, v, ok := a.getAs(name, nginxName)
		if !ok && nginxName == "allowlist-source-range" {
			key, v, ok = a.getAs(name, "whitelist-source-range") // its older name
		}
		if !ok {
			return nil
		}
		out, err := ParseAddressList(v)
		if err != nil {
			// Falling back to no list would let in whom the list keeps out.
			a.refuse(o, fmt.Sprintf("annotation %s=%q is invalid (want CIDRs or addresses separated by commas); every request is refused (403) until it is fixed", key, v))
			return nil
		}
		return out
	}
	o.Policy.Allow = cidrs("allowlist-source-range", "allowlist-source-range")
	o.Policy.Deny = cidrs("denylist-source-range", "denylist-source-range")

	rl := &table.RateLimit{}
	if key, v, ok := a.get("limit-rps"); ok {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			a.bad(key, v, "requests a second, more than 0")
		} else {
			rl.RPS = f
		}
	} else if key, v, ok := a.get("limit-rpm"); ok {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			a.bad(key, v, "requests a minute, more than 0")
		} else {
			rl.RPS = f / 60
		}
	}
	bkey, bv, bok := a.getAs("limit-burst", "")            // read: alone they do nothing
	mkey, mv, mok := a.nginxOnly("limit-burst-multiplier") //
	if rl.RPS > 0 {
		rl.Burst = int(math.Ceil(rl.RPS * 5)) // ingress-nginx's default burst multiplier
		if bok {
			if n, err := strconv.Atoi(bv); err != nil || n < 1 {
				a.bad(bkey, bv, "a whole number of requests, at least 1")
			} else {
				rl.Burst = n
			}
		} else if mok {
			if n, err := strconv.Atoi(mv); err != nil || n < 1 {
				a.bad(mkey, mv, "a whole number, at least 1")
			} else {
				rl.Burst = int(math.Ceil(rl.RPS * float64(n)))
			}
		}
	}
	if key, v, ok := a.get("limit-connections"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			a.bad(key, v, "a whole number of connections, at least 1")
		} else {
			rl.Connections = n
		}
	}
	if rl.RPS > 0 || rl.Connections > 0 {
		o.Policy.RateLimit = rl
	}
}

func (a *annotationReader) cors(o *options) {
	on, _, _ := a.boolean("enable-cors")
	if !on {
		for _, n := range []string{"cors-allow-origin", "cors-allow-methods", "cors-allow-headers", "cors-expose-headers", "cors-allow-credentials", "cors-max-age"} {
			a.get(n) // read: without enable-cors they do nothing, as in ingress-nginx
		}
		return
	}
	// ingress-nginx's defaults.
	c := &table.CORS{AllowOrigins: []string{"*"}, AllowMethods: "GET, PUT, POST, DELETE, PATCH, OPTIONS",
		AllowHeaders:     "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization",
		AllowCredentials: true, MaxAge: 1728000}
	if key, v, ok := a.get("cors-allow-origin"); ok {
		c.AllowOrigins = nil
		for _, origin := range SplitList(v) {
			origin = strings.TrimSuffix(origin, "/")
			if origin == "*" {
				c.AllowOrigins, c.Origins = []string{"*"}, nil
				break
			}
			p, ok := table.ParseOriginPattern(origin)
			if !ok {
				// Never "*" in its place: that would widen the policy the Ingress asked for.
				a.problems = append(a.problems, problemText{table.ReasonInvalidAnnotation, fmt.Sprintf(
					"annotation %s=%q is invalid (want * or origins such as https://app.example.com or https://*.example.com, separated by commas); no origin is allowed until it is fixed", key, v)})
				c.AllowOrigins, c.Origins = []string{}, nil
				break
			}
			c.AllowOrigins, c.Origins = append(c.AllowOrigins, origin), append(c.Origins, p)
		}
	}
	str := func(name string, dst *string) {
		if key, v, ok := a.get(name); ok {
			if !table.ValidHeaderValue(v) {
				a.bad(key, v, "a header value")
				return
			}
			*dst = v
		}
	}
	str("cors-allow-methods", &c.AllowMethods)
	str("cors-allow-headers", &c.AllowHeaders)
	str("cors-expose-headers", &c.ExposeHeaders)
	if b, _, ok := a.boolean("cors-allow-credentials"); ok {
		c.AllowCredentials = b
	}
	if key, v, ok := a.get("cors-max-age"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			a.bad(key, v, "seconds, 0 or more")
		} else {
			c.MaxAge = n
		}
	}
	o.Policy.CORS = c
}

func (a *annotationReader) timeouts(o *options) {
	d := func(name string, dst *time.Duration) {
		key, v, ok := a.get(name)
		if !ok {
			return
		}
		// ingress-nginx takes whole seconds; a Go duration ("500ms", "2m") works too.
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			*dst = time.Duration(n) * time.Second
			return
		}
		if t, err := time.ParseDuration(v); err == nil && t > 0 {
			*dst = t
			return
		}
		a.bad(key, v, "seconds (60) or a duration (500ms, 2m), more than 0")
	}
	d("proxy-connect-timeout", &o.Policy.Timeouts.Connect)
	d("proxy-read-timeout", &o.Policy.Timeouts.Read)
	d("proxy-send-timeout", &o.Policy.Timeouts.Send)
}

// basicAuth reads auth-type basic with auth-secret, auth-secret-type and auth-realm.
func (a *annotationReader) basicAuth(o *options) {
	_, secret, _ := a.get("auth-secret")
	stkey, stype, _ := a.get("auth-secret-type")
	_, realm, _ := a.get("auth-realm")
	key, v, ok := a.get("auth-type")
	if !ok {
		return
	}
	ref := &authRef{key: key, realm: realm}
	if strings.ToLower(v) != "basic" {
		// Asked for authentication metalgate cannot do: refuse everyone rather than let
		// everyone in (build reports it).
		ref.unsupported = fmt.Sprintf("auth-type %q is not supported (basic is; digest is not)", v)
	}
	if ref.realm == "" {
		ref.realm = "Authentication Required"
	}
	if ns, name, ok := strings.Cut(secret, "/"); ok {
		ref.namespace, ref.name = ns, name
	} else {
		ref.name = secret
	}
	switch stype {
	case "", "auth-file":
	case "auth-map":
		ref.asMap = true
	default:
		a.bad(stkey, stype, "auth-file or auth-map")
	}
	// Without a usable Secret the route refuses everyone: build reports why.
	o.auth = ref
}

// externalAuth reads auth-url, auth-signin, auth-method, auth-response-headers and
// auth-request-redirect.
func (a *annotationReader) externalAuth(o *options) {
	ref := &extAuthRef{method: http.MethodGet}
	if key, v, ok := a.get("auth-signin"); ok {
		if table.ValidSignin(v) {
			ref.signin = v
		} else {
			a.bad(key, v, "an absolute http:// or https:// URL with a host and no user, no spaces or backslashes; variables "+
				strings.Join(table.SigninVariables(), ", ")+" may stand for parts of it")
		}
	}
	if key, v, ok := a.get("auth-method"); ok {
		switch m := strings.ToUpper(v); m {
		case http.MethodGet, http.MethodHead, http.MethodPost:
			ref.method = m
		default:
			a.bad(key, v, "GET, HEAD or POST")
		}
	}
	if key, v, ok := a.get("auth-response-headers"); ok {
		for _, n := range SplitList(v) {
			if !table.ValidHeaderName(n) || table.ProtectedHeader(n) {
				a.bad(key, v, "header names separated by commas")
				ref.responseHeaders = nil
				break
			}
			ref.responseHeaders = append(ref.responseHeaders, table.CanonicalHeader(n))
		}
	}
	_, ref.requestRedirect, _ = a.get("auth-request-redirect")
	key, v, ok := a.get("auth-url")
	if !ok {
		return
	}
	ref.key, ref.url = key, v
	o.extAuth = ref // resolved (or refused: then every request is) at build
}

// canary reads canary and its rules (ingress-nginx's canary-* annotations).
func (a *annotationReader) canary(o *options) {
	c := &table.CanaryRule{WeightTotal: 100}
	_, c.Header, _ = a.get("canary-by-header")
	_, c.HeaderValue, _ = a.get("canary-by-header-value")
	if key, v, ok := a.get("canary-by-header-pattern"); ok {
		re, err := regexp.Compile(v)
		if err != nil {
			a.bad(key, v, "a regular expression (RE2)")
		} else {
			c.HeaderPattern = re
		}
	}
	_, c.Cookie, _ = a.get("canary-by-cookie")
	if key, v, ok := a.get("canary-weight-total"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			a.bad(key, v, "a whole number, at least 1")
		} else {
			c.WeightTotal = n
		}
	}
	if key, v, ok := a.get("canary-weight"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n > c.WeightTotal {
			a.bad(key, v, fmt.Sprintf("a whole number from 0 to %d (canary-weight-total)", c.WeightTotal))
		} else {
			c.Weight = n
		}
	}
	if c.Header != "" && !table.ValidHeaderName(c.Header) {
		a.bad(PrefixMetalgate+"canary-by-header", c.Header, "a header name")
		c.Header = ""
	}
	if on, _, _ := a.boolean("canary"); on {
		o.Canary = c
	}
}

// refuse makes every request to the Ingress refused (Policy.Refuse) and reports why.
func (a *annotationReader) refuse(o *options, msg string) {
	a.problems = append(a.problems, problemText{table.ReasonInvalidAnnotation, msg})
	if o.Policy.Refuse == "" {
		o.Policy.Refuse = msg
	}
}

// protections refuses an Ingress that asks for a protection the proxy does not enforce
// (Protections, Supported false): serving it would let in every client it keeps out.
func (a *annotationReader) protections(o *options) {
	if !a.nginx {
		return
	}
	for _, p := range Protections() {
		if p.Supported {
			continue
		}
		v, ok := a.ann[PrefixNginx+p.Nginx]
		if !ok || slices.Contains(p.Inert, strings.ToLower(strings.TrimSpace(v))) {
			continue // an inert value: unread reports it as unsupported
		}
		a.read[PrefixNginx+p.Nginx] = true
		msg := fmt.Sprintf("annotation %s%s asks for %s, which metalgate does not support; every request is refused (403) until it is removed", PrefixNginx, p.Nginx, p.Protects)
		a.problems = append(a.problems, problemText{table.ReasonUnsupportedAnnotation, msg})
		if o.Policy.Refuse == "" {
			o.Policy.Refuse = msg
		}
	}
}

// unread reports the nginx annotations that nothing read: refused snippets, and those
// metalgate does not support. They are never silently ignored.
func (a *annotationReader) unread() {
	if !a.nginx {
		return
	}
	var keys []string
	for k := range a.ann {
		if strings.HasPrefix(k, PrefixNginx) && !a.read[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := strings.TrimPrefix(k, PrefixNginx)
		if snippets[name] {
			a.problems = append(a.problems, problemText{table.ReasonRefusedAnnotation, fmt.Sprintf(
				"annotation %s is refused: snippets paste configuration text into the proxy, the way ingress-nginx got its remote-code-execution CVEs; use metalgate.io/request-headers-set, response-headers-set and the other annotations instead", k)})
			continue
		}
		a.problems = append(a.problems, problemText{table.ReasonUnsupportedAnnotation, fmt.Sprintf(
			"annotation %s is not supported by metalgate and has no effect (kubectl metalgate migrate lists what maps)", k)})
	}
}

// SplitList splits a list: entries separated by commas or white space, empty ones dropped.
// Every list annotation is read with it, and kubectl metalgate migrate reads ingress-nginx's
// ConfigMap lists with it, so that both take the same entries.
func SplitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// ParseAddressList parses a list (SplitList) of CIDRs and addresses, an address standing for
// its /32 or /128, into masked prefixes. The error names the first entry that is neither.
func ParseAddressList(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range SplitList(v) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			addr, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR", s)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// ParseSize parses an nginx size, as proxy-body-size and ingress-nginx's ConfigMap take it:
// "1024", "512k", "8m", "1g" (powers of 1024, either case), 0 or more.
func ParseSize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult, s = 1<<10, s[:n-1]
		case 'm':
			mult, s = 1<<20, s[:n-1]
		case 'g':
			mult, s = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, errors.New("not a size (1024, 512k, 8m, 1g; 0 for unlimited)")
	}
	return v * mult, nil
}
