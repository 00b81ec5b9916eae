package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/internal/testenv"
)

// The tests in this package run against a real kube-apiserver and etcd (internal/testenv,
// from KUBEBUILDER_ASSETS), with metalgate's CRDs and the Gateway API CRDs that config/
// installs, and dual-stack Service ranges. Without it, every test says it is skipped and why.

var (
	kube      *testenv.Env // nil without KUBEBUILDER_ASSETS: needAPIServer skips
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = gwv1.Install(scheme)
	_ = gwv1beta1.Install(scheme)
	opts := testenv.Options{CRDs: []string{testenv.MetalgateCRDs, testenv.GatewayCRDs}, DualStack: true, Scheme: scheme}
	os.Exit(testenv.Main(m, opts, func(e *testenv.Env) error {
		kube, cfg, k8sClient = e, e.Config, e.Client
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllers.DefaultNamespace}}
		if err := k8sClient.Create(context.Background(), ns); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		return nil
	}))
}

func needAPIServer(t *testing.T) { t.Helper(); kube.Need(t) }

// startController runs one controller manager — the Service allocator and the Gateway
// controllers, as `metalgate controller` does — until the returned stop function is called
// or the test ends. elect, when set, edits the options (leader election).
func startController(t *testing.T, elect func(*ctrl.Options)) (stop func()) {
	t.Helper()
	return startControllerWith(t, elect, gateway.Options{})
}

// startControllerWith is startController with the Gateway controller's options.
func startControllerWith(t *testing.T, elect func(*ctrl.Options), gwOpts gateway.Options) (stop func()) {
	t.Helper()
	return startControllerOn(t, cfg, elect, gwOpts)
}

// startControllerOn is startControllerWith on the API server of config c.
func startControllerOn(t *testing.T, c *rest.Config, elect func(*ctrl.Options), gwOpts gateway.Options) (stop func()) {
	t.Helper()
	opts := ctrl.Options{
		Scheme: scheme,
		Logger: testenv.Logger(t, "controller"),
		Cache:  controllers.CacheOptions(controllers.DefaultNamespace),
	}
	if elect != nil {
		elect(&opts)
	}
	gwOpts.SkipNameValidation = true
	return testenv.StartManager(t, c, opts, func(ctx context.Context, mgr manager.Manager) error {
		err := controllers.Setup(ctx, mgr, controllers.Options{
			Metrics:            controllers.NewMetrics(prometheus.NewRegistry()),
			SkipNameValidation: true,
		})
		if err != nil {
			return fmt.Errorf("controllers: %w", err)
		}
		enabled, err := gateway.Setup(ctx, mgr, gwOpts)
		if err != nil || !enabled {
			return fmt.Errorf("gateway: enabled %v, %w", enabled, err)
		}
		return nil
	})
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// create creates o and deletes it when the test ends.
func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
}

func pool(t *testing.T, name string, addrs ...string) {
	t.Helper()
	p := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: controllers.DefaultNamespace, Name: name}}
	for _, a := range addrs {
		p.Spec.Addresses = append(p.Spec.Addresses, v1alpha1.AddressRange(a))
	}
	create(t, p)
}

func gatewayClass(t *testing.T, name string, controller gwv1.GatewayController) *gwv1.GatewayClass {
	t.Helper()
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.GatewayClassSpec{ControllerName: controller}}
	create(t, gc)
	return gc
}

type gwOpt func(*gwv1.Gateway)

func listener(name string, proto gwv1.ProtocolType, port int32) gwOpt {
	return func(g *gwv1.Gateway) {
		l := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: proto, Port: gwv1.PortNumber(port)}
		if proto == gwv1.HTTPSProtocolType || proto == gwv1.TLSProtocolType {
			l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
		}
		g.Spec.Listeners = append(g.Spec.Listeners, l)
	}
}

func address(typ gwv1.AddressType, value string) gwOpt {
	return func(g *gwv1.Gateway) {
		g.Spec.Addresses = append(g.Spec.Addresses, gwv1.GatewaySpecAddress{Type: &typ, Value: value})
	}
}

func poolAnnotation(p string) gwOpt {
	return func(g *gwv1.Gateway) {
		g.Annotations = map[string]string{contract.AnnotationAddressPool: p}
	}
}

func newGateway(t *testing.T, ns, name, class string, opts ...gwOpt) *gwv1.Gateway {
	t.Helper()
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)}}
	for _, o := range opts {
		o(g)
	}
	if len(g.Spec.Listeners) == 0 {
		listener("http", gwv1.HTTPProtocolType, 80)(g)
	}
	create(t, g)
	return g
}

// eventually is testenv.Eventually for conditions that say what they saw ("" for true).
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	testenv.Eventually(t, timeout, "condition", func() error {
		if why := cond(); why != "" {
			return errors.New(why)
		}
		return nil
	})
}

func getGateway(t *testing.T, ns, name string) *gwv1.Gateway {
	t.Helper()
	var g gwv1.Gateway
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &g); err != nil {
		t.Fatalf("get Gateway %s/%s: %v", ns, name, err)
	}
	return &g
}

// updateGateway applies mutate to the live Gateway and updates it, again on a conflict (the
// controller writes its status meanwhile).
func updateGateway(t *testing.T, ns, name string, mutate func(*gwv1.Gateway)) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g := getGateway(t, ns, name)
		mutate(g)
		return k8sClient.Update(context.Background(), g)
	})
}

// findCondition returns the condition of type typ, or nil.
func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// hasCondition says "" when conds hold typ with status and reason, observed at generation
// gen, and whose message contains msg; else what it found.
func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string, gen int64) string {
	c := findCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Sprintf("no %s condition in %+v", typ, conds)
	case c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) || c.ObservedGeneration != gen:
		return fmt.Sprintf("%s = %s/%s %q (generation %d), want %s/%s containing %q (generation %d)",
			typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, status, reason, msg, gen)
	}
	return ""
}

func statusAddresses(g *gwv1.Gateway) string {
	var out []string
	for _, a := range g.Status.Addresses {
		out = append(out, a.Value)
	}
	return strings.Join(out, ",")
}

// gatewayServices lists the Services the controller made for Gateway ns/name.
func gatewayServices(t *testing.T, ns, name string) []corev1.Service {
	t.Helper()
	var list corev1.ServiceList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(controllers.DefaultNamespace)); err != nil {
		t.Fatalf("list Services: %v", err)
	}
	var out []corev1.Service
	for _, s := range list.Items {
		if s.Annotations[contract.AnnotationGateway] == ns+"/"+name {
			out = append(out, s)
		}
	}
	return out
}
