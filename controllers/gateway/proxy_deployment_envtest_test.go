package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
)

func proxyDeployment(t *testing.T, ns, name string) (*appsv1.Deployment, error) {
	t.Helper()
	var d appsv1.Deployment
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: controllers.DefaultNamespace, Name: gateway.ServiceName(ns, name)}, &d)
	return &d, err
}

// TestGatewayProxyDeployment: with a proxy image, each Gateway also gets a proxy Deployment in
// metalgate-system running `metalgate proxy --gateway=<ns>/<name>`, whose pods the Gateway's
// Service selects, listening on the listeners' ports; it follows listener edits, comes back
// when deleted by hand, and goes with the Gateway. Without an image there is none.
func TestGatewayProxyDeployment(t *testing.T) {
	needAPIServer(t)
	const image = "registry.test/metalgate:gw"
	startControllerWith(t, nil, gateway.Options{Proxy: gateway.ProxyOptions{Image: image}})
	ns := namespace(t)
	gatewayClass(t, "gc-proxy", gateway.ControllerName)
	pool(t, "gw-proxy", "100.64.47.0/30")
	newGateway(t, ns, "served", "gc-proxy", poolAnnotation("gw-proxy"),
		listener("http", gwv1.HTTPProtocolType, 80), listener("https", gwv1.HTTPSProtocolType, 8443))
	check := func(wantPorts string) {
		t.Helper()
		eventually(t, wait, func() string {
			d, err := proxyDeployment(t, ns, "served")
			if err != nil {
				return err.Error()
			}
			svc := gatewayServices(t, ns, "served")
			if len(svc) != 1 {
				return fmt.Sprintf("%d Services", len(svc))
			}
			for k, v := range svc[0].Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					return fmt.Sprintf("the Service selects %s=%s, the pods have %v", k, v, d.Spec.Template.Labels)
				}
			}
			c := d.Spec.Template.Spec.Containers
			if len(c) != 1 || c[0].Image != image || strings.Join(c[0].Args, " ") != "proxy --gateway="+ns+"/served --h2c" {
				return fmt.Sprintf("containers %+v", c)
			}
			var ports []string
			for _, p := range c[0].Ports {
				ports = append(ports, fmt.Sprint(p.ContainerPort))
			}
			if strings.Join(ports, ",") != wantPorts {
				return fmt.Sprintf("container ports %v, want %s", ports, wantPorts)
			}
			if rp := c[0].ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.IntValue() != 10254 {
				return fmt.Sprintf("readiness probe %+v, want /readyz on the admin port", rp)
			}
			if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				return fmt.Sprintf("pod security context %+v: not non-root", sc)
			}
			return ""
		})
	}
	check("80,8443,10254")

	if err := updateGateway(t, ns, "served", func(g *gwv1.Gateway) { g.Spec.Listeners = g.Spec.Listeners[1:] }); err != nil {
		t.Fatal(err)
	}
	check("8443,10254")

	d, err := proxyDeployment(t, ns, "served")
	if err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		again, err := proxyDeployment(t, ns, "served")
		if err != nil || again.UID == d.UID {
			return fmt.Sprintf("the Deployment deleted by hand is not back: %v", err)
		}
		return ""
	})

	if err := k8sClient.Delete(context.Background(), getGateway(t, ns, "served")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if _, err := proxyDeployment(t, ns, "served"); err == nil {
			return "the proxy Deployment of the deleted Gateway is still there"
		}
		return ""
	})
}

// TestGatewayProgrammedWaitsForProxy: with proxies made by the controller, a Gateway whose
// address is assigned lists it but stays Programmed=False/Pending, naming its Deployment, until
// that Deployment has an available replica (envtest runs no Deployment controller: the test
// writes the Deployment's status as kube-controller-manager would); the Deployment watch
// brings Programmed=True without any Gateway edit, and losing the replica takes it back.
func TestGatewayProgrammedWaitsForProxy(t *testing.T) {
	needAPIServer(t)
	startControllerWith(t, nil, gateway.Options{Proxy: gateway.ProxyOptions{Image: "registry.test/metalgate:gw"}})
	ns := namespace(t)
	gatewayClass(t, "gc-ready", gateway.ControllerName)
	pool(t, "gw-ready", "100.64.48.0/30")
	newGateway(t, ns, "ready", "gc-ready", poolAnnotation("gw-ready"), listener("http", gwv1.HTTPProtocolType, 80))
	programmed := func(status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		eventually(t, wait, func() string {
			g := getGateway(t, ns, "ready")
			if !strings.HasPrefix(statusAddresses(g), "100.64.48.") {
				return fmt.Sprintf("status.addresses %q, want the VIP", statusAddresses(g))
			}
			return hasCondition(g.Status.Conditions, "Programmed", status, reason, msg, g.Generation)
		})
	}
	programmed(metav1.ConditionFalse, "Pending", "replica") // "created, no replica available yet", then "has no available replica"

	setAvailable := func(n int32) {
		t.Helper()
		d, err := proxyDeployment(t, ns, "ready")
		if err != nil {
			t.Fatal(err)
		}
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, n, n
		if err := k8sClient.Status().Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	setAvailable(0)
	programmed(metav1.ConditionFalse, "Pending", "has no available replica")
	setAvailable(1)
	programmed(metav1.ConditionTrue, "Programmed", "address assigned")
	setAvailable(0)
	programmed(metav1.ConditionFalse, "Pending", "has no available replica")
}
