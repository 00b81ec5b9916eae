package gatewayapi

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/table"
)

// BackendTLSPolicy (Gateway API, standard channel since v1.4): a policy in a Service's
// namespace that targets the Service (or one port of it, by sectionName = the port's name)
// makes the Gateway speak TLS to the Service's endpoints:
//
//   - the CAs are those of the ConfigMaps validation.caCertificateRefs names (key ca.crt, in
//     the policy's own namespace: a LocalObjectReference cannot name another), or the
//     system's roots for wellKnownCACertificates: System;
//   - validation.hostname is sent as SNI and is the name the certificate must hold, unless
//     validation.subjectAltNames is given: then the certificate must hold one of those
//     (Hostname or URI) and hostname is only the SNI;
//   - several policies targeting the same Service and sectionName: the oldest (then the
//     first by namespace/name) wins, the others are Accepted=False, Conflicted; a policy
//     with a sectionName wins over one without for its port;
//   - a policy whose CA references are all unusable is Accepted=False, NoValidCACertificate,
//     and the backend it targets answers 502 (its settings are refused): never an
//     unverified connection.
//
// The TLS settings' ID (table.PolicyBackendTLS) holds the Service's namespace, the hostname,
// the SANs and the CA source (each ConfigMap's namespace, name, UID, resourceVersion and a
// hash of its ca.crt), so that two Services share a TLS configuration, session cache or
// pooled connection only when their effective settings are the same.

// policyIndex is the BackendTLSPolicies of one translation, by target, with each policy's
// settings resolved once, and which of them the Gateway's backends met.
type policyIndex struct {
	byTarget map[policyTarget][]*gatewayv1.BackendTLSPolicy // oldest first
	resolved map[types.NamespacedName]*resolvedPolicy
	// met holds the policies whose target a backend of the Gateway met: won says whether
	// the policy won (true) or lost (false) every conflict it met.
	met map[types.NamespacedName]*policyMet
	// client is the Gateway's client certificate for backends (clientCertificate).
	client *clientCert
}

// clientCert is the Gateway's spec.tls.backend.clientCertificateRef resolved: the
// certificate (nil: none set, or unusable), the Secret's identity and content (secretVersion
// rules), and why it cannot be used.
type clientCert struct {
	cert    *tls.Certificate
	version string
	problem *table.RefProblem
}

type policyMet struct {
	policy *gatewayv1.BackendTLSPolicy
	won    bool
}

// policyTarget is a Service, and one port's name (section) or "" for every port.
type policyTarget struct {
	svc     types.NamespacedName
	section string
}

// resolvedPolicy is a policy's settings and its conditions (but the conflict).
type resolvedPolicy struct {
	bt       table.BackendTLS
	caSource string
	// accepted and resolvedRefs are the reasons and messages of the two conditions.
	accepted       bool
	acceptedReason gatewayv1.PolicyConditionReason
	acceptedMsg    string
	refsReason     gatewayv1.PolicyConditionReason
	refsMsg        string
}

// policies indexes Input.BackendTLSPolicies by their Service targets (other kinds of target
// are not metalgate's: they are left alone).
func (b *builder) policies() *policyIndex {
	if b.btls != nil {
		return b.btls
	}
	ix := &policyIndex{byTarget: map[policyTarget][]*gatewayv1.BackendTLSPolicy{},
		resolved: map[types.NamespacedName]*resolvedPolicy{}, met: map[types.NamespacedName]*policyMet{}}
	ps := append([]*gatewayv1.BackendTLSPolicy(nil), b.in.BackendTLSPolicies...)
	sort.SliceStable(ps, func(i, j int) bool {
		a, c := ps[i], ps[j]
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		return a.Name < c.Name
	})
	for _, p := range ps {
		seen := map[policyTarget]bool{}
		for _, ref := range p.Spec.TargetRefs {
			if ref.Group != "" || ref.Kind != "Service" {
				continue
			}
			t := policyTarget{svc: types.NamespacedName{Namespace: p.Namespace, Name: string(ref.Name)}}
			if ref.SectionName != nil {
				t.section = string(*ref.SectionName)
			}
			if !seen[t] {
				seen[t] = true
				ix.byTarget[t] = append(ix.byTarget[t], p)
			}
		}
	}
	b.btls = ix
	return ix
}

