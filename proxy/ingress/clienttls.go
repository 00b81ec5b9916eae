package ingress

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/clientcert"
	"github.com/metalgate/metalgate/proxy/table"
)

// Client-certificate authentication: ingress-nginx's auth-tls-* annotations. The annotations
// are read here (clientTLS, from parseOptions); the Secret is resolved and the Ingress's hosts
// get the setting in Build (clientAuth, from ingress). What the data plane does with it is in
// proxy/dataplane/clientauth.go; the verification itself in proxy/clientcert.

// maxVerifyDepth bounds auth-tls-verify-depth: chains longer than this are not real.
const maxVerifyDepth = 10

// clientTLS reads auth-tls-secret, auth-tls-verify-client, auth-tls-verify-depth,
// auth-tls-error-page, auth-tls-pass-certificate-to-upstream and auth-tls-match-cn. A bad
// value is a problem naming the annotation; those that would let in a client the annotation
// keeps out (a mode, a CN pattern) fall back to the strict side: mode on, every request
// refused. Without auth-tls-secret the others do nothing, but for a mode other than off or a
// CN pattern: those ask for a protection without a CA, so every request is refused.
func (a *annotationReader) clientTLS(o *options) {
	ref := table.ClientAuthRef{Policy: clientcert.Policy{Mode: clientcert.ModeOn, Depth: clientcert.DefaultDepth}}
	skey, secret, hasSecret := a.get("auth-tls-secret")
	ref.Key, ref.Secret = skey, secret
	asked := "" // an annotation that asks for a protection, for the refusal without a Secret
	if key, v, ok := a.get("auth-tls-verify-client"); ok {
		m, valid := clientcert.ParseMode(v)
		switch {
		case !valid:
			a.bad(key, v, "on, optional, optional_no_ca or off")
			asked = key
		case m != clientcert.ModeOff:
			ref.Policy.Mode = m
			asked = key
		default:
			ref.Policy.Mode = m
		}
	}
	if key, v, ok := a.get("auth-tls-verify-depth"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > maxVerifyDepth {
			a.bad(key, v, fmt.Sprintf("a whole number from 1 to %d", maxVerifyDepth))
		} else {
			ref.Policy.Depth = n
		}
	}
	if key, v, ok := a.get("auth-tls-error-page"); ok {
		if validErrorPage(v) {
			ref.ErrorPage = v
		} else {
			a.bad(key, v, "an absolute http:// or https:// URL with a host, no user, spaces or backslashes")
		}
	}
	if b, _, ok := a.boolean("auth-tls-pass-certificate-to-upstream"); ok {
		ref.Pass = b
	}
	if key, v, ok := a.get("auth-tls-match-cn"); ok {
		re, err := clientcert.ParseMatchCN(v)
		if err != nil {
			// Without the pattern the host would take any certificate the CA signed.
			a.refuse(o, fmt.Sprintf("annotation %s=%q is invalid (want CN= and an RE2 regular expression: %v); every request is refused (403) until it is fixed", key, v, err))
			return
		}
		ref.Policy.MatchCN = re
		asked = key
	}
	if !hasSecret {
		if asked != "" {
			a.refuse(o, fmt.Sprintf("annotation %s asks for client-certificate authentication without %sauth-tls-secret (the CA to verify against); every request is refused (403) until it is fixed", asked, prefixOf(asked)))
		}
		return
	}
	o.clientTLS = &ref
}

// prefixOf is the annotation prefix of key.
func prefixOf(key string) string {
	if strings.HasPrefix(key, PrefixNginx) {
		return PrefixNginx
	}
	return PrefixMetalgate
}

// validErrorPage reports whether v can be auth-tls-error-page: an absolute http(s) URL with a
// host and no user part (a refused client is redirected there).
func validErrorPage(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil && u.Opaque == ""
}

// clientAuth gives the hosts of Ingress ing (those of its namespace, in its rules, server
// aliases and spec.tls) the client-certificate authentication its annotations ask for. A host
// that has one from an Ingress before keeps it (reported when it differs). Rules without a
// host and a default backend serve hosts the setting cannot follow (an unknown SNI name asks
// for no certificate): with client-certificate authentication the Ingress is refused.
func (b *builder) clientAuth(ing *networkingv1.Ingress, id types.NamespacedName, opts *options, rules []networkingv1.IngressRule) {
	ref := opts.clientTLS
	if ref == nil {
		return
	}
	ca := b.tb.ClientAuth(ingressRef(id), *ref)
	hosts := map[string]bool{}
	hostless := ing.Spec.DefaultBackend != nil
	for _, r := range rules {
		if h := strings.ToLower(r.Host); h == "" {
			hostless = hostless || r.HTTP != nil
		} else if validHost(h) && b.hosts[h].Namespace == ing.Namespace {
			hosts[h] = true
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			if h = strings.ToLower(h); h != "" && validHost(h) && b.hosts[h].Namespace == ing.Namespace {
				hosts[h] = true
			}
		}
	}
	if hostless && opts.Policy.Refuse == "" {
		msg := fmt.Sprintf("%s: client-certificate authentication applies to hosts; this Ingress has a rule without a host or a default backend, which serve requests of any SNI name; every request to it is refused (403) until they are removed", ref.Key)
		b.problem(id, table.ReasonInvalidAnnotation, "%s", msg)
		opts.Policy.Refuse = msg
	}
	for h := range hosts {
		if got := b.tb.SetClientAuth(h, ing.Namespace, ca); got != ca && got.ID != ca.ID && b.tb.Once(ingressRef(id), "client-auth "+h) {
			b.problem(id, table.ReasonInvalidAnnotation, "%s: host %q keeps the client-certificate authentication an Ingress before this one set (it is per host, as nginx's ssl_verify_client is per server)", ref.Key, h)
		}
	}
}
