package ingress

// AnnotationInfo describes one Ingress annotation the proxy reads: for docs, for kubectl
// metalgate migrate, and for a test that keeps the list true to the parser.
type AnnotationInfo struct {
	// Name is the metalgate.io/ name without the prefix.
	Name string
	// Nginx is the name of the nginx.ingress.kubernetes.io/ form ("" when there is none).
	Nginx string
	// Values says what it takes; Default what applies without it.
	Values, Default string
	// Change says how the nginx form's behaviour differs from ingress-nginx's ("" when it is
	// the same).
	Change string
}

// Annotations lists every annotation the proxy reads, in the order of docs/proxy.md.
func Annotations() []AnnotationInfo {
	return []AnnotationInfo{
		{"backend-protocol", "backend-protocol", "http, https, h2c, grpc (= h2c), grpcs", "http", "FCGI and AUTO_HTTP are not supported"},
		{"proxy-ssl-secret", "proxy-ssl-secret", "a Secret of the Ingress's namespace with ca.crt (CAs to verify the backend) and/or tls.crt and tls.key (client certificate)", "none", "a Secret of another namespace is refused; an unusable Secret makes the backend answer 502, never an unverified connection"},
		{"proxy-ssl-verify", "proxy-ssl-verify", "on, off: verify the backend's certificate chain and name", "on when proxy-ssl-secret has ca.crt, else off", "ingress-nginx verifies only with on, even with a CA"},
		{"proxy-ssl-name", "proxy-ssl-name", "the name the backend's certificate must hold (and the SNI)", "<service>.<namespace>.svc", "ingress-nginx's default is the upstream's internal name"},
		{"ssl-passthrough", "ssl-passthrough", "true, false: TLS for the Ingress's hosts goes to the backend undecrypted, routed by SNI", "false", "needs the proxy's --enable-ssl-passthrough, as ingress-nginx's; exact hosts only; the backend is each rule's first path's; on the HTTPS listener no path, policy or header rule applies to those connections"},
		{"proxy-ssl-server-name", "proxy-ssl-server-name", "on, off: send the name as SNI", "off", ""},
		{"proxy-body-size", "proxy-body-size", "0 (unlimited), 1024, 512k, 8m, 1g", "--default-body-size (1m)", ""},
		{"load-balance", "load-balance", "round-robin, least-request, ewma, hash", "round-robin", "ingress-nginx's chash, chashsubset, sticky_balanced and sticky_persistent are refused (InvalidAnnotation) and round-robin used: use upstream-hash-by or affinity"},
		{"hash-by", "", "header:NAME, cookie:NAME, client-ip", "client-ip when hash", ""},
		{"", "upstream-hash-by", "$remote_addr, $binary_remote_addr, $http_NAME, $cookie_NAME", "", "other nginx variables are refused (InvalidAnnotation)"},
		{"affinity", "affinity", "cookie", "none", "with affinity-mode persistent the cookie is an HMAC of the endpoint under a key per install; balanced (the default) a random session key; without session-cookie-name the cookie is metalgate-affinity (ingress-nginx's: INGRESSCOOKIE), so sessions start anew after the move"},
		{"affinity-cookie-name", "session-cookie-name", "cookie name", "metalgate-affinity", ""},
		{"affinity-cookie-path", "session-cookie-path", "a path starting with / (no ';', spaces or control characters)", "/", "ingress-nginx's default is the rule's path"},
		{"affinity-cookie-max-age", "session-cookie-max-age", "seconds, more than 0: the cookie's Max-Age", "none: a session cookie", ""},
		{"affinity-cookie-expires", "session-cookie-expires", "seconds, more than 0: the cookie's Expires, that long after the response", "none: a session cookie", ""},
		{"affinity-cookie-samesite", "session-cookie-samesite", "None (adds Secure: browsers refuse None without it), Lax, Strict", "Lax", "without it ingress-nginx sends no SameSite (browsers then use Lax)"},
		{"affinity-cookie-secure", "session-cookie-secure", "true: Secure on every response; false: the default", "Secure on requests that came over HTTPS", ""},
		{"affinity-mode", "affinity-mode", "balanced, persistent", "balanced", ""},
		{"use-regex", "use-regex", "true, false: paths are RE2 regular expressions, Anchored, any case", "false", "RE2, not PCRE: no look-around or back references"},
		{"rewrite-target", "rewrite-target", "a path; with use-regex (or $N in it) the whole path becomes it with $1…$9 from the groups, else the matched prefix is replaced", "none", "the nginx form always works as a regex, as in ingress-nginx"},
		{"app-root", "app-root", "a path: / is redirected there (302)", "none", ""},
		{"permanent-redirect", "permanent-redirect", "an absolute URL or a path", "none", ""},
		{"permanent-redirect-code", "permanent-redirect-code", "301, 308", "301", "ingress-nginx used any code from 300 to 308; another than 301 or 308 is refused (InvalidAnnotation) and 301 used"},
		{"temporary-redirect", "temporal-redirect", "an absolute URL or a path", "none", ""},
		{"temporary-redirect-code", "temporal-redirect-code", "302, 303, 307", "302", "ingress-nginx used any code from 300 to 307; another than 302, 303 or 307 is refused (InvalidAnnotation) and 302 used"},
		{"ssl-redirect", "ssl-redirect", "true, false: plain HTTP gets 308 to https://", "false", "ingress-nginx redirects hosts with TLS by default; metalgate only with the annotation (its nginx form redirects only hosts with TLS, like ingress-nginx)"},
		{"force-ssl-redirect", "force-ssl-redirect", "true, false: 308 to https:// even without TLS on the host", "false", ""},
		{"server-alias", "server-alias", "more host names, comma-separated", "none", "an alias another namespace owns is refused (HostConflict)"},
		{"upstream-vhost", "upstream-vhost", "the Host header the backend sees", "the client's", ""},
		{"x-forwarded-prefix", "x-forwarded-prefix", "the X-Forwarded-Prefix value", "none", ""},
		{"request-headers-set", "", `"Name: value" lines: set before forwarding`, "none", "ingress-nginx needed a configuration snippet (refused here) or a ConfigMap"},
		{"request-headers-add", "", `"Name: value" lines: added`, "none", ""},
		{"request-headers-remove", "", "header names", "none", ""},
		{"response-headers-set", "", `"Name: value" lines: set on the response`, "none", ""},
		{"response-headers-add", "", `"Name: value" lines`, "none", ""},
		{"response-headers-remove", "", "header names", "none", ""},
		{"allowlist-source-range", "allowlist-source-range", "CIDRs; others get 403", "all", "whitelist-source-range is read too"},
		{"denylist-source-range", "denylist-source-range", "CIDRs that get 403", "none", ""},
		{"limit-rps", "limit-rps", "requests a second per client address", "none", "429 with Retry-After, not 503"},
		{"limit-rpm", "limit-rpm", "requests a minute per client address", "none", "429 with Retry-After; with limit-rps too only limit-rps applies, where ingress-nginx enforced both; the burst is 5 (or limit-burst-multiplier) times the rate a second, ingress-nginx's times the rate a minute (kubectl metalgate migrate writes limit-burst to keep ingress-nginx's)"},
		{"limit-burst", "", "requests at once", "5 × the rate", ""},
		{"", "limit-burst-multiplier", "burst = rate × this", "5", "with limit-rpm it multiplies the rate a second, ingress-nginx's the rate a minute (kubectl metalgate migrate writes limit-burst to keep ingress-nginx's)"},
		{"limit-connections", "limit-connections", "requests in flight per client address", "none", "429, not 503"},
		{"enable-cors", "enable-cors", "true, false", "false", ""},
		{"cors-allow-origin", "cors-allow-origin", "* or origins, comma-separated; https://*.example.org allows one or more labels", "*", "a leftmost * stands for one or more labels, where ingress-nginx's stood for exactly one (https://*.example.org allows https://a.b.example.org here, not there); an entry that is not an http(s) origin (null, another scheme, no scheme) allows no origin at all, where ingress-nginx skipped that entry"},
		{"cors-allow-methods", "cors-allow-methods", "methods", "GET, PUT, POST, DELETE, PATCH, OPTIONS", ""},
		{"cors-allow-headers", "cors-allow-headers", "headers", "ingress-nginx's list", ""},
		{"cors-expose-headers", "cors-expose-headers", "headers", "none", ""},
		{"cors-allow-credentials", "cors-allow-credentials", "true, false", "true", ""},
		{"cors-max-age", "cors-max-age", "seconds", "1728000", ""},
		{"canary", "canary", "true: the Ingress is a canary of the routes with its host and path (same namespace)", "false", "only the canary's load-balance and affinity annotations apply to its backend, as in ingress-nginx"},
		{"canary-by-header", "canary-by-header", "a header: always/never, or canary-by-header-value / -pattern", "none", ""},
		{"canary-by-header-value", "canary-by-header-value", "the value that selects the canary", "always", ""},
		{"canary-by-header-pattern", "canary-by-header-pattern", "a regular expression the value must match", "none", "RE2, not PCRE"},
		{"canary-by-cookie", "canary-by-cookie", "a cookie: always/never", "none", ""},
		{"canary-weight", "canary-weight", "the share of other requests, out of canary-weight-total", "0", ""},
		{"canary-weight-total", "canary-weight-total", "the total of the weights", "100", ""},
		{"auth-type", "auth-type", "basic", "none", "digest is not supported; without auth-realm the realm is Authentication Required, where ingress-nginx's was empty"},
		{"auth-secret", "auth-secret", "a Secret of the Ingress's namespace with htpasswd lines (bcrypt at cost 12 or less, $apr1$, {SHA})", "none", "a Secret of another namespace is refused; an unusable Secret (a bcrypt cost over 12 included) refuses every request"},
		{"auth-secret-type", "auth-secret-type", "auth-file (key auth), auth-map (a key a user)", "auth-file", ""},
		{"auth-realm", "auth-realm", "the realm shown to users", "Authentication Required", ""},
		{"auth-url", "auth-url", "http://SERVICE[.NAMESPACE.svc.cluster.local][:PORT]/path, or http(s)://HOST[:PORT]/path of a host --external-auth-hosts lists", "none", "a Service of another namespace only when a ReferenceGrant there allows Ingresses of this one; outside hosts only when listed, never an address, loopback or link-local; anything else refuses every request (500)"},
		{"auth-signin", "auth-signin", "an absolute http(s) URL where a 401 sends the client (302, with rd=); may hold $scheme, $host, $best_http_host, $request_uri, $escaped_request_uri", "none", "anything else than an absolute http(s) URL with a host is refused (InvalidAnnotation); variables are escaped for where they stand; $host follows the redirect policy"},
		{"auth-method", "auth-method", "GET, HEAD, POST", "GET", "PUT, PATCH, DELETE, OPTIONS, CONNECT and TRACE, which ingress-nginx took, are refused (InvalidAnnotation) and GET used"},
		{"auth-response-headers", "auth-response-headers", "headers copied from the auth answer into the request", "none", "the client's own headers of those names are dropped"},
		{"auth-request-redirect", "auth-request-redirect", "the X-Auth-Request-Redirect value", "the request URI", ""},
		{"auth-tls-secret", "auth-tls-secret", "a Secret of the Ingress's namespace with ca.crt (the CAs client certificates must chain to; an intermediate alone anchors nothing) and optionally ca.crl", "none", "a Secret of another namespace is refused: every request for the Ingress's hosts gets 403, as for a Secret without a usable ca.crt"},
		{"auth-tls-verify-client", "auth-tls-verify-client", "on, optional, optional_no_ca, off (an invalid value is read as on)", "on", ""},
		{"auth-tls-verify-depth", "auth-tls-verify-depth", "1 to 10: the most certificates above the client's in its chain, the CA included", "1", "ingress-nginx took any depth; more than 10 is refused (InvalidAnnotation) and 1 used"},
		{"auth-tls-error-page", "auth-tls-error-page", "an absolute http(s) URL: a request refused for its certificate is redirected there (302)", "none: 400", ""},
		{"auth-tls-pass-certificate-to-upstream", "auth-tls-pass-certificate-to-upstream", "true, false: the client's certificate goes to the backend in ssl-client-cert", "false", ""},
		{"auth-tls-match-cn", "auth-tls-match-cn", "CN= and an RE2 regular expression, matched against the verified certificate's subject DN; others get 403", "none", "RE2, not PCRE; never matched on an unverified certificate (optional_no_ca); an invalid pattern refuses every request (403)"},
		{"proxy-connect-timeout", "proxy-connect-timeout", "seconds, or a duration (500ms)", "--connect-timeout", ""},
		{"proxy-read-timeout", "proxy-read-timeout", "seconds, or a duration: the response head and each read of the body", "--response-header-timeout, --upstream-read-timeout", ""},
		{"proxy-send-timeout", "proxy-send-timeout", "seconds, or a duration: each write of the request", "none", ""},
		{"custom-http-errors", "custom-http-errors", "status codes from 400 to 599, comma-separated: responses of those statuses (the backend's, and the proxy's own 502, 503, 504) get the default backend's error page with their own status", "none", "the page is asked for as GET / (X-Original-URI carries the URI) and sent with the original status whatever the error backend answers; at most 1 MiB within 10s, else a built-in page"},
		{"default-backend", "default-backend", "NAME or NAME:PORT of a Service of the Ingress's namespace (no port: its first)", "--default-backend-service", "it serves custom-http-errors' pages only: a backend without endpoints answers 503 (the page when 503 is listed), it is not proxied to"},
		{"proxy-next-upstream", "proxy-next-upstream", "error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent, off", "error timeout (without any proxy-next-upstream annotation: refused connections only)", "a request with a body is never passed on: bodies are streamed, not buffered"},
		{"proxy-next-upstream-tries", "proxy-next-upstream-tries", "attempts in all, 0 (each endpoint once) to 100", "3", ""},
		{"proxy-next-upstream-timeout", "proxy-next-upstream-timeout", "seconds or a duration: no attempt begins after it", "none (0)", ""},
	}
}

