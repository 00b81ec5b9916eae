package ingress

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/refgrant"
	"github.com/metalgate/metalgate/proxy/table"
)

// clusterDomain is the DNS suffix of Services that auth-url may spell out in full.
const clusterDomain = "svc.cluster.local"

// externalAuth resolves auth-url to one of two kinds of authentication service:
//
//   - a Service: http:// and a host "svc", "svc.ns", "svc.ns.svc" or
//     "svc.ns.svc.cluster.local", with the Service port named by the URL's port (80 when
//     none). ns is the Ingress's own, or another namespace with a ReferenceGrant there
//     from networking.k8s.io Ingress in the Ingress's namespace to core Service (that
//     Service, or any): the namespace that owns the Service opens it, as in Gateway API.
//   - an outside host: http:// or https:// and a host name that Input.ExternalAuthHosts
//     lists (--external-auth-hosts; none by default). A two-label name ("auth.example")
//     that is listed is outside; one that is not is "svc.ns".
//
// Anything else — an address (any spelling), user information, another scheme, another
// namespace without a grant, an outside host the install does not list — is refused: the
// proxy would otherwise ask whatever a tenant names, the API server or a metadata service
// included. Refused, the route refuses every request (never lets one through unchecked) and
// a Problem says why. The grant is read at every build: revoking it refuses at the next one.
func (b *builder) externalAuth(id types.NamespacedName, ref *extAuthRef) *table.ExternalAuth {
	ea := &table.ExternalAuth{Method: ref.method, Signin: ref.signin, ResponseHeaders: ref.responseHeaders, RequestRedirect: ref.requestRedirect}
	fail := func(format string, args ...any) *table.ExternalAuth {
		b.problem(id, table.ReasonInvalidAnnotation, "%s: "+format+"; every request is refused (500) until it is fixed", append([]any{ref.key}, args...)...)
		return ea
	}
	u, err := url.Parse(ref.url)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return fail("%q is not an absolute http:// URL of a Service or an https:// URL of a listed outside host", ref.url)
	case u.User != nil:
		return fail("%q has user information; credentials do not belong in the URL", ref.url)
	case u.Scheme != "http" && u.Scheme != "https":
		return fail("%q: scheme %q is neither http nor https", ref.url, u.Scheme)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if _, err := netip.ParseAddr(host); err == nil || !table.ValidDNSName(host) {
		return fail("host %q is an address or not a host name; addresses are never asked", u.Hostname())
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fail("port %q is not a number from 1 to 65535", p)
		}
		port = n
	}
	ea.Host, ea.Path = u.Host, u.RequestURI()
	svc, ns, isService := serviceHost(host, id.Namespace)
	if isService && strings.Count(host, ".") == 1 && b.in.ExternalAuthHosts.Allows(host) {
		isService = false // "auth.example", listed: the outside host, not Service auth of namespace example
	}
	if !isService {
		if !b.in.ExternalAuthHosts.Allows(host) {
			return fail("host %q is neither a Service (svc.%s.svc.cluster.local) nor an outside host the proxy's --external-auth-hosts lists", host, id.Namespace)
		}
		ea.Outside = &table.OutsideAuth{Scheme: u.Scheme, Name: host, Port: port, Namespace: id.Namespace}
		return ea
	}
	if u.Scheme != "http" {
		return fail("%q: a Service is asked over http:// only (https to an in-cluster auth service is not supported), and --external-auth-hosts does not list %q", ref.url, host)
	}
	to := types.NamespacedName{Namespace: ns, Name: svc}
	if ns != id.Namespace && !refgrant.Allows(b.in.ReferenceGrants, refgrant.From{Group: networkingv1.GroupName, Kind: "Ingress", Namespace: id.Namespace}, "Service", to) {
		return fail("Service %s is in another namespace and no ReferenceGrant in namespace %s allows Ingress from %s", to, ns, id.Namespace)
	}
	ea.Backend = b.backend(id, ns, &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc,
		Port: networkingv1.ServiceBackendPort{Number: int32(port)}}}, options{Options: table.DefaultOptions()})
	return ea
}

// serviceHost reads host as a Service's name: "svc" (of namespace own), "svc.ns",
// "svc.ns.svc" or "svc.ns.svc.cluster.local".
func serviceHost(host, own string) (svc, ns string, ok bool) {
	labels := strings.Split(host, ".")
	switch {
	case len(labels) == 1:
		return labels[0], own, true
	case len(labels) == 2 || len(labels) == 3 && labels[2] == "svc" || len(labels) == 5 && strings.Join(labels[2:], ".") == clusterDomain:
		return labels[0], labels[1], true
	}
	return "", "", false
}
