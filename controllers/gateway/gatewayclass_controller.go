package gateway

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// ClassReconciler accepts the GatewayClasses whose controllerName is ControllerName and
// leaves every other GatewayClass alone.
type ClassReconciler struct {
	Client client.Client
}

var _ reconcile.Reconciler = &ClassReconciler{}

// Reconcile sets the class's Accepted condition.
func (r *ClassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var gc gwv1.GatewayClass
	if err := r.Client.Get(ctx, req.NamespacedName, &gc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gc.Spec.ControllerName != ControllerName {
		return ctrl.Result{}, nil
	}
	st := *gc.Status.DeepCopy()
	setCondition(&st.Conditions, ClassAccepted(&gc), gc.Generation, metav1.Now())
	st.SupportedFeatures = classSupportedFeatures()
	if equality.Semantic.DeepEqual(st, gc.Status) {
		return ctrl.Result{}, nil
	}
	gc.Status = st
	if err := r.Client.Status().Update(ctx, &gc); err != nil {
		return ctrl.Result{}, fmt.Errorf("update GatewayClass %s status: %w", gc.Name, err)
	}
	return ctrl.Result{}, nil
}

// ClassAccepted is the Accepted condition of one of metalgate's GatewayClasses: True unless
// it has a parametersRef, which metalgate does not take (the pool is chosen per Gateway by
// annotation).
func ClassAccepted(gc *gwv1.GatewayClass) metav1.Condition {
	if p := gc.Spec.ParametersRef; p != nil {
		return cond(gwv1.GatewayClassConditionStatusAccepted, false, gwv1.GatewayClassReasonInvalidParameters,
			fmt.Sprintf("spec.parametersRef (%s %s) is not supported: choose a pool per Gateway with the annotation %s", p.Kind, p.Name, contract.AnnotationAddressPool))
	}
	return cond(gwv1.GatewayClassConditionStatusAccepted, true, gwv1.GatewayClassReasonAccepted, "accepted by "+string(ControllerName))
}
