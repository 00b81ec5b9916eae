package table

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// BackendTLS is how the proxy speaks TLS to the endpoints of a backend whose protocol is
// https or grpcs (backend-protocol), from the proxy-ssl-* annotations.
type BackendTLS struct {
	// ServerName is the name the endpoint's certificate must hold (when Verify) and, with
	// SNI, the name sent in the ClientHello: proxy-ssl-name, else the Service's DNS name
	// "<service>.<namespace>.svc".
	ServerName string
	// SNI sends ServerName in the ClientHello (proxy-ssl-server-name).
	SNI bool
	// Verify checks the endpoint's certificate chain (against RootCAs, else the system's
	// roots) and ServerName. On when proxy-ssl-verify is on, or when proxy-ssl-secret holds a
	// ca.crt and proxy-ssl-verify is not off.
	Verify bool
	// RootCAs are the CAs of proxy-ssl-secret's ca.crt; nil: the system's.
	RootCAs *x509.CertPool
	// Certificate is the client certificate of proxy-ssl-secret's tls.crt and tls.key, sent
	// when the endpoint asks for one; nil: none.
	Certificate *tls.Certificate
	// ID identifies these settings by everything that makes a connection made with them
	// differ: the Service's namespace, ServerName, SNI, Verify, the Secret (namespace, name,
	// UID, resourceVersion and a hash of the keys read) and Refuse. A TLS client
	// configuration, its session cache and a pooled connection are shared only between
	// backends with the same ID (backendTLSID).
	ID string
	// Refuse, when set, says why these settings cannot be used (a Secret missing, in another
	// namespace or unreadable): the proxy then answers 502 without connecting, never falls
	// back to an unverified connection.
	Refuse string
}

// backendTLSRef is the proxy-ssl-* annotations as written, resolved at build time.
type backendTLSRef struct {
	key        string // the first proxy-ssl-* annotation read, for problems
	secret     string // "name" or "namespace/name"
	verify     *bool
	serverName string
	sni        bool
}

func (r *backendTLSRef) String() string {
	v := "default"
	if r.verify != nil {
		v = strconv.FormatBool(*r.verify)
	}
	return fmt.Sprintf("tls(secret=%s,verify=%s,name=%s,sni=%t)", r.secret, v, r.serverName, r.sni)
}

// onOff parses the nginx "on"/"off" values and Go's booleans.
func onOff(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "on":
		return true, true
	case "off":
		return false, true
	}
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

// backendTLS reads proxy-ssl-secret, proxy-ssl-verify, proxy-ssl-name and
// proxy-ssl-server-name (and reports the ones metalgate does not take).
func (a *annotationReader) backendTLS(o *Options) {
	ref := &backendTLSRef{}
	seen := false
	note := func(key string) {
		if !seen {
			ref.key, seen = key, true
		}
	}
	if key, v, ok := a.get("proxy-ssl-secret"); ok {
		note(key)
		ref.secret = v
	}
	if key, v, ok := a.get("proxy-ssl-verify"); ok {
		note(key)
		if b, ok := onOff(v); ok {
			ref.verify = &b
		} else {
			a.bad(key, v, "on or off")
		}
	}
	if key, v, ok := a.get("proxy-ssl-name"); ok {
		note(key)
		if len(validation.IsDNS1123Subdomain(strings.ToLower(v))) > 0 {
			a.bad(key, v, "a DNS name")
		} else {
			ref.serverName = strings.ToLower(v)
		}
	}
	if key, v, ok := a.get("proxy-ssl-server-name"); ok {
		note(key)
		if b, ok := onOff(v); ok {
			ref.sni = b
		} else {
			a.bad(key, v, "on or off")
		}
	}
	// Go's TLS client offers TLS 1.2 and 1.3 with its own cipher suites; a depth limit has no
	// equivalent in its verifier. Said, not silently ignored.
	for _, name := range []string{"proxy-ssl-protocols", "proxy-ssl-ciphers", "proxy-ssl-verify-depth"} {
		if key, v, ok := a.get(name); ok {
			a.problems = append(a.problems, problemText{ReasonInvalidAnnotation,
				fmt.Sprintf("annotation %s=%q is not supported: the proxy offers TLS 1.2 and 1.3 with Go's cipher suites and verifies whole chains", key, v)})
		}
	}
	if !seen {
		return
	}
	if o.Protocol != ProtocolHTTPS && o.Protocol != ProtocolGRPCS {
		a.problems = append(a.problems, problemText{ReasonInvalidAnnotation,
			fmt.Sprintf("annotation %s applies only with backend-protocol HTTPS or GRPCS; ignored", ref.key)})
		return
	}
	o.backendTLS = ref
}

