package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/clientcert"
	"github.com/metalgate/metalgate/proxy/table"
)

// Client-certificate validation of a Gateway's HTTPS listeners (spec.tls.frontend):
//
//   - a port's validation is its perPort entry, else the default; it applies to every HTTPS
//     listener on the port and to no other port (an HTTP listener never asks for one);
//   - caCertificateRefs name ConfigMaps (Gateway API's core support) or Secrets of the core
//     group, with the PEM bundle under ca.crt; one of another namespace only when a
//     ReferenceGrant there lets Gateways of the Gateway's namespace refer to it;
//   - a ref that cannot be used makes the listeners' ResolvedRefs False: InvalidCACertificateKind
//     (another kind), RefNotPermitted (no ReferenceGrant), InvalidCACertificateRef (missing,
//     no ca.crt, no usable CA certificate); the usable refs' bundles still apply. With none
//     usable the listeners are not accepted (NoValidCACertificate) and every handshake on the
//     port fails: a port is never served without the validation the Gateway asks for;
//   - mode AllowValidOnly (the default): a handshake without a certificate that verifies
//     fails; AllowInsecureFallback: it goes on, and the backend is told (ssl-client-verify).

// caCertificateKey is where a caCertificateRef's ConfigMap or Secret holds the PEM bundle.
const caCertificateKey = "ca.crt"

// Kinds a caCertificateRef may name (core group).
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// FrontendValidation returns the client-certificate validation of gw's port (its perPort
// entry, else the default; nil for none) and the field path that sets it, for messages.
func FrontendValidation(gw *gatewayv1.Gateway, port gatewayv1.PortNumber) (*gatewayv1.FrontendTLSValidation, string) {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil, ""
	}
	f := gw.Spec.TLS.Frontend
	for i, pp := range f.PerPort {
		if pp.Port == port {
			return pp.TLS.Validation, fmt.Sprintf("spec.tls.frontend.perPort[%d]", i)
		}
	}
	return f.Default.Validation, "spec.tls.frontend.default"
}

// InsecureFrontend reports whether gw lets any port fall back to no client-certificate
// validation (mode AllowInsecureFallback, default or per port): the Gateway's
// InsecureFrontendValidationMode condition.
func InsecureFrontend(gw *gatewayv1.Gateway) bool {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return false
	}
	f := gw.Spec.TLS.Frontend
	if v := f.Default.Validation; v != nil && v.Mode == gatewayv1.AllowInsecureFallback {
		return true
	}
	return slices.ContainsFunc(f.PerPort, func(p gatewayv1.TLSPortConfig) bool {
		return p.TLS.Validation != nil && p.TLS.Validation.Mode == gatewayv1.AllowInsecureFallback
	})
}

// CACertificateRef is the kind (ConfigMap or Secret) and object caCertificateRefs[i] of a
// Gateway in namespace names, or why it may not be used: another kind or group
// (InvalidCACertificateKind), or another namespace that no ReferenceGrant there opens to
// Gateways of namespace (RefNotPermitted). field is the path of the validation, for messages.
// The translation and the controller (which reads the objects by name) both ask it.
func CACertificateRef(namespace, field string, i int, r gatewayv1.ObjectReference, grants []*gatewayv1beta1.ReferenceGrant) (string, types.NamespacedName, gatewayv1.ListenerConditionReason, string) {
	obj := types.NamespacedName{Namespace: namespace, Name: string(r.Name)}
	if r.Namespace != nil && *r.Namespace != "" {
		obj.Namespace = string(*r.Namespace)
	}
	kind := string(r.Kind)
	if r.Group != "" || kind != kindConfigMap && kind != kindSecret {
		return kind, obj, gatewayv1.ListenerReasonInvalidCACertificateKind,
			fmt.Sprintf("%s.validation.caCertificateRefs[%d]: kind %s of group %q is not supported (core ConfigMap or Secret with %s)", field, i, kind, r.Group, caCertificateKey)
	}
	if obj.Namespace != namespace && !Granted(grants, "Gateway", namespace, kind, obj) {
		return kind, obj, gatewayv1.ListenerReasonRefNotPermitted,
			fmt.Sprintf("%s.validation.caCertificateRefs[%d]: %s %s is in another namespace and no ReferenceGrant there lets Gateways of namespace %s refer to it", field, i, kind, obj, namespace)
	}
	return kind, obj, "", ""
}

