package gateway_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestSetupWithoutGatewayAPI: on an API server without the Gateway API CRDs, Setup registers
// nothing and returns no error, so `metalgate controller` runs as before (a cluster, a lab or
// a test that installs only metalgate's CRDs keeps working).
func TestSetupWithoutGatewayAPI(t *testing.T) {
	needAPIServer(t)
	c := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}, Scheme: scheme}).Config
	mgr := testenv.NewManager(t, c, ctrl.Options{Scheme: scheme})
	enabled, err := gateway.Setup(context.Background(), mgr, gateway.Options{SkipNameValidation: true})
	if err != nil || enabled {
		t.Fatalf("Setup without Gateway API: enabled %v, error %v; want disabled, no error", enabled, err)
	}
	// And with it (the package's API server), enabled.
	mgr2 := testenv.NewManager(t, cfg, ctrl.Options{Scheme: scheme})
	if enabled, err := gateway.Setup(context.Background(), mgr2, gateway.Options{SkipNameValidation: true}); err != nil || !enabled {
		t.Fatalf("Setup with Gateway API: enabled %v, error %v", enabled, err)
	}
}

// TestSetupWithoutGRPCRoute: on an API server with every Gateway API CRD but GRPCRoute's (a
// Gateway API install before v1.1), the Gateway controller is enabled and serves HTTPRoutes:
// an HTTPRoute gets its parent status and the listener counts it. Watching or listing
// GRPCRoutes there would fail the manager's start or every reconcile.
func TestSetupWithoutGRPCRoute(t *testing.T) {
	needAPIServer(t)
	crds, err := testenv.CRDsExcept(testenv.GatewayCRDs, "grpcroutes")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: append(crds, testenv.MetalgateCRDs), Scheme: scheme})
	c, ctx := env.Client, context.Background()
	var list gwv1.GRPCRouteList
	if err := c.List(ctx, &list); err == nil {
		t.Fatal("the API server serves GRPCRoutes: the test's premise does not hold")
	}
	mk := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	mk(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllers.DefaultNamespace}})
	mk(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}})
	mk(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gc"}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}})
	mk(&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: gwv1.GatewaySpec{GatewayClassName: "gc",
		Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}})
	mk(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	mk(httpRoute("app", "r", []gwv1.ParentReference{parentRef("app", "web")}, "app"))
	startControllerOn(t, env.Config, nil, gateway.Options{})
	eventually(t, wait, func() string {
		var hr gwv1.HTTPRoute
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "r"}, &hr); err != nil {
			return err.Error()
		}
		if len(hr.Status.Parents) != 1 || hr.Status.Parents[0].ControllerName != gateway.ControllerName {
			return fmt.Sprintf("HTTPRoute parents %+v, want metalgate's", hr.Status.Parents)
		}
		if c := findCondition(hr.Status.Parents[0].Conditions, "Accepted"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("HTTPRoute Accepted %+v", c)
		}
		var gw gwv1.Gateway
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, &gw); err != nil {
			return err.Error()
		}
		if len(gw.Status.Listeners) != 1 || gw.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Sprintf("listeners %+v, want attachedRoutes 1", gw.Status.Listeners)
		}
		return ""
	})
}