// resolveBackendTLS turns the annotations of Ingress src into a BackendTLS for Service svc.
// Only a Secret of the Ingress's own namespace is read; a Secret that cannot be used makes
// the backend refuse (Refuse), never connect with less checking than asked for.
func (b *builder) resolveBackendTLS(src SourceRef, svc types.NamespacedName, ref *backendTLSRef) *BackendTLS {
	id := src.NamespacedName
	bt := &BackendTLS{ServerName: svc.Name + "." + svc.Namespace + ".svc"}
	secret := "" // the Secret read, as backendTLSID names it
	done := func() *BackendTLS {
		bt.ID = backendTLSID(svc.Namespace, bt, secret)
		return bt
	}
	if ref == nil {
		return done()
	}
	if ref.serverName != "" {
		bt.ServerName = ref.serverName
	}
	bt.SNI = ref.sni
	bt.Verify = ref.verify != nil && *ref.verify
	fail := func(format string, args ...any) *BackendTLS {
		bt.Refuse = fmt.Sprintf(format, args...)
		b.problem(src, ReasonInvalidAnnotation, "%s: %s; requests to the backend get 502 until it is fixed", ref.key, bt.Refuse)
		return done()
	}
	if ref.secret == "" {
		return done()
	}
	ns, name, ok := strings.Cut(ref.secret, "/")
	if !ok {
		ns, name = id.Namespace, ref.secret
	}
	secret = ns + "/" + name
	if ns != id.Namespace {
		return fail("proxy-ssl-secret %s/%s is in another namespace; only Secrets of namespace %s are read", ns, name, id.Namespace)
	}
	sec := b.secrets[types.NamespacedName{Namespace: ns, Name: name}]
	if sec == nil {
		return fail("Secret %s/%s not found", ns, name)
	}
	secret = secretVersion(sec, "ca.crt", "tls.crt", "tls.key")
	if ca, ok := sec.Data["ca.crt"]; ok {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return fail("Secret %s/%s key ca.crt holds no PEM certificate", ns, name)
		}
		bt.RootCAs = pool
		bt.Verify = ref.verify == nil || *ref.verify
	}
	crt, hasCrt := sec.Data["tls.crt"]
	key, hasKey := sec.Data["tls.key"]
	switch {
	case hasCrt && hasKey:
		c, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return fail("Secret %s/%s tls.crt/tls.key: %v", ns, name, err)
		}
		bt.Certificate = &c
	case hasCrt || hasKey:
		return fail("Secret %s/%s has only one of tls.crt and tls.key", ns, name)
	case bt.RootCAs == nil:
		return fail("Secret %s/%s has neither ca.crt nor tls.crt/tls.key", ns, name)
	}
	return done()
}

// backendTLSID is the ID of bt, the settings of a backend in namespace ns made with the
// Secret secret (secretVersion; "" none). Every field that changes what a connection made
// with bt sends or accepts is in it: the name checked (the Service's own by default, so two
// Services sharing a Secret are each verified against their own name), whether it is sent as
// SNI, whether the chain is verified, the CAs and client certificate (by the Secret's
// identity and content), and why the settings are refused. The namespace is in it too, even
// when the rest is equal: tenants never share a session cache or a connection
// (invariant 13).
func backendTLSID(ns string, bt *BackendTLS, secret string) string {
	return fmt.Sprintf("tls(ns=%s,name=%s,sni=%t,verify=%t,secret=%s,refuse=%q)", ns, bt.ServerName, bt.SNI, bt.Verify, secret, bt.Refuse)
}

// secretVersion names Secret sec and the content of its keys: namespace, name, UID,
// resourceVersion and a SHA-256 of the keys' values. Either a new version or new content
// (a Secret of a static configuration may carry no resourceVersion) makes a new name.
func secretVersion(sec *corev1.Secret, keys ...string) string {
	h := sha256.New()
	for _, k := range keys {
		v, ok := sec.Data[k]
		if !ok {
			fmt.Fprintf(h, "%s:-;", k)
			continue
		}
		fmt.Fprintf(h, "%s:%d:", k, len(v))
		h.Write(v)
	}
	return fmt.Sprintf("%s/%s@%s/%s#%x", sec.Namespace, sec.Name, sec.UID, sec.ResourceVersion, h.Sum(nil))
}
