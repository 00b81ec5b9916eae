package ingress

import (
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// TestAnnotations: every annotation, valid (metalgate.io form, and its ingress-nginx form when
// NginxAnnotations is on), invalid (a problem naming the annotation, and the default), and
// nginx annotations that metalgate does not implement (reported, never silently ignored).
func TestAnnotations(t *testing.T) {
	def := func(f func(o *options)) options {
		o := options{Options: table.DefaultOptions()}
		if f != nil {
			f(&o)
		}
		return o
	}
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			k := kv[i]
			if !strings.Contains(k, "/") {
				k = PrefixMetalgate + k
			}
			out[k] = kv[i+1]
		}
		return out
	}
	ng := func(name string) string { return PrefixNginx + name }
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		nginx    bool
		want     options
		problems []string // "Reason: substring of the message", in order
	}{
		{name: "none", want: def(nil)},
		{name: "protocol, redirect, body size", ann: m("backend-protocol", "grpc", "ssl-redirect", "true", "proxy-body-size", "8m"),
			want: def(func(o *options) {
				o.Protocol, o.Policy.HTTPSRedirect, o.MaxBodyBytes = table.ProtocolH2C, 308, 8<<20
			})},
		{name: "https to the backend", ann: m("backend-protocol", "HTTPS"), want: def(func(o *options) { o.Protocol = table.ProtocolHTTPS })},
		{name: "grpcs to the backend, nginx form", nginx: true, ann: m(ng("backend-protocol"), "GRPCS"), want: def(func(o *options) { o.Protocol = table.ProtocolGRPCS })},
		{name: "fcgi refused", nginx: true, ann: m(ng("backend-protocol"), "FCGI"), want: def(nil),
			problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/backend-protocol=\"FCGI\" is invalid"}},
		{name: "backend TLS settings, nginx forms", nginx: true, ann: m(ng("backend-protocol"), "HTTPS", ng("proxy-ssl-secret"), "ns/ca",
			ng("proxy-ssl-verify"), "on", ng("proxy-ssl-name"), "API.internal", ng("proxy-ssl-server-name"), "on"),
			want: def(func(o *options) {
				o.Protocol = table.ProtocolHTTPS
				o.backendTLS = &table.BackendTLSRef{Key: ng("proxy-ssl-secret"), Secret: "ns/ca", Verify: ptrTo(true), ServerName: "api.internal", SNI: true}
			})},
		{name: "backend TLS settings without https are ignored, said", ann: m("proxy-ssl-verify", "on"), want: def(nil),
			problems: []string{"InvalidAnnotation: metalgate.io/proxy-ssl-verify applies only with backend-protocol HTTPS or GRPCS"}},
		{name: "bad backend TLS values", ann: m("backend-protocol", "https", "proxy-ssl-verify", "maybe", "proxy-ssl-name", "not a name", "proxy-ssl-server-name", "yes please",
			"proxy-ssl-protocols", "TLSv1.1", "proxy-ssl-ciphers", "RC4"),
			want: def(func(o *options) {
				o.Protocol = table.ProtocolHTTPS
				o.backendTLS = &table.BackendTLSRef{Key: PrefixMetalgate + "proxy-ssl-verify"}
			}),
			problems: []string{
				"InvalidAnnotation: metalgate.io/proxy-ssl-verify=\"maybe\" is invalid (want on or off)",
				"InvalidAnnotation: metalgate.io/proxy-ssl-name=\"not a name\" is invalid (want a DNS name)",
				"InvalidAnnotation: metalgate.io/proxy-ssl-server-name=\"yes please\" is invalid",
				"InvalidAnnotation: metalgate.io/proxy-ssl-protocols=\"TLSv1.1\" is not supported",
				"InvalidAnnotation: metalgate.io/proxy-ssl-ciphers=\"RC4\" is not supported",
			}},
		{name: "hash by header", ann: m("hash-by", "header:X-User"), want: def(func(o *options) {
			o.Balance = table.Balance{Algorithm: table.Hash, HashBy: table.HashByHeader, HashKey: "X-User"}
		})},
		{name: "hash alone by client", ann: m("load-balance", "hash"), want: def(func(o *options) { o.Balance = table.Balance{Algorithm: table.Hash, HashBy: table.HashByClientIP} })},
		{name: "ewma and affinity", ann: m("load-balance", "ewma", "affinity", "cookie"), want: def(func(o *options) {
			o.Balance = table.Balance{Algorithm: table.EWMA, AffinityCookie: table.DefaultAffinityCookie}
		})},
		// Affinity cookie attributes: hostile first. A bad value is a problem naming the
		// annotation; that attribute keeps its default, the others apply.
		{name: "cookie path that would add an attribute", ann: m("affinity", "cookie", "affinity-cookie-path", "/; Domain=evil.example", "affinity-cookie-max-age", "60"),
			want: def(func(o *options) {
				o.Balance.AffinityCookie, o.Balance.AffinityCookieAttrs = table.DefaultAffinityCookie, table.CookieAttrs{MaxAge: 60}
			}), problems: []string{`InvalidAnnotation: metalgate.io/affinity-cookie-path="/; Domain=evil.example" is invalid (want a path starting with /`}},
		{name: "cookie path not a path", nginx: true, ann: m(ng("affinity"), "cookie", ng("session-cookie-path"), "app"),
			want:     def(func(o *options) { o.Balance.AffinityCookie = table.DefaultAffinityCookie }),
			problems: []string{`InvalidAnnotation: nginx.ingress.kubernetes.io/session-cookie-path="app"`}},
		{name: "cookie ages not positive seconds", ann: m("affinity", "cookie", "affinity-cookie-max-age", "-1", "affinity-cookie-expires", "1h"),
			want: def(func(o *options) { o.Balance.AffinityCookie = table.DefaultAffinityCookie }),
			problems: []string{`InvalidAnnotation: metalgate.io/affinity-cookie-max-age="-1" is invalid (want a number of seconds, more than 0)`,
				`InvalidAnnotation: metalgate.io/affinity-cookie-expires="1h"`}},
		{name: "cookie samesite and secure bad", ann: m("affinity", "cookie", "affinity-cookie-samesite", "sometimes", "affinity-cookie-secure", "yes please"),
			want: def(func(o *options) { o.Balance.AffinityCookie = table.DefaultAffinityCookie }),
			problems: []string{`InvalidAnnotation: metalgate.io/affinity-cookie-samesite="sometimes" is invalid (want None, Lax or Strict)`,
				`InvalidAnnotation: metalgate.io/affinity-cookie-secure="yes please" is invalid (want true or false)`}},
		{name: "cookie SameSite None forces Secure", ann: m("affinity", "cookie", "affinity-cookie-samesite", "none", "affinity-cookie-secure", "false"),
			want: def(func(o *options) {
				o.Balance.AffinityCookie, o.Balance.AffinityCookieAttrs = table.DefaultAffinityCookie, table.CookieAttrs{SameSite: table.SameSiteNone, Secure: true}
			})},
		{name: "cookie attributes, nginx forms", nginx: true, ann: m(ng("affinity"), "cookie", ng("session-cookie-path"), "/app", ng("session-cookie-max-age"), "3600",
			ng("session-cookie-expires"), "7200", ng("session-cookie-samesite"), "Strict", ng("session-cookie-secure"), "true"),
			want: def(func(o *options) {
				o.Balance.AffinityCookie, o.Balance.AffinityCookieAttrs = table.DefaultAffinityCookie, table.CookieAttrs{Path: "/app", MaxAge: 3600, Expires: 7200,
					SameSite: table.SameSiteStrict, Secure: true}
			})},
		{name: "cookie attributes without affinity do nothing", ann: m("affinity-cookie-path", "/app", "affinity-cookie-secure", "true"), want: def(nil)},
		{name: "body size 0 is unlimited", ann: m("proxy-body-size", "0"), want: def(func(o *options) { o.MaxBodyBytes = -1 })},
		{name: "bad body size", ann: m("proxy-body-size", "lots"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/proxy-body-size=\"lots\""}},
		{name: "prefix rewrite", ann: m("rewrite-target", "/v2"), want: def(func(o *options) { o.Policy.Rewrite = &table.Rewrite{Target: "/v2"} })},
		{name: "regex rewrite", ann: m("rewrite-target", "/$2", "use-regex", "true"),
			want: def(func(o *options) {
				o.UseRegex, o.Policy.Rewrite = true, &table.Rewrite{Target: "/$2", Regex: true}
			})},
		{name: "a group in the target makes it a regex", ann: m("rewrite-target", "/x/$1"),
			want: def(func(o *options) {
				o.UseRegex, o.Policy.Rewrite = true, &table.Rewrite{Target: "/x/$1", Regex: true}
			})},
		{name: "bad rewrite", ann: m("rewrite-target", "v2"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/rewrite-target"}},
		{name: "redirects", ann: m("permanent-redirect", "https://new.example/", "permanent-redirect-code", "308", "app-root", "/app", "force-ssl-redirect", "true"),
			want: def(func(o *options) {
				o.Policy.Redirect, o.Policy.AppRoot, o.Policy.HTTPSRedirect = &table.Redirect{URL: "https://new.example/", Code: 308}, "/app", 308
			})},
		{name: "temporary redirect", ann: m("temporary-redirect", "/elsewhere"), want: def(func(o *options) { o.Policy.Redirect = &table.Redirect{URL: "/elsewhere", Code: 302} })},
		{name: "redirect to a protocol-relative or scheme-less target", ann: m("permanent-redirect", "//evil.example", "temporary-redirect", "javascript:alert(1)"), want: def(nil),
			problems: []string{"InvalidAnnotation: metalgate.io/permanent-redirect", "InvalidAnnotation: metalgate.io/temporary-redirect"}},
		{name: "auth-signin refused: not an absolute http(s) URL with a host", nginx: true,
			ann: m("auth-url", "http://auth", ng("auth-signin"), "javascript:alert(1)"),
			want: def(func(o *options) {
				o.extAuth = &extAuthRef{key: PrefixMetalgate + "auth-url", url: "http://auth", method: "GET"}
			}),
			problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/auth-signin=\"javascript:alert(1)\" is invalid (want an absolute http:// or https:// URL"}},
		{name: "auth-signin with variables", ann: m("auth-url", "http://auth", "auth-signin", "$scheme://$host/oauth2/start?rd=$escaped_request_uri"),
			want: def(func(o *options) {
				o.extAuth = &extAuthRef{key: PrefixMetalgate + "auth-url", url: "http://auth", method: "GET", signin: "$scheme://$host/oauth2/start?rd=$escaped_request_uri"}
			})},
		{name: "bad redirect code", ann: m("permanent-redirect", "/x", "permanent-redirect-code", "200"),
			want: def(func(o *options) { o.Policy.Redirect = &table.Redirect{URL: "/x", Code: 301} }), problems: []string{"InvalidAnnotation: metalgate.io/permanent-redirect-code"}},
		{name: "aliases, vhost, prefix", ann: m("server-alias", "a.example, www.a.example", "upstream-vhost", "internal.svc:8080", "x-forwarded-prefix", "/shop"),
			want: def(func(o *options) {
				o.ServerAliases, o.Policy.UpstreamHost, o.Policy.ForwardedPrefix = []string{"a.example", "www.a.example"}, "internal.svc:8080", "/shop"
			})},
		{name: "bad alias", ann: m("server-alias", "a.example/x"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/server-alias"}},
		{name: "header edits", ann: m("request-headers-set", "X-Tenant: one\nx-env:  prod", "request-headers-remove", "cookie, x-debug",
			"response-headers-add", "Cache-Control: no-store", "response-headers-remove", "Server"),
			want: def(func(o *options) {
				o.Policy.RequestHeaders = table.HeaderEdits{Set: []table.Header{{Name: "X-Tenant", Value: "one"}, {Name: "X-Env", Value: "prod"}}, Remove: []string{"Cookie", "X-Debug"}}
				o.Policy.ResponseHeaders = table.HeaderEdits{Add: []table.Header{{Name: "Cache-Control", Value: "no-store"}}, Remove: []string{"Server"}}
			})},
		{name: "the framing headers are not editable", ann: m("request-headers-set", "Host: evil", "response-headers-remove", "transfer-encoding"), want: def(nil),
			problems: []string{"InvalidAnnotation: metalgate.io/request-headers-set", "InvalidAnnotation: metalgate.io/response-headers-remove"}},
		{name: "header value with a control character", ann: m("request-headers-add", "X-A: b\x00c"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/request-headers-add"}},
		{name: "source ranges", ann: m("allowlist-source-range", "10.0.0.0/8, 192.0.2.7", "denylist-source-range", "10.9.0.0/16"),
			want: def(func(o *options) {
				o.Policy.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
				o.Policy.Deny = []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}
			})},
		{name: "bad range refuses all", ann: m("allowlist-source-range", "10.0.0.0/33"), want: def(func(o *options) {
			o.Policy.Refuse = `annotation metalgate.io/allowlist-source-range="10.0.0.0/33" is invalid (want CIDRs or addresses separated by commas); every request is refused (403) until it is fixed`
		}), problems: []string{"InvalidAnnotation: metalgate.io/allowlist-source-range"}},
		{name: "bad deny range refuses all", nginx: true, ann: m(ng("denylist-source-range"), "evil"), want: def(func(o *options) {
			o.Policy.Refuse = `annotation nginx.ingress.kubernetes.io/denylist-source-range="evil" is invalid (want CIDRs or addresses separated by commas); every request is refused (403) until it is fixed`
		}), problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/denylist-source-range"}},
		// auth-tls-*: TestClientTLSAnnotations (clienttls_test.go).
		{name: "rate limits", ann: m("limit-rps", "10", "limit-burst", "15", "limit-connections", "4"),
			want: def(func(o *options) { o.Policy.RateLimit = &table.RateLimit{RPS: 10, Burst: 15, Connections: 4} })},
		{name: "rate limit default burst", ann: m("limit-rpm", "120"), want: def(func(o *options) { o.Policy.RateLimit = &table.RateLimit{RPS: 2, Burst: 10} })},
		{name: "bad rate", ann: m("limit-rps", "-1"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/limit-rps"}},
		{name: "cors defaults", ann: m("enable-cors", "true"), want: def(func(o *options) {
			o.Policy.CORS = &table.CORS{AllowOrigins: []string{"*"}, AllowMethods: "GET, PUT, POST, DELETE, PATCH, OPTIONS",
				AllowHeaders:     "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization",
				AllowCredentials: true, MaxAge: 1728000}
		})},
		{name: "cors set", ann: m("enable-cors", "true", "cors-allow-origin", "https://a.example, https://b.example/", "cors-allow-credentials", "false", "cors-max-age", "60", "cors-allow-methods", "GET"),
			want: def(func(o *options) {
				o.Policy.CORS = &table.CORS{AllowOrigins: []string{"https://a.example", "https://b.example"},
					Origins:      []table.OriginPattern{{Scheme: "https", Host: "a.example", Port: 443}, {Scheme: "https", Host: "b.example", Port: 443}},
					AllowMethods: "GET",
					AllowHeaders: "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization", MaxAge: 60}
			})},
		{name: "cors wildcard origin", ann: m("enable-cors", "true", "cors-allow-origin", "https://*.example.org"),
			want: def(func(o *options) {
				o.Policy.CORS = &table.CORS{AllowOrigins: []string{"https://*.example.org"}, Origins: []table.OriginPattern{{Scheme: "https", Host: ".example.org", Wildcard: true, Port: 443}},
					AllowMethods: "GET, PUT, POST, DELETE, PATCH, OPTIONS", AllowHeaders: "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization",
					AllowCredentials: true, MaxAge: 1728000}
			})},
		{name: "cors invalid origin allows none, never *", ann: m("enable-cors", "true", "cors-allow-origin", "https://a.example, evil"),
			want: def(func(o *options) {
				o.Policy.CORS = &table.CORS{AllowOrigins: []string{}, AllowMethods: "GET, PUT, POST, DELETE, PATCH, OPTIONS",
					AllowHeaders:     "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization",
					AllowCredentials: true, MaxAge: 1728000}
			}), problems: []string{"InvalidAnnotation: metalgate.io/cors-allow-origin"}},
		{name: "cors options without enable-cors do nothing", ann: m("cors-allow-origin", "https://a.example"), want: def(nil)},
		{name: "timeouts", ann: m("proxy-connect-timeout", "3", "proxy-read-timeout", "500ms", "proxy-send-timeout", "2m"),
			want: def(func(o *options) {
				o.Policy.Timeouts = table.Timeouts{Connect: 3 * time.Second, Read: 500 * time.Millisecond, Send: 2 * time.Minute}
			})},
		{name: "bad timeout", ann: m("proxy-read-timeout", "0"), want: def(nil), problems: []string{"InvalidAnnotation: metalgate.io/proxy-read-timeout"}},

		// The ingress-nginx forms.
		{name: "nginx forms are ignored unless enabled", ann: m(ng("rewrite-target"), "/$1", ng("configuration-snippet"), "more_set_headers x"), want: def(nil)},
		{name: "nginx forms", nginx: true, ann: m(ng("rewrite-target"), "/$2", ng("backend-protocol"), "GRPC", ng("ssl-redirect"), "true",
			ng("whitelist-source-range"), "10.0.0.0/8", ng("limit-rps"), "5", ng("limit-burst-multiplier"), "3", ng("load-balance"), "round_robin",
			ng("upstream-hash-by"), "$http_x_user", ng("affinity"), "cookie", ng("session-cookie-name"), "route", ng("temporal-redirect"), "https://t.example",
			ng("proxy-read-timeout"), "120"),
			want: def(func(o *options) {
				o.Protocol, o.UseRegex = table.ProtocolH2C, true
				o.Balance = table.Balance{Algorithm: table.RoundRobin, AffinityCookie: "route"}
				o.Policy.Rewrite = &table.Rewrite{Target: "/$2", Regex: true}
				o.Policy.HTTPSRedirect, o.Policy.HTTPSOnlyTLS = 308, true
				o.Policy.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
				o.Policy.RateLimit = &table.RateLimit{RPS: 5, Burst: 15}
				o.Policy.Redirect = &table.Redirect{URL: "https://t.example", Code: 302}
				o.Policy.Timeouts.Read = 120 * time.Second
			})},
		{name: "nginx hash by a variable", nginx: true, ann: m(ng("upstream-hash-by"), "$remote_addr"), want: def(func(o *options) { o.Balance = table.Balance{Algorithm: table.Hash, HashBy: table.HashByClientIP} })},
		{name: "nginx hash by something metalgate cannot", nginx: true, ann: m(ng("upstream-hash-by"), "$request_uri"), want: def(nil),
			problems: []string{"InvalidAnnotation: nginx.ingress.kubernetes.io/upstream-hash-by"}},
		{name: "the metalgate.io form wins", nginx: true, ann: m("proxy-body-size", "1k", ng("proxy-body-size"), "1m"),
			want: def(func(o *options) { o.MaxBodyBytes = 1 << 10 })},
		{name: "snippets refused, unknown reported", nginx: true, ann: m(ng("configuration-snippet"), "more_set_headers x", ng("server-snippet"), "location /x {}",
			ng("session-cookie-change-on-failure"), "true", ng("enable-opentelemetry"), "true"),
			want: def(nil), problems: []string{
				"RefusedAnnotation: nginx.ingress.kubernetes.io/configuration-snippet is refused",
				"UnsupportedAnnotation: nginx.ingress.kubernetes.io/enable-opentelemetry",
				"RefusedAnnotation: nginx.ingress.kubernetes.io/server-snippet is refused",
				"UnsupportedAnnotation: nginx.ingress.kubernetes.io/session-cookie-change-on-failure",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := parseOptions(tc.ann, tc.nginx)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateComparable(netip.Prefix{}), cmp.AllowUnexported(options{}, authRef{}, extAuthRef{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %v, want %d: %v", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				reason, sub, _ := strings.Cut(tc.problems[i], ": ")
				if p.reason != reason || !strings.Contains(p.msg, sub) {
					t.Errorf("problem %d: %s: %s; want %s containing %q", i, p.reason, p.msg, reason, sub)
				}
			}
		})
	}
}

// TestSigninValidated: an auth-signin URL is where a 401 sends the client; only an absolute
// http:// or https:// URL with a host of its own is taken (its variables filled in first).
func TestSigninValidated(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		// hostile first
		{"javascript:alert(1)", false},
		{"data:text/html,<script>x</script>", false},
		{"//evil.example/start", false},
		{"/start", false},
		{"start", false},
		{"ftp://login.example/", false},
		{"https://", false},
		{"https:///start", false},
		{"https://user@evil.example/start", false},
		{"https://login.example@evil.example/", false},
		{"https://login.example/a b", false},
		{"https://login.example/\r\nX: y", false},
		{"https:\\\\evil.example\\start", false},
		{"https://evil.example%2f.login.example/", false},
		{"https://$request_uri", false}, // the request's path as the host
		{"https://login_example/", false},
		// what Ingresses use
		{"https://login.example/start", true},
		{"http://login.example:8080/start?x=1", true},
		{"HTTPS://Login.Example/", true},
		{"https://[2001:db8::1]/start", true},
		{"$scheme://$host/oauth2/start?rd=$escaped_request_uri", true},
		{"https://$best_http_host/oauth2/start?rd=$request_uri", true},
		{"https://login.example/start?next=$arg_next", true}, // another $name is literal
	} {
		got, problems := parseOptions(map[string]string{PrefixMetalgate + "auth-url": "http://auth", PrefixMetalgate + "auth-signin": tc.v}, false)
		if ok := got.extAuth.signin == tc.v; ok != tc.ok || ok == (len(problems) > 0) {
			t.Errorf("auth-signin %q: taken %v, problems %v; want taken %v", tc.v, ok, problems, tc.ok)
		}
		for _, p := range problems {
			if !strings.Contains(p.msg, PrefixMetalgate+"auth-signin") {
				t.Errorf("auth-signin %q: problem %q does not name the annotation", tc.v, p.msg)
			}
		}
	}
}

// TestRegexAndAliasRoutes: use-regex paths match as ingress-nginx's (Anchored, any case,
// before prefixes, longest first); a path that is not RE2 is refused with a problem and the
// rest works; server-alias hosts serve the Ingress's rules, and an alias another namespace
// owns is refused like any other host.
func TestRegexAndAliasRoutes(t *testing.T) {
	re := ingress("re", 0, path{"r.com", "/api/v[0-9]+/(.*)", "ImplementationSpecific", "regex"}, path{"r.com", "/api/v1/special/(.*)", "ImplementationSpecific", "longer"},
		path{"r.com", "/bad(", "ImplementationSpecific", "bad"})
	re.Annotations = map[string]string{PrefixMetalgate + "use-regex": "true"}
	plain := ingress("plain", 1, path{"r.com", "/api", "Prefix", "prefix"})
	alias := ingress("alias", 2, path{"a.com", "/", "Prefix", "aliased"})
	alias.Annotations = map[string]string{PrefixMetalgate + "server-alias": "www.a.com, taken.com"}
	other := ingress("other", 0, path{"taken.com", "/", "Prefix", "theirs"})
	other.Namespace = "elsewhere"
	tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{re, plain, alias, other},
		Services: []*corev1.Service{svc("regex"), svc("longer"), svc("prefix"), svc("aliased"), svc("bad")}})
	var reasons []string
	for _, p := range problems {
		if p.Reason != table.ReasonMissingService { // the Services of the other namespace are not given
			reasons = append(reasons, p.Object.Name+" "+p.Reason)
		}
	}
	if diff := cmp.Diff([]string{"re InvalidRule", "alias HostConflict"}, reasons); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
	}
	for _, tc := range []struct{ host, path, want string }{
		{"r.com", "/api/v2/users", "regex"},
		{"r.com", "/API/V7/x", "regex"},          // any case
		{"r.com", "/api/v1/special/x", "longer"}, // the longest pattern first
		{"r.com", "/api/vx", "prefix"},           // no regex matches: the prefix
		{"r.com", "/x/api/v1/y", ""},             // Anchored at the start
		{"www.a.com", "/anything", "aliased"},    // an alias
		{"taken.com", "/", "theirs"},             // another namespace's host stays theirs
	} {
		r := tab.Lookup(tc.host, tc.path)
		got := ""
		if r != nil {
			got = r.Backend.Service.Name
		}
		if got != tc.want {
			t.Errorf("%s%s → %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
}

// TestAnnotationCatalog keeps Annotations() true to the parser: every nginx form it lists is
// read (so never reported as unsupported), and every metalgate.io name that has the same
// nginx name is read too (it shadows the nginx form).
func TestAnnotationCatalog(t *testing.T) {
	for _, a := range Annotations() {
		for _, key := range []string{a.Nginx, a.Name} {
			if key == "" || key == a.Name && a.Nginx != a.Name {
				continue
			}
			ann := map[string]string{PrefixNginx + a.Nginx: "x"}
			if key == a.Name {
				ann[PrefixMetalgate+a.Name] = "x"
			}
			_, problems := parseOptions(ann, true)
			for _, p := range problems {
				if p.reason == table.ReasonUnsupportedAnnotation {
					t.Errorf("catalog entry %s/%s: %s", a.Name, a.Nginx, p.msg)
				}
			}
		}
	}
}

// TestCanaryAttachment: a canary needs a main route of its own namespace; one canary a route.
func TestCanaryAttachment(t *testing.T) {
	canary := func(name string, age int, p path) *networkingv1.Ingress {
		ing := ingress(name, age, p)
		ing.Annotations = map[string]string{PrefixMetalgate + "canary": "true", PrefixMetalgate + "canary-weight": "10"}
		return ing
	}
	main := ingress("main", 0, path{"m.com", "/app", "Prefix", "stable"})
	first := canary("first", 1, path{"m.com", "/app", "Prefix", "canary"})
	second := canary("second", 2, path{"m.com", "/app", "Prefix", "canary"})
	orphan := canary("orphan", 3, path{"m.com", "/other", "Prefix", "canary"})
	foreign := canary("foreign", 4, path{"m.com", "/app", "Prefix", "canary"})
	foreign.Namespace = "elsewhere"
	tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{main, first, second, orphan, foreign},
		Services: []*corev1.Service{svc("stable"), svc("canary")}})
	var got []string
	for _, p := range problems {
		if p.Reason != table.ReasonMissingService {
			got = append(got, p.Object.Name+" "+p.Reason)
		}
	}
	if diff := cmp.Diff([]string{"second PathConflict", "orphan InvalidRule", "foreign InvalidRule"}, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
	}
	r := tab.Lookup("m.com", "/app/x")
	if r == nil || r.Backend.Service.Name != "stable" || r.Canary == nil || r.Canary.Backend.Service.Name != "canary" || r.Canary.Weight != 10 || r.Canary.Source.Name != "first" {
		t.Errorf("route %+v", r)
	}
	if r := tab.Lookup("m.com", "/other"); r != nil {
		t.Errorf("a canary without a main route routes: %+v", r)
	}
}

// TestBasicAuthSecrets: the htpasswd Secret is read from the Ingress's namespace only; an
// unusable one leaves the route with no users (it refuses everyone) and a problem naming why.
func TestBasicAuthSecrets(t *testing.T) {
	sec := func(ns, name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	good := "alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/"
	secrets := []*corev1.Secret{
		sec("ns", "file", map[string]string{"auth": good}),
		sec("ns", "map", map[string]string{"bob": "{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A="}),
		sec("ns", "plain", map[string]string{"auth": "eve:password"}),
		sec("other", "theirs", map[string]string{"auth": good}),
		// cost 13: about a second of CPU for each wrong password (31 would be days).
		sec("ns", "costly", map[string]string{"auth": good + "\nhal:$2y$13$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm"}),
	}
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		wantUsers []string
		problem   string
	}{
		{"auth-file", map[string]string{"auth-type": "basic", "auth-secret": "file"}, []string{"alice"}, ""},
		{"auth-map", map[string]string{"auth-type": "basic", "auth-secret": "map", "auth-secret-type": "auth-map"}, []string{"bob"}, ""},
		{"same namespace spelled out", map[string]string{"auth-type": "basic", "auth-secret": "ns/file"}, []string{"alice"}, ""},
		{"another namespace", map[string]string{"auth-type": "basic", "auth-secret": "other/theirs"}, nil, "is in another namespace"},
		{"missing", map[string]string{"auth-type": "basic", "auth-secret": "nope"}, nil, "Secret ns/nope not found"},
		{"plain-text password", map[string]string{"auth-type": "basic", "auth-secret": "plain"}, nil, "hash type not supported"},
		{"no key auth", map[string]string{"auth-type": "basic", "auth-secret": "map"}, nil, `has no key "auth"`},
		{"digest refuses everyone", map[string]string{"auth-type": "digest", "auth-secret": "file"}, nil, "digest is not"},
		{"bcrypt cost over the cap refuses everyone", map[string]string{"auth-type": "basic", "auth-secret": "costly"}, nil,
			`Secret ns/costly key auth: line 2, user "hal": bcrypt cost 13 is over 12`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := ingress("i", 0, path{"a.com", "/", "Prefix", "s"})
			ing.Annotations = map[string]string{}
			for k, v := range tc.ann {
				ing.Annotations[PrefixMetalgate+k] = v
			}
			tab, problems := Build(Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{ing},
				Services: []*corev1.Service{svc("s")}, Secrets: secrets})
			var msgs []string
			for _, p := range problems {
				if p.Reason != table.ReasonRefusedEndpoint {
					msgs = append(msgs, p.Message)
				}
			}
			if (tc.problem == "") != (len(msgs) == 0) || tc.problem != "" && !strings.Contains(strings.Join(msgs, "|"), tc.problem) {
				t.Errorf("problems %v, want %q", msgs, tc.problem)
			}
			ba := tab.Lookup("a.com", "/").Options.Policy.BasicAuth
			var users []string
			for u := range ba.Users {
				users = append(users, u)
			}
			if diff := cmp.Diff(tc.wantUsers, users); diff != "" {
				t.Errorf("users (-want +got):\n%s", diff)
			}
			// Unknown users are checked against one of the Secret's own hashes; none when it
			// refuses everyone.
			if hashes := slices.Collect(maps.Values(ba.Users)); len(hashes) == 0 && ba.Decoy != "" || len(hashes) > 0 && !slices.Contains(hashes, ba.Decoy) {
				t.Errorf("decoy %q, want one of the users' hashes %v", ba.Decoy, hashes)
			}
		})
	}
}

// TestDocsListEveryAnnotation keeps the annotation tables of docs/proxy.md and
// docs/reference/annotations.md true to the catalog.
func TestDocsListEveryAnnotation(t *testing.T) {
	for _, f := range []string{"../../docs/proxy.md", "../../docs/reference/annotations.md"} {
		t.Run(f, func(t *testing.T) { docListsEveryAnnotation(t, f) })
	}
}

func docListsEveryAnnotation(t *testing.T, file string) {
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range Annotations() {
		row := "| `" + a.Name + "` | `" + a.Nginx + "` |"
		switch {
		case a.Name == "":
			row = "| — | `" + a.Nginx + "` |"
		case a.Nginx == "":
			row = "| `" + a.Name + "` | — |"
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("%s has no row %s", file, row)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestProtectionCatalog keeps Protections true to the parser: a supported protection is an
// annotation the proxy reads (in Annotations, or an older name it reads); an unsupported one
// with a value that asks for it refuses every request with a Warning, and with an inert value
// is only reported.
func TestProtectionCatalog(t *testing.T) {
	read := map[string]bool{"whitelist-source-range": true}
	for _, a := range Annotations() {
		read[a.Nginx] = true
	}
	for _, p := range Protections() {
		t.Run(p.Nginx, func(t *testing.T) {
			if p.Protects == "" {
				t.Error("no Protects text")
			}
			if p.Supported {
				if !read[p.Nginx] {
					t.Errorf("supported, but not in Annotations")
				}
				return
			}
			if read[p.Nginx] {
				t.Errorf("unsupported, but in Annotations")
			}
			o, problems := parseOptions(map[string]string{PrefixNginx + p.Nginx: "on"}, true)
			if o.Policy.Refuse == "" || len(problems) != 1 || problems[0].reason != table.ReasonUnsupportedAnnotation || !strings.Contains(problems[0].msg, "refused (403)") {
				t.Errorf("value on: Refuse %q, problems %v; want every request refused and one Warning", o.Policy.Refuse, problems)
			}
			for _, v := range p.Inert {
				o, problems := parseOptions(map[string]string{PrefixNginx + p.Nginx: v}, true)
				if o.Policy.Refuse != "" || len(problems) != 1 || problems[0].reason != table.ReasonUnsupportedAnnotation {
					t.Errorf("inert value %q: Refuse %q, problems %v", v, o.Policy.Refuse, problems)
				}
			}
		})
	}
}

// TestListAndSizeParsers: the list, address-list and size parsers the proxy's annotations and
// kubectl metalgate migrate's reading of ingress-nginx's ConfigMap share. Hostile input first:
// what is not an address or a size is an error, never a shorter list or a smaller limit.
func TestListAndSizeParsers(t *testing.T) {
	t.Run("SplitList", func(t *testing.T) {
		for _, tc := range []struct {
			in   string
			want []string
		}{
			{"", nil},
			{" , ,\t\n", nil},
			{"a,b", []string{"a", "b"}},
			{" a , b ,, c ", []string{"a", "b", "c"}},
			{"a b\tc\nd", []string{"a", "b", "c", "d"}},
		} {
			if got := SplitList(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("SplitList(%q) = %q, want %q", tc.in, got, tc.want)
			}
		}
	})
	t.Run("ParseAddressList", func(t *testing.T) {
		for _, tc := range []struct {
			in      string
			want    []string
			wantErr string
		}{
			{"10.0.0.0/33", nil, `"10.0.0.0/33" is not an address or CIDR`},
			{"10.0.0.0/8, example.com", nil, `"example.com" is not an address or CIDR`},
			{"10.0.0.0/8,10.0.0.0/8-10.0.0.9", nil, `"10.0.0.0/8-10.0.0.9" is not an address or CIDR`},
			{"", nil, ""},
			{"10.1.2.3/8", []string{"10.0.0.0/8"}, ""},
			{" 192.0.2.10 , 2001:db8::1 ", []string{"192.0.2.10/32", "2001:db8::1/128"}, ""},
			{"0.0.0.0/0 ::/0", []string{"0.0.0.0/0", "::/0"}, ""},
		} {
			got, err := ParseAddressList(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || got != nil {
					t.Errorf("ParseAddressList(%q) = %v, %v; want the error %q", tc.in, got, err, tc.wantErr)
				}
				continue
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if err != nil || !slices.Equal(s, tc.want) {
				t.Errorf("ParseAddressList(%q) = %q, %v; want %q", tc.in, s, err, tc.want)
			}
		}
	})
	t.Run("ParseSize", func(t *testing.T) {
		for _, tc := range []struct {
			in   string
			want int64 // -1: an error
		}{
			{"-1", -1}, {"8mb", -1}, {"1x", -1}, {"", -1}, {"k", -1}, {"1.5m", -1},
			{"9999999999g", -1}, {"4611686018427387905", -1},
			{"0", 0}, {"1024", 1024}, {" 512k ", 512 << 10}, {"8M", 8 << 20}, {"1g", 1 << 30}, {"1G", 1 << 30},
		} {
			got, err := ParseSize(tc.in)
			if tc.want < 0 {
				if err == nil {
					t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
				}
				continue
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		}
	})
}
