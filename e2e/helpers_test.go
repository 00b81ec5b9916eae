//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/internal/testenv"
)

// openLab returns the running lab (make lab-up) and, when the test fails, collects every log
// into e2e/_logs/<test name>/.
func openLab(t *testing.T) *lab.Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lab.Open(ctx)
	if err != nil {
		t.Fatalf("open lab: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, _ := filepath.Abs(filepath.Join("_logs", regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")))
		_ = os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := l.CollectLogs(ctx, dir); err != nil {
			t.Logf("collect logs (partial): %v", err)
		}
		t.Logf("logs of the failed test: %s", dir)
	})
	return l
}

func clientset(t *testing.T, l *lab.Lab) *kubernetes.Clientset {
	t.Helper()
	cs, err := l.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// eventually polls check every 250 ms until it returns nil; at the deadline the test fails
// with the last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	pollEvery(t, 250*time.Millisecond, timeout, what, check)
}

// pollFast is eventually every 20 ms: for steps that are timed (a failover) or repeated many
// times in a row.
func pollFast(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	pollEvery(t, 20*time.Millisecond, timeout, what, check)
}

// pollEvery polls check every interval until it returns nil; at the deadline the test fails
// with the last error (internal/testenv, the one test kit).
func pollEvery(t *testing.T, interval, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testenv.EventuallyEvery(t, interval, timeout, what, check)
}

// testNamespace creates a namespace for one test and deletes it afterwards (unless the test
// failed: then it stays for inspection until lab-down).
func testNamespace(t *testing.T, cs kubernetes.Interface, base string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		err := cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", ns.Name, err)
		}
	})
	// Pods need the namespace's default ServiceAccount, which a controller creates.
	eventually(t, 30*time.Second, "default ServiceAccount of "+ns.Name, func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return ns.Name
}

// echoContainer is the echo backend listening on port, with the downward API identity.
func echoContainer(port int32, args ...string) corev1.Container {
	return corev1.Container{
		Name:            "echo",
		Image:           lab.EchoImage.Ref,
		ImagePullPolicy: corev1.PullNever,
		Args:            append([]string{"-listen", fmt.Sprintf(":%d", port)}, args...),
		Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}},
			PeriodSeconds: 1,
		},
	}
}

// waitDeploymentReady waits until every replica of a Deployment is ready and updated.
func waitDeploymentReady(t *testing.T, cs kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "deployment "+name+" ready", func() error {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ReadyReplicas != want || d.Status.UpdatedReplicas != want {
			return fmt.Errorf("%d/%d ready, %d updated", d.Status.ReadyReplicas, want, d.Status.UpdatedReplicas)
		}
		return nil
	})
}

// waitDaemonSetReady waits until the DaemonSet runs a ready pod on every lab node.
func waitDaemonSetReady(t *testing.T, cs kubernetes.Interface, ns, name string, timeout time.Duration) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	eventually(t, timeout, "daemonset "+name+" ready", func() error {
		var err error
		ds, err = cs.AppsV1().DaemonSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.NumberReady != lab.NodeCount {
			return fmt.Errorf("%d/%d ready", ds.Status.NumberReady, lab.NodeCount)
		}
		return nil
	})
	return ds
}

// podsByNode lists the pods matching a label selector, keyed by node name.
func podsByNode(t *testing.T, cs kubernetes.Interface, ns, selector string) map[string]corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out
}

func shortErr(out string) string {
	out = strings.TrimSpace(out)
	if len(out) > 300 {
		out = out[:300] + "…"
	}
	return out
}