// Protection is an ingress-nginx annotation that protects the routes it is on: it refuses
// some clients or requests. The proxy never serves an Ingress without a protection it asks
// for: an unsupported one (Supported false) refuses every request to the Ingress (403, an
// UnsupportedAnnotation Warning) instead — fail closed, as an unusable auth-secret or a
// refused auth-url already do. Implementing an annotation is setting Supported (and parsing
// it), which is what makes such an Ingress serve again. kubectl metalgate migrate reports
// every protection an Ingress would lose under BREAKING.
type Protection struct {
	// Nginx is the nginx.ingress.kubernetes.io/ name.
	Nginx string
	// Protects says what it protects, for Warnings and the migrate report.
	Protects string
	// Inert are the values (case-insensitive, trimmed) that ask for no protection, such as
	// "off": those are not refused (an unsupported one is reported as any other).
	Inert []string
	// Supported says the proxy enforces it (it is in Annotations).
	Supported bool
}

// Protections lists the protecting annotations of ingress-nginx, enforced or not.
func Protections() []Protection {
	clientCert := "client-certificate authentication (mTLS)"
	return []Protection{
		{Nginx: "auth-tls-secret", Protects: clientCert, Supported: true},
		{Nginx: "auth-tls-verify-client", Protects: clientCert, Inert: []string{"off", ""}, Supported: true},
		{Nginx: "auth-tls-match-cn", Protects: clientCert + ", by the certificate's CN", Supported: true},
		{Nginx: "enable-modsecurity", Protects: "the ModSecurity web application firewall", Inert: []string{"false", ""}},
		{Nginx: "enable-owasp-core-rules", Protects: "the OWASP core rules of ModSecurity", Inert: []string{"false", ""}},
		{Nginx: "global-rate-limit", Protects: "a rate limit shared by every replica", Inert: []string{"0", ""}},
		{Nginx: "auth-type", Protects: "authentication (basic only; any other type refuses every request, 401)", Supported: true},
		{Nginx: "auth-secret", Protects: "basic authentication's users", Supported: true},
		{Nginx: "auth-url", Protects: "external authentication (a Service of the Ingress's namespace, another namespace's with a ReferenceGrant, or a host --external-auth-hosts lists; any other URL refuses every request, 500)", Supported: true},
		{Nginx: "allowlist-source-range", Protects: "an address allow-list (an invalid list refuses every request, 403)", Supported: true},
		{Nginx: "whitelist-source-range", Protects: "an address allow-list (an invalid list refuses every request, 403)", Supported: true},
		{Nginx: "denylist-source-range", Protects: "an address deny-list (an invalid list refuses every request, 403)", Supported: true},
	}
}
