package controllers_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

// The tests in this package run against a real kube-apiserver and etcd (internal/testenv,
// from KUBEBUILDER_ASSETS) with metalgate's CRDs and dual-stack Service ranges (dual-stack
// Services need a service CIDR of each family). Without it, every test says it is skipped and
// why.

var (
	kube      *testenv.Env // nil without KUBEBUILDER_ASSETS: kube.Need skips
	cfg       *rest.Config
	k8sClient client.Client
	scheme    *runtime.Scheme
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}, DualStack: true}, func(e *testenv.Env) error {
		kube, cfg, k8sClient, scheme = e, e.Config, e.Client, e.Scheme
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllers.DefaultNamespace}}
		if err := k8sClient.Create(context.Background(), ns); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		return nil
	}))
}

// startController runs one controller manager (leader election off) until the returned stop
// function is called or the test ends.
func startController(t *testing.T) (stop func()) {
	t.Helper()
	return startControllerWith(t, cfg, controllers.Options{})
}

// startControllerWith is startController with its own rest config (rate limits) and options
// (workers); SkipNameValidation is set here, and Metrics unless given.
func startControllerWith(t *testing.T, cfg *rest.Config, opts controllers.Options) (stop func()) {
	t.Helper()
	return startControllerLogged(t, cfg, opts, testenv.Logger(t, "controller"))
}

// startControllerLogged is startControllerWith logging to logger.
func startControllerLogged(t *testing.T, cfg *rest.Config, opts controllers.Options, logger logr.Logger) (stop func()) {
	t.Helper()
	if opts.Metrics == nil {
		opts.Metrics = controllers.NewMetrics(prometheus.NewRegistry())
	}
	opts.SkipNameValidation = true
	return testenv.StartManager(t, cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		Cache:  controllers.CacheOptions(controllers.DefaultNamespace),
	}, func(ctx context.Context, mgr manager.Manager) error {
		return controllers.Setup(ctx, mgr, opts)
	})
}

// namespace creates a namespace for one test and deletes its Services at the end.
func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = k8sClient.DeleteAllOf(context.Background(), &corev1.Service{}, client.InNamespace(name))
	})
	return name
}

// pool creates an IPAddressPool and deletes it when the test ends.
func pool(t *testing.T, name string, mutate func(*v1alpha1.IPAddressPool), addrs ...string) *v1alpha1.IPAddressPool {
	t.Helper()
	p := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: controllers.DefaultNamespace, Name: name}}
	for _, a := range addrs {
		p.Spec.Addresses = append(p.Spec.Addresses, v1alpha1.AddressRange(a))
	}
	if mutate != nil {
		mutate(p)
	}
	if err := k8sClient.Create(context.Background(), p); err != nil {
		t.Fatalf("create pool %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	return p
}

type svcOpt func(*corev1.Service)

func withAnnotation(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withPort(proto corev1.Protocol, port int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "p", Protocol: proto, Port: port, TargetPort: intstr.FromInt32(port)}}
	}
}

func withFamilies(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = fams
	}
}

func service(t *testing.T, ns, name string, opts ...svcOpt) *corev1.Service {
	t.Helper()
	s, err := createService(ns, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// createService is service for goroutines, which must not call t.Fatal.
func createService(ns, name string, opts ...svcOpt) (*corev1.Service, error) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		return nil, fmt.Errorf("create service %s/%s: %w", ns, name, err)
	}
	return s, nil
}

func getService(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	var s corev1.Service
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("get service: %v", err)
	}
	return &s
}

func ips(s *corev1.Service) string {
	var out []string
	for _, i := range s.Status.LoadBalancer.Ingress {
		out = append(out, i.IP)
	}
	return strings.Join(out, ",")
}

// waitIPs waits until the Service's status shows exactly want (comma-separated).
func waitIPs(t *testing.T, ns, name, want string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "Service addresses", func() error {
		if got := ips(getService(t, ns, name)); got != want {
			return fmt.Errorf("%s/%s has %q, want %q", ns, name, got, want)
		}
		return nil
	})
}

// warning waits for a Warning event on the Service whose note contains substr; reason "" is any.
func warning(t *testing.T, ns, name, reason, substr string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "Warning event", func() error {
		var list corev1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name != name {
				continue
			}
			msg := e.Message
			seen = append(seen, e.Reason+": "+msg)
			if e.Type == corev1.EventTypeWarning && (reason == "" || e.Reason == reason) && strings.Contains(msg, substr) {
				return nil
			}
		}
		return fmt.Errorf("no %s event containing %q on %s/%s; saw %q", reason, substr, ns, name, seen)
	})
}

// assertNoAddressHeldTwice fails if two Services show one address without sharing it by key.
func assertNoAddressHeldTwice(t *testing.T) {
	t.Helper()
	var list corev1.ServiceList
	if err := k8sClient.List(context.Background(), &list); err != nil {
		t.Fatalf("list services: %v", err)
	}
	holders := map[netip.Addr][]string{}
	for _, s := range list.Items {
		for _, i := range s.Status.LoadBalancer.Ingress {
			a := netip.MustParseAddr(i.IP)
			key := ""
			for _, k := range contract.AnnotationKeys(contract.AnnotationAllowSharedIP) { // and MetalLB's names
				if v, ok := s.Annotations[k]; ok {
					key = v
					break
				}
			}
			holders[a] = append(holders[a], s.Namespace+"/"+s.Name+"#"+key)
		}
	}
	for a, hs := range holders {
		if len(hs) < 2 {
			continue
		}
		sort.Strings(hs)
		for _, h := range hs {
			if strings.HasSuffix(h, "#") {
				t.Errorf("address %s held by %d Services, not all sharing: %v", a, len(hs), hs)
				break
			}
		}
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