// labClient is a controller-runtime client of the lab that knows Kubernetes', metalgate's and
// Gateway API's types.
func labClient(t *testing.T, l *lab.Lab) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, gwv1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := l.Client(scheme)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// webService runs one echo pod (Deployment "web", port 8080) in ns behind a LoadBalancer Service
// "web" (port 80) asking for pool, and waits for its address.
func webService(t *testing.T, cs kubernetes.Interface, cl client.Client, ns, pool string) (*corev1.Service, netip.Addr) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{echoContainer(8080)}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentReady(t, cs, ns, "web", 2*time.Minute)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Annotations: map[string]string{"metalgate.io/address-pool": pool}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := cl.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	var vip netip.Addr
	eventually(t, 30*time.Second, "Service "+ns+"/web gets an address from pool "+pool, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet")
		}
		var err error
		vip, err = netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
		return err
	})
	return svc, vip
}

// deploySpeaker applies config/speaker, waits for a speaker on every node, and deletes it when
// the test ends.
func deploySpeaker(t *testing.T, l *lab.Lab, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if out, err := l.Kubectl(ctx, "apply", "-k", "../config/speaker"); err != nil {
		t.Fatalf("deploy speaker: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := l.Kubectl(context.Background(), "delete", "--ignore-not-found", "-k", "../config/speaker"); err != nil {
			t.Logf("delete speaker: %v\n%s", err, out)
		}
	})
	waitDaemonSetReady(t, cs, operatorNamespace, "metalgate-speaker", 3*time.Minute)
}

// manualPool creates an IPAddressPool (autoAssign false: only Services that name it use it) and
// deletes it when the test ends.
func manualPool(t *testing.T, cl client.Client, generateName string, addresses ...v1alpha1.AddressRange) *v1alpha1.IPAddressPool {
	t.Helper()
	autoAssign := false
	pool := &v1alpha1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, Namespace: operatorNamespace},
		Spec:       v1alpha1.IPAddressPoolSpec{Addresses: addresses, AutoAssign: &autoAssign},
	}
	if err := cl.Create(context.Background(), pool); err != nil {
		t.Fatalf("create IPAddressPool: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), pool) })
	return pool
}

// routerPeering creates a BGPPeer named name for the lab router (spec from lab's addresses and
// ASNs, then edited by mutate when not nil) and a BGPAdvertisement of pool with the given
// communities. Its cleanup deletes both and waits until the router has no session left:
// deleting the peer closes the sessions with a NOTIFICATION, so the router flushes the routes
// at once. Call it after deploySpeaker, so that this cleanup runs before the DaemonSet goes;
// speakers deleted first would leave their routes stale at the router (graceful restart) in
// the way of the next test.
func routerPeering(t *testing.T, l *lab.Lab, cl client.Client, name, pool string, mutate func(*v1alpha1.BGPPeerSpec), communities ...string) *v1alpha1.BGPPeer {
	t.Helper()
	ctx := context.Background()
	peer := &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace},
		Spec:       v1alpha1.BGPPeerSpec{Address: lab.Router.IPv4.String(), MyASN: lab.NodeASN, ASN: lab.RouterASN},
	}
	if mutate != nil {
		mutate(&peer.Spec)
	}
	if err := cl.Create(ctx, peer); err != nil {
		t.Fatalf("create BGPPeer %s: %v", name, err)
	}
	adv := &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: operatorNamespace},
		Spec:       v1alpha1.BGPAdvertisementSpec{IPAddressPools: []string{pool}, Communities: communities},
	}
	if err := cl.Create(ctx, adv); err != nil {
		_ = cl.Delete(ctx, peer)
		t.Fatalf("create BGPAdvertisement: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cl.Delete(ctx, adv)
		_ = cl.Delete(ctx, peer)
		// Every 250ms: each look runs vtysh. A session left over is logged, not failed: the
		// test itself is over, and the next one starts from its own BGPPeer.
		err := testenv.PollEvery(250*time.Millisecond, 30*time.Second, func() error {
			out, err := l.Vtysh(ctx, "show bgp summary json")
			if err != nil {
				return err
			}
			if strings.Contains(out, `"state":"Established"`) {
				return errors.New("a session is still Established")
			}
			return nil
		})
		if err != nil {
			t.Logf("the router after BGPPeer %s was deleted: %v", name, err)
		}
	})
	return peer
}

// podReady reports whether p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
