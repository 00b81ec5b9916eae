package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
	"github.com/metalgate/metalgate/proxy/dataplane"
	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// The tests in this package run against a real kube-apiserver and etcd (internal/testenv,
// from KUBEBUILDER_ASSETS) with the Gateway API CRDs and two IngressClasses: metalgate's and
// another controller's. Without it, every test says it is skipped and why.

var (
	kube      *testenv.Env // nil without KUBEBUILDER_ASSETS: kube.Need skips
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatewayv1.Install(scheme)
	_ = gatewayv1beta1.Install(scheme)
	os.Exit(testenv.Main(m, testenv.Options{CRDs: []string{testenv.GatewayCRDs}, Scheme: scheme}, func(e *testenv.Env) error {
		kube, cfg, k8sClient = e, e.Config, e.Client
		class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "metalgate"}, Spec: networkingv1.IngressClassSpec{Controller: proxyingress.ControllerName}}
		other := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}}
		for _, c := range []client.Object{class, other} {
			if err := k8sClient.Create(context.Background(), c); err != nil {
				return fmt.Errorf("create IngressClass: %w", err)
			}
		}
		return nil
	}))
}

// The API server refuses loopback addresses in EndpointSlices, so backends on 127.0.A.B
// appear as "pod" 10.244.A.B, and the data plane's dialer maps them back.
func podIP(loopback string) string { return "10.244." + strings.TrimPrefix(loopback, "127.0.") }

func podDialer(ctx context.Context, network, addr string) (net.Conn, error) {
	if strings.HasPrefix(addr, "10.244.") {
		addr = "127.0." + strings.TrimPrefix(addr, "10.244.")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func ptr[T any](v T) *T { return &v }

// proxy is a running control plane + data plane for one test.
type proxy struct {
	addr    string
	metrics *controlplane.Metrics
	cp      *controlplane.ControlPlane
	dp      *dataplane.Server
	// stop ends the proxy before the test does (as a killed pod).
	stop func()
}

// startProxy runs the proxy (leader election off) scoped to ns until the test ends.
func startProxy(t *testing.T, ns string, mutate func(*controlplane.Options)) *proxy {
	t.Helper()
	return startProxyWith(t, ns, mutate, nil)
}

// startProxyWith is startProxy with the manager's options changed by manager (leader
// election, say).
func startProxyWith(t *testing.T, ns string, mutate func(*controlplane.Options), manager func(*ctrl.Options)) *proxy {
	t.Helper()
	return startProxyOn(t, cfg, ns, mutate, manager)
}

// startProxyOn is startProxyWith on the API server of config c.
func startProxyOn(t *testing.T, c *rest.Config, ns string, mutate func(*controlplane.Options), manager func(*ctrl.Options)) *proxy {
	t.Helper()
	log := testenv.Logger(t, "proxy")
	dp, err := dataplane.New(dataplane.Options{Logger: log, DialContext: podDialer})
	if err != nil {
		t.Fatal(err)
	}
	m := controlplane.NewMetrics(prometheus.NewRegistry())
	opts := controlplane.Options{WatchNamespaces: []string{ns}, Swap: dp.Swap, Metrics: m, Logger: log,
		PublishService: types.NamespacedName{Namespace: ns, Name: "proxy"}}
	if mutate != nil {
		mutate(&opts)
	}
	cp, err := controlplane.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mo := ctrl.Options{Scheme: scheme, Logger: log, Cache: cp.CacheOptions()}
	if manager != nil {
		manager(&mo)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	stopManager := testenv.StartManager(t, c, mo, func(ctx context.Context, mgr ctrlmanager.Manager) error {
		if err := cp.Setup(mgr); err != nil {
			return err
		}
		go func() {
			defer close(served)
			_ = dp.Serve(ctx, ln, nil)
		}()
		return nil
	})
	var once sync.Once
	stop := func() { once.Do(func() { stopManager(); <-served }) }
	t.Cleanup(stop)
	testenv.Eventually(t, 20*time.Second, "control plane ready", cp.Ready)
	return &proxy{addr: ln.Addr().String(), metrics: m, cp: cp, dp: dp, stop: stop}
}

var nsCounter atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(t.Name()), nsCounter.Add(1))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	name = strings.Trim(strings.NewReplacer("/", "-", "_", "-").Replace(name), "-")
	if err := k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return name
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func ingress(ns, name, class, host, svc string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr(class), Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}}}}}},
	}
}