// policyTLS is the TLS to the endpoints of port section (its name; "" unnamed) of Service
// svc that a BackendTLSPolicy decides, or nil when none targets it; it sets opts.Protocol to
// https (grpcs for a backend spoken to over HTTP/2).
func (b *builder) policyTLS(svc types.NamespacedName, section string, opts *table.Options) *table.BackendTLS {
	ix := b.policies()
	// A policy for the port wins over one for the whole Service; both are met (their
	// status names this Gateway).
	targets := []policyTarget{{svc, ""}}
	if section != "" {
		targets = []policyTarget{{svc, section}, {svc, ""}}
	}
	var winner *gatewayv1.BackendTLSPolicy
	for _, t := range targets {
		ps := ix.byTarget[t]
		for i, p := range ps {
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			m := ix.met[key]
			if m == nil {
				m = &policyMet{policy: p}
				ix.met[key] = m
			}
			m.won = m.won || i == 0
		}
		if winner == nil && len(ps) > 0 {
			winner = ps[0]
		}
	}
	if winner == nil {
		return nil
	}
	rp := b.resolvePolicy(winner)
	if opts.Protocol == table.ProtocolH2C {
		opts.Protocol = table.ProtocolGRPCS
	} else {
		opts.Protocol = table.ProtocolHTTPS
	}
	bt, source := rp.bt, rp.caSource
	if cc := b.clientCertificate(); cc.cert != nil {
		// The Gateway's client certificate is part of the settings' identity too.
		bt.Certificate, source = cc.cert, source+",client="+cc.version
	}
	return table.PolicyBackendTLS(svc.Namespace, bt, source)
}

// ClientCertificateRef is the Secret that Gateway gw's spec.tls.backend.clientCertificateRef
// names (ok false: none is set), and why it may not be read (reason "" when it may): a kind
// other than a core Secret is InvalidClientCertificateRef, a Secret of another namespace
// without a ReferenceGrant there allowing the Gateway's is RefNotPermitted. The controller
// (to read the Secret and write the Gateway's ResolvedRefs) and the proxy ask it alike.
func ClientCertificateRef(gw *gatewayv1.Gateway, grants []*gatewayv1beta1.ReferenceGrant) (name types.NamespacedName, ok bool, reason gatewayv1.GatewayConditionReason, msg string) {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Backend == nil || gw.Spec.TLS.Backend.ClientCertificateRef == nil {
		return name, false, "", ""
	}
	ref := gw.Spec.TLS.Backend.ClientCertificateRef
	name = types.NamespacedName{Namespace: gw.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		name.Namespace = string(*ref.Namespace)
	}
	switch {
	case ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Secret":
		g, k := "", "Secret"
		if ref.Group != nil {
			g = string(*ref.Group)
		}
		if ref.Kind != nil {
			k = string(*ref.Kind)
		}
		return name, true, gatewayv1.GatewayReasonInvalidClientCertificateRef, fmt.Sprintf("spec.tls.backend.clientCertificateRef: kind %s of group %q is not supported (only Secret)", k, g)
	case name.Namespace != gw.Namespace && !Granted(grants, "Gateway", gw.Namespace, "Secret", name):
		return name, true, gatewayv1.GatewayReasonRefNotPermitted, fmt.Sprintf("spec.tls.backend.clientCertificateRef: Secret %s is in another namespace and no ReferenceGrant there allows Gateways of namespace %s", name, gw.Namespace)
	}
	return name, true, "", ""
}

