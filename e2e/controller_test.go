//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
)

// operatorNamespace is where config/lab deploys metalgate and where it reads its pools.
const operatorNamespace = "metalgate-system"

// TestControllerAssignsVIP: with the operator deployed by `make e2e` (config/lab), a
// LoadBalancer Service gets an address of an IPAddressPool from the controller Deployment's
// pod running in the lab.
func TestControllerAssignsVIP(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()

	// The controller must be the Deployment's pod, running on a lab node.
	pods, err := cs.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=metalgate,app.kubernetes.io/component=controller",
	})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			if _, err := lab.NodeByName(p.Spec.NodeName); err != nil {
				t.Errorf("controller pod %s runs on %q: %v", p.Name, p.Spec.NodeName, err)
			}
			running++
		}
	}
	if running == 0 {
		t.Fatalf("no running metalgate controller pod in %s: deploy it with make e2e (kubectl apply -k config/lab)", operatorNamespace)
	}

	cl := labClient(t, l)
	pool := &v1alpha1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-vips-", Namespace: operatorNamespace},
		Spec:       v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{v1alpha1.AddressRange(lab.VIPPool.String())}},
	}
	if err := cl.Create(ctx, pool); err != nil {
		t.Fatalf("create IPAddressPool: %v", err)
	}
	t.Cleanup(func() {
		if err := cl.Delete(context.Background(), pool); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete pool: %v", err)
		}
	})

	ns := testNamespace(t, cs, "e2e-controller")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := cl.Create(ctx, svc); err != nil {
		t.Fatalf("create Service: %v", err)
	}
	start := time.Now()
	var vip netip.Addr
	eventually(t, 30*time.Second, "Service "+ns+"/web gets an address from "+lab.VIPPool.String(), func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) == 0 {
			return fmt.Errorf("status.loadBalancer is empty")
		}
		a, err := netip.ParseAddr(ing[0].IP)
		if err != nil {
			return fmt.Errorf("status.loadBalancer.ingress[0].ip %q: %w", ing[0].IP, err)
		}
		if !lab.VIPPool.Contains(a) {
			return fmt.Errorf("address %s outside %s", a, lab.VIPPool)
		}
		vip = a
		return nil
	})
	t.Logf("Service %s/web got %s from pool %s after %s", ns, vip, pool.Name, time.Since(start).Round(time.Millisecond))
}