func service(ns, name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type: typ, Selector: map[string]string{"app": name},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
}

// backend is a real HTTP server on a loopback address, named in its answers.
type backend struct {
	name string
	srv  *httptest.Server
	ip   string
	port int32
}

var loopbackHost atomic.Int32

func startBackend(t testing.TB, name string) *backend {
	t.Helper()
	return startBackendProtocols(t, name, nil)
}

// startBackendProtocols is startBackend serving protocols (nil: HTTP/1.1); its answers also
// name the protocol of the request ("proto").
func startBackendProtocols(t testing.TB, name string, protocols *http.Protocols) *backend {
	t.Helper()
	ip := fmt.Sprintf("127.0.0.%d", 2+loopbackHost.Add(1)%250)
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = json.NewEncoder(w).Encode(map[string]string{"backend": name, "proto": r.Proto})
	}))
	srv.Config.Protocols = protocols
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &backend{name: name, srv: srv, ip: ip, port: int32(ln.Addr().(*net.TCPAddr).Port)}
}

// setSlice creates or updates the EndpointSlice of svc to the given backends, all ready.
// (envtest runs no endpointslice controller; the test plays it, label included: the proxy
// routes only to slices the endpoint-slice controller manages.)
func setSlice(t testing.TB, ns, svc string, bes ...*backend) {
	t.Helper()
	setSliceOn(t, k8sClient, ns, svc, bes...)
}

// setSliceOn is setSlice with client k8sClient.
func setSliceOn(t testing.TB, k8sClient client.Client, ns, svc string, bes ...*backend) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-slice",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: table.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4}
	var port int32
	for _, b := range bes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{podIP(b.ip)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
		port = b.port // all backends of one slice share a port: one slice per port in Kubernetes
	}
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}}
	ctx := context.Background()
	var cur discoveryv1.EndpointSlice
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &cur); err == nil {
		cur.Endpoints, cur.Ports = s.Endpoints, s.Ports
		if err := k8sClient.Update(ctx, &cur); err != nil {
			t.Fatalf("update slice: %v", err)
		}
		return
	}
	if err := k8sClient.Create(ctx, s); err != nil {
		t.Fatalf("create slice: %v", err)
	}
}

// samePortBackends starts n backends on distinct loopback IPs sharing one port, as pods of
// one Service do.
func samePortBackends(t testing.TB, prefix string, n int) []*backend {
	t.Helper()
	first := startBackend(t, prefix+"0")
	out := []*backend{first}
	for i := 1; i < n; i++ {
		out = append(out, startBackendOn(t, prefix+fmt.Sprint(i), first.port))
	}
	return out
}

func startBackendOn(t testing.TB, name string, port int32) *backend {
	t.Helper()
	for try := 0; try < 50; try++ {
		ip := fmt.Sprintf("127.0.%d.%d", 1+loopbackHost.Add(1)%250, 2+try)
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
		if err != nil {
			continue
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = json.NewEncoder(w).Encode(map[string]string{"backend": name})
		}))
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return &backend{name: name, srv: srv, ip: ip, port: port}
	}
	t.Fatalf("no free loopback address for port %d", port)
	return nil
}

// call sends GET host/ through the proxy and returns the status and the backend's name.
func call(c *http.Client, addr, host string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body struct{ Backend string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body.Backend, nil
}

func warning(t testing.TB, ns, name, reason, substr string) {
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
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, substr) {
				return nil
			}
		}
		return fmt.Errorf("no %s event containing %q on %s/%s; saw %q", reason, substr, ns, name, seen)
	})
}