// clientCertificate resolves the Gateway's client certificate for backends once per
// translation: a Secret with a valid tls.crt and tls.key.
func (b *builder) clientCertificate() *clientCert {
	ix := b.policies()
	if ix.client != nil {
		return ix.client
	}
	cc := &clientCert{}
	ix.client = cc
	name, ok, reason, msg := ClientCertificateRef(b.in.Gateway, b.in.ReferenceGrants)
	if !ok {
		return cc
	}
	if reason != "" {
		cc.problem = &table.RefProblem{Reason: string(reason), Message: msg}
		return cc
	}
	invalid := func(format string, args ...any) *clientCert {
		cc.problem = &table.RefProblem{Reason: string(gatewayv1.GatewayReasonInvalidClientCertificateRef),
			Message: "spec.tls.backend.clientCertificateRef: " + fmt.Sprintf(format, args...)}
		return cc
	}
	sec := b.tb.Secret(name)
	if sec == nil {
		return invalid("Secret %s not found", name)
	}
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	c, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return invalid("Secret %s: tls.crt and tls.key are not a valid key pair: %v", name, err)
	}
	cc.cert = &c
	cc.version = fmt.Sprintf("%s/%s@%s/%s#%x", sec.Namespace, sec.Name, sec.UID, sec.ResourceVersion, sha256.Sum256(append(append([]byte(nil), crt...), key...)))
	return cc
}

// backendTLSStatus sets in st what the translation decided of backend TLS: the policies'
// conditions and the Gateway's client certificate problem.
func (b *builder) backendTLSStatus(st *table.GatewayStatus) {
	st.BackendTLSPolicies = b.policyStatuses()
	st.BackendClientCertificate = b.clientCertificate().problem
}

// resolvePolicy reads policy p's validation: its CAs, hostname and SANs, and the conditions
// they give, once per translation.
func (b *builder) resolvePolicy(p *gatewayv1.BackendTLSPolicy) *resolvedPolicy {
	ix := b.policies()
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if rp := ix.resolved[key]; rp != nil {
		return rp
	}
	v := p.Spec.Validation
	rp := &resolvedPolicy{accepted: true, acceptedReason: gatewayv1.PolicyReasonAccepted, acceptedMsg: "Accepted by " + string(ControllerName),
		refsReason: gatewayv1.BackendTLSPolicyReasonResolvedRefs}
	rp.bt = table.BackendTLS{ServerName: strings.ToLower(string(v.Hostname)), SNI: true, Verify: true}
	for _, san := range v.SubjectAltNames {
		switch san.Type {
		case gatewayv1.HostnameSubjectAltNameType:
			rp.bt.SubjectAltNames.DNSNames = append(rp.bt.SubjectAltNames.DNSNames, strings.ToLower(string(san.Hostname)))
		case gatewayv1.URISubjectAltNameType:
			rp.bt.SubjectAltNames.URIs = append(rp.bt.SubjectAltNames.URIs, string(san.URI))
		}
	}
	refuse := func(reason gatewayv1.PolicyConditionReason, msg string) {
		rp.accepted, rp.acceptedReason, rp.acceptedMsg = false, reason, msg
		rp.bt.Refuse = msg
	}
	switch {
	case v.WellKnownCACertificates != nil && *v.WellKnownCACertificates == gatewayv1.WellKnownCACertificatesSystem:
		rp.caSource = "system"
	case v.WellKnownCACertificates != nil:
		rp.caSource = "unknown"
		refuse(gatewayv1.PolicyReasonInvalid, fmt.Sprintf("validation.wellKnownCACertificates %q is not supported (only System)", *v.WellKnownCACertificates))
	case len(v.CACertificateRefs) == 0:
		rp.caSource = "none"
		refuse(gatewayv1.PolicyReasonInvalid, "validation names neither caCertificateRefs nor wellKnownCACertificates")
	default:
		pool := x509.NewCertPool()
		var sources, problems []string
		for i, ref := range v.CACertificateRefs {
			reason, msg, src := b.caRef(p.Namespace, i, ref, pool)
			if reason != "" {
				if len(problems) == 0 {
					rp.refsReason = reason
				}
				problems = append(problems, msg)
				continue
			}
			sources = append(sources, src)
		}
		rp.caSource = "configmaps(" + strings.Join(sources, ",") + ")"
		if len(problems) > 0 {
			rp.refsMsg = strings.Join(problems, "; ")
		}
		if len(sources) == 0 {
			refuse(gatewayv1.BackendTLSPolicyReasonNoValidCACertificate, "no usable CA certificate: "+rp.refsMsg+"; requests to the Services it targets get 502")
		} else {
			rp.bt.RootCAs = pool
		}
	}
	if rp.refsMsg == "" {
		rp.refsMsg = "every reference resolved"
	}
	ix.resolved[key] = rp
	return rp
}

