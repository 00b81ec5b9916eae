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
	// SubjectAltNames, when not empty (a BackendTLSPolicy's validation.subjectAltNames), are
	// what the endpoint's certificate is checked against instead of ServerName (which is
	// then only sent as SNI): it must hold one of them. DNSNames are matched as host names
	// (wildcards of the certificate apply), URIs exactly.
	SubjectAltNames SubjectAltNames
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

// BackendTLSRef is how a route asks to speak TLS to its backend, as written (an Ingress's
// proxy-ssl-* annotations); Builder.Backend resolves it into a BackendTLS.
type BackendTLSRef struct {
	Key        string // the first proxy-ssl-* annotation read, for problems
	Secret     string // "name" or "namespace/name"
	Verify     *bool
	ServerName string
	SNI        bool
}

func (r *BackendTLSRef) String() string {
	v := "default"
	if r.Verify != nil {
		v = strconv.FormatBool(*r.Verify)
	}
	return fmt.Sprintf("tls(secret=%s,verify=%s,name=%s,sni=%t)", r.Secret, v, r.ServerName, r.SNI)
}

// resolveBackendTLS turns the annotations of Ingress src into a BackendTLS for Service svc.
// Only a Secret of the Ingress's own namespace is read; a Secret that cannot be used makes
// the backend refuse (Refuse), never connect with less checking than asked for.
func (b *Builder) resolveBackendTLS(src SourceRef, svc types.NamespacedName, ref *BackendTLSRef) *BackendTLS {
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
	if ref.ServerName != "" {
		bt.ServerName = ref.ServerName
	}
	bt.SNI = ref.SNI
	bt.Verify = ref.Verify != nil && *ref.Verify
	fail := func(format string, args ...any) *BackendTLS {
		bt.Refuse = fmt.Sprintf(format, args...)
		b.Problem(src, ReasonInvalidAnnotation, "%s: %s; requests to the backend get 502 until it is fixed", ref.Key, bt.Refuse)
		return done()
	}
	if ref.Secret == "" {
		return done()
	}
	ns, name, ok := strings.Cut(ref.Secret, "/")
	if !ok {
		ns, name = id.Namespace, ref.Secret
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
		bt.Verify = ref.Verify == nil || *ref.Verify
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
	id := fmt.Sprintf("tls(ns=%s,name=%s,sni=%t,verify=%t,secret=%s,refuse=%q", ns, bt.ServerName, bt.SNI, bt.Verify, secret, bt.Refuse)
	if !bt.SubjectAltNames.Empty() {
		id += fmt.Sprintf(",sans=%q", bt.SubjectAltNames.String())
	}
	return id + ")"
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