// frontend resolves the client-certificate validation of every port with an HTTPS listener
// into the table, and returns, per HTTPS listener name, what is wrong with its port's (nil:
// nothing); it
// sets those listeners' conditions in listeners (FrontendConditions) and, when no CA is
// usable, takes them out of b.accepted (they serve no route).
func (b *builder) frontend(gw *gatewayv1.Gateway, listeners []gatewayv1.ListenerStatus) map[string]table.FrontendProblem {
	problems := map[string]table.FrontendProblem{}
	done := map[gatewayv1.PortNumber]bool{}
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType || done[l.Port] {
			continue
		}
		done[l.Port] = true
		v, field := FrontendValidation(gw, l.Port)
		if v == nil {
			continue
		}
		ca, problem := b.resolveFrontend(gw, v, field)
		b.tb.SetGatewayClientAuth(int32(l.Port), ca)
		if problem == nil {
			continue
		}
		for i, o := range gw.Spec.Listeners {
			if o.Port != l.Port || o.Protocol != gatewayv1.HTTPSProtocolType {
				continue
			}
			problems[string(o.Name)] = *problem
			for _, c := range FrontendConditions(*problem) {
				SetListenerCondition(&listeners[i].Conditions, c)
			}
			if problem.NoValidCA {
				b.accepted[i] = false
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}

// resolveFrontend reads v's CA bundles: the port's validation, and what is wrong with it
// (nil: every ref resolved).
func (b *builder) resolveFrontend(gw *gatewayv1.Gateway, v *gatewayv1.FrontendTLSValidation, field string) (*table.GatewayClientAuth, *table.FrontendProblem) {
	ca := &table.GatewayClientAuth{Depth: table.GatewayDepth, InsecureFallback: v.Mode == gatewayv1.AllowInsecureFallback}
	var problem *table.FrontendProblem
	var msgs []string
	bad := func(reason gatewayv1.ListenerConditionReason, msg string) {
		if problem == nil {
			problem = &table.FrontendProblem{Reason: string(reason)}
		}
		msgs = append(msgs, msg)
	}
	var bundle []byte
	for i, r := range v.CACertificateRefs {
		kind, obj, reason, msg := CACertificateRef(gw.Namespace, field, i, r, b.in.ReferenceGrants)
		if reason != "" {
			bad(reason, msg)
			continue
		}
		data, found := b.caData(kind, obj)
		where := fmt.Sprintf("%s.validation.caCertificateRefs[%d]: %s %s", field, i, kind, obj)
		switch {
		case !found:
			bad(gatewayv1.ListenerReasonInvalidCACertificateRef, where+" not found")
			continue
		case len(data) == 0:
			bad(gatewayv1.ListenerReasonInvalidCACertificateRef, where+" has no "+caCertificateKey)
			continue
		}
		if _, err := clientcert.ParseAuthority(data, nil); err != nil {
			bad(gatewayv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		bundle = append(append(bundle, data...), '\n')
	}
	if len(v.CACertificateRefs) == 0 {
		bad(gatewayv1.ListenerReasonInvalidCACertificateRef, field+".validation.caCertificateRefs is empty")
	}
	if problem != nil {
		problem.Message = strings.Join(msgs, "; ")
	}
	if bundle == nil {
		problem.NoValidCA = true
		ca.Refuse = problem.Message
		return ca, problem
	}
	auth, err := clientcert.ParseAuthority(bundle, nil)
	if err != nil { // each part parsed alone; kept for safety: refuse, never serve unverified
		bad(gatewayv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s: the bundles together: %v", field, err))
		problem.Message, problem.NoValidCA = strings.Join(msgs, "; "), true
		ca.Refuse = problem.Message
		return ca, problem
	}
	ca.Authority = auth
	return ca, problem
}

// caData is the ca.crt of the ConfigMap (data or binaryData) or Secret obj, and whether the
// object exists.
func (b *builder) caData(kind string, obj types.NamespacedName) ([]byte, bool) {
	if kind == kindSecret {
		sec := b.tb.Secret(obj)
		if sec == nil {
			return nil, false
		}
		return sec.Data[caCertificateKey], true
	}
	cm := b.configMap(obj)
	if cm == nil {
		return nil, false
	}
	if s, ok := cm.Data[caCertificateKey]; ok {
		return []byte(s), true
	}
	return cm.BinaryData[caCertificateKey], true
}

func (b *builder) configMap(obj types.NamespacedName) *corev1.ConfigMap {
	for _, cm := range b.in.ConfigMaps {
		if cm.Namespace == obj.Namespace && cm.Name == obj.Name {
			return cm
		}
	}
	return nil
}

// FrontendConditions are the listener conditions of a FrontendProblem: ResolvedRefs False
// with its reason and, when no CA is usable, Accepted False NoValidCACertificate.
func FrontendConditions(p table.FrontendProblem) []metav1.Condition {
	out := []metav1.Condition{cond(gatewayv1.ListenerConditionResolvedRefs, false, p.Reason, p.Message)}
	if p.NoValidCA {
		out = append(out, cond(gatewayv1.ListenerConditionAccepted, false, gatewayv1.ListenerReasonNoValidCACertificate,
			"no caCertificateRef of the port's client-certificate validation can be used; the port's handshakes fail: "+p.Message))
	}
	return out
}

// SetListenerCondition sets c in conds unless a condition of its type is already False (an
// earlier verdict, such as a certificateRef's, stays).
func SetListenerCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type != c.Type {
			continue
		}
		if (*conds)[i].Status != metav1.ConditionFalse {
			(*conds)[i] = c
		}
		return
	}
	*conds = append(*conds, c)
}