// caRef reads caCertificateRefs[i] of a policy in namespace ns into pool: a ConfigMap of ns
// with a ca.crt of PEM certificates. It returns why it cannot (reason and message), or the
// ConfigMap's identity and content (configMapVersion).
func (b *builder) caRef(ns string, i int, ref gatewayv1.LocalObjectReference, pool *x509.CertPool) (gatewayv1.PolicyConditionReason, string, string) {
	if ref.Group != "" || ref.Kind != "ConfigMap" {
		return gatewayv1.BackendTLSPolicyReasonInvalidKind, fmt.Sprintf("caCertificateRefs[%d]: kind %s of group %q is not supported (only ConfigMap)", i, ref.Kind, ref.Group), ""
	}
	id := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	var cm *corev1.ConfigMap
	for _, c := range b.in.ConfigMaps {
		if c.Namespace == id.Namespace && c.Name == id.Name {
			cm = c
			break
		}
	}
	if cm == nil {
		return gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, fmt.Sprintf("caCertificateRefs[%d]: ConfigMap %s not found", i, id), ""
	}
	ca := cm.Data["ca.crt"]
	if !pool.AppendCertsFromPEM([]byte(ca)) {
		return gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, fmt.Sprintf("caCertificateRefs[%d]: ConfigMap %s key ca.crt holds no PEM certificate", i, id), ""
	}
	return "", "", configMapVersion(cm, ca)
}

// configMapVersion names ConfigMap cm and the content ca read from it: namespace, name, UID,
// resourceVersion and a SHA-256 of ca.
func configMapVersion(cm *corev1.ConfigMap, ca string) string {
	return fmt.Sprintf("%s/%s@%s/%s#%x", cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion, sha256.Sum256([]byte(ca)))
}

// policyStatuses are the conditions, for the translation's Gateway, of every policy one of
// its backends met, sorted by namespace/name.
func (b *builder) policyStatuses() []table.PolicyStatus {
	if b.btls == nil || len(b.btls.met) == 0 {
		return nil
	}
	var out []table.PolicyStatus
	for key, m := range b.btls.met {
		rp := b.resolvePolicy(m.policy)
		gen := m.policy.Generation
		acc := metav1.Condition{Type: string(gatewayv1.PolicyConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(rp.acceptedReason), Message: rp.acceptedMsg, ObservedGeneration: gen}
		switch {
		case !m.won:
			acc.Status, acc.Reason = metav1.ConditionFalse, string(gatewayv1.PolicyReasonConflicted)
			acc.Message = "an older BackendTLSPolicy targets the same Service and sectionName"
		case !rp.accepted:
			acc.Status = metav1.ConditionFalse
		}
		refs := metav1.Condition{Type: string(gatewayv1.BackendTLSPolicyConditionResolvedRefs), Status: metav1.ConditionTrue,
			Reason: string(rp.refsReason), Message: rp.refsMsg, ObservedGeneration: gen}
		if rp.refsReason != gatewayv1.BackendTLSPolicyReasonResolvedRefs {
			refs.Status = metav1.ConditionFalse
		}
		out = append(out, table.PolicyStatus{Policy: key, Conditions: []metav1.Condition{acc, refs}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Policy.String() < out[j].Policy.String() })
	return out
}
