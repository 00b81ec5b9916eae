package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// The ConfigMaps and Secrets a Gateway's spec.tls.frontend names as CA bundles, read one by
// one to report the listeners' ResolvedRefs and Accepted (a change to one does not reconcile
// the Gateway, the ConfigMap watch of backendtls.go maps only a BackendTLSPolicy's: a Gateway
// with a problem is looked at again after pendingRetry):
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get

// frontendObjects adds to in the ConfigMaps and Secrets that gw's client-certificate
// validation names (caCertificateRefs of a supported kind, of the Gateway's namespace or
// opened to it by a ReferenceGrant), read by name from the API server, so that
// gatewayapi.Translate judges them exactly as the proxy does. One that is not there is left
// out (Translate reports it missing).
func (r *Reconciler) frontendObjects(ctx context.Context, gw *gwv1.Gateway, grants []*gwv1beta1.ReferenceGrant, in *gatewayapi.Input) error {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, s := range in.Secrets {
		seen["Secret/"+s.Namespace+"/"+s.Name] = true
	}
	read := func(field string, v *gwv1.FrontendTLSValidation) error {
		if v == nil {
			return nil
		}
		for i, ref := range v.CACertificateRefs {
			kind, name, reason, _ := gatewayapi.CACertificateRef(gw.Namespace, field, i, ref, grants)
			if reason != "" || seen[kind+"/"+name.String()] {
				continue
			}
			seen[kind+"/"+name.String()] = true
			var obj client.Object = &corev1.ConfigMap{}
			if kind == "Secret" {
				obj = &corev1.Secret{}
			}
			err := r.APIReader.Get(ctx, name, obj)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return fmt.Errorf("get %s %s (%s.validation.caCertificateRefs[%d]): %w", kind, name, field, i, err)
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				in.ConfigMaps = append(in.ConfigMaps, o)
			case *corev1.Secret:
				in.Secrets = append(in.Secrets, o)
			}
		}
		return nil
	}
	f := gw.Spec.TLS.Frontend
	if err := read("spec.tls.frontend.default", f.Default.Validation); err != nil {
		return err
	}
	for i, p := range f.PerPort {
		if err := read(fmt.Sprintf("spec.tls.frontend.perPort[%d]", i), p.TLS.Validation); err != nil {
			return err
		}
	}
	return nil
}

// frontendStatus sets, in st (built by Status), the conditions of the client-certificate
// validation: on each HTTPS listener with a problem (problems, by listener name: the table's
// FrontendProblems) ResolvedRefs False unless an earlier verdict already set it False,
// Accepted False NoValidCACertificate when no CA is usable, and Programmed False; on the
// Gateway InsecureFrontendValidationMode True (ConfigurationChanged) while any port allows
// AllowInsecureFallback, removed otherwise.
func frontendStatus(gw *gwv1.Gateway, st *gwv1.GatewayStatus, problems map[string]table.FrontendProblem, gen int64, now metav1.Time) {
	for i := range st.Listeners {
		ls := &st.Listeners[i]
		p, ok := problems[string(ls.Name)]
		if !ok {
			continue
		}
		for _, c := range gatewayapi.FrontendConditions(p) {
			if old := meta.FindStatusCondition(ls.Conditions, c.Type); old != nil && old.Status == metav1.ConditionFalse && old.Reason != c.Reason {
				continue // a certificateRef's or the listener's own verdict stays
			}
			setCondition(&ls.Conditions, c, gen, now)
		}
		if p.NoValidCA {
			setCondition(&ls.Conditions, cond(gwv1.ListenerConditionProgrammed, false, gwv1.ListenerReasonInvalid,
				"no usable CA certificate for client-certificate validation: "+p.Message), gen, now)
		}
	}
	if gatewayapi.InsecureFrontend(gw) {
		setCondition(&st.Conditions, cond(gwv1.GatewayConditionInsecureFrontendValidationMode, true, gwv1.GatewayReasonConfigurationChanged,
			"spec.tls.frontend lets clients without a valid certificate through (AllowInsecureFallback): the backends must authorize them"), gen, now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, string(gwv1.GatewayConditionInsecureFrontendValidationMode))
	}
}
