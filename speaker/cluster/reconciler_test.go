package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/cluster"
	"github.com/metalgate/metalgate/speaker/config"
)

const ns = "metalgate-system"

// single is a membership of one speaker; it keeps what it was told to admit.
type single struct {
	mu       sync.Mutex
	admitted map[string][]netip.Addr
}

func (*single) Live() map[string]bool      { return map[string]bool{"n1": true} }
func (*single) Reachable() map[string]bool { return map[string]bool{"n1": true} }
func (*single) Join([]string) (int, error) { return 0, nil }
func (*single) Leave(time.Duration) error  { return nil }
func (s *single) Admit(nodes map[string][]netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted = nodes
}

// startAPIServer starts a real kube-apiserver + etcd with metalgate's CRDs and the namespace
// ns (internal/testenv; stopped at the end of the test) and returns its config, the scheme and
// an admin client. Without KUBEBUILDER_ASSETS the test is skipped, saying so.
func startAPIServer(t *testing.T) (*rest.Config, *runtime.Scheme, client.Client) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}})
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return env.Config, env.Scheme, env.Client
}

// TestSpeakerWithLeastPrivilege runs the watcher as the speaker's ServiceAccount with exactly
// the RBAC of config/speaker/rbac.yaml against a real API server: it must see everything it
// needs, announce the VIP, record the Event, and must not be able to write Services.
func TestSpeakerWithLeastPrivilege(t *testing.T) {
	cfg, scheme, admin := startAPIServer(t)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	applyRBAC(t, admin)

	// The world: one node, one pool, one advertisement, one Service with a ready endpoint.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	must(admin.Create(ctx, node))
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}
	must(admin.Status().Update(ctx, node))
	must(admin.Create(ctx, &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec: v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"198.51.100.100/30"}}}))
	must(admin.Create(ctx, &v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "speaker-n1", Labels: map[string]string{"app.kubernetes.io/component": "speaker"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "s", Image: "x"}}},
	}
	must(admin.Create(ctx, pod))
	pod.Status.Phase, pod.Status.HostIP = corev1.PodRunning, "198.51.100.11"
	must(admin.Status().Update(ctx, pod))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	must(admin.Create(ctx, svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.101"}}
	must(admin.Status().Update(ctx, svc))
	ready := true
	must(admin.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, NodeName: &node.Name, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}))

	// The speaker, as its ServiceAccount.
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":metalgate-speaker"}
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/component": "speaker"})
	opts := cluster.Options{Namespace: ns, SpeakerSelector: sel, Build: config.Options{LBClass: "metalgate.io/metalgate", MemberlistPort: 7946}}
	var mu sync.Mutex
	var announced []netip.Addr
	mem := &single{}
	testenv.StartManager(t, sa, ctrl.Options{Scheme: scheme, Cache: cluster.CacheOptions(opts)}, func(_ context.Context, mgr manager.Manager) error {
		onTakeover, err := cluster.TakeoverEvents(cluster.TakeoverEventsOptions{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("metalgate-speaker"), Node: "n1"})
		if err != nil {
			return err
		}
		sp, err := speaker.New(speaker.Options{
			Node: "n1", Membership: mem, HoldDown: time.Millisecond,
			Announcers: map[speaker.Mode]speaker.Announcer{speaker.ModeLayer2: speaker.AnnouncerFunc(func(_ context.Context, d []speaker.Announcement) error {
				mu.Lock()
				defer mu.Unlock()
				announced = announced[:0]
				for _, a := range d {
					announced = append(announced, a.VIP)
				}
				return nil
			})},
			OnTakeover: onTakeover,
		})
		if err != nil {
			return err
		}
		if err := cluster.Setup(mgr, &cluster.Reconciler{Client: mgr.GetClient(), Speaker: sp, Opts: opts}); err != nil {
			return err
		}
		return mgr.Add(manager.RunnableFunc(sp.Run))
	})

	want := netip.MustParseAddr("198.51.100.101")
	testenv.Eventually(t, 20*time.Second, "the speaker announces "+want.String(), func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(announced) != 1 || announced[0] != want {
			return fmt.Errorf("announced %v", announced)
		}
		return nil
	})
	// The membership admits the node of the speaker Pod, at the node's InternalIP.
	mem.mu.Lock()
	admitted := mem.admitted
	mem.mu.Unlock()
	if diff := cmp.Diff(map[string][]netip.Addr{"n1": {netip.MustParseAddr("198.51.100.11")}}, admitted, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("admitted members (-want +got):\n%s", diff)
	}
	testenv.Eventually(t, 10*time.Second, "an AnnouncingL2 event on the Service", func() error {
		var evs eventsv1.EventList
		if err := admin.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == cluster.ReasonAnnouncingL2 && e.Regarding.Name == "web" && strings.Contains(e.Note, "198.51.100.101") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})

	// Least privilege: the speaker's identity cannot write Services or their status.
	c, err := client.New(sa, client.Options{Scheme: scheme})
	must(err)
	var got corev1.Service
	must(c.Get(ctx, client.ObjectKeyFromObject(svc), &got))
	got.Annotations = map[string]string{"x": "y"}
	if err := c.Update(ctx, &got); !apierrors.IsForbidden(err) {
		t.Errorf("speaker updated a Service: err = %v, want Forbidden", err)
	}
	if err := c.Status().Update(ctx, &got); !apierrors.IsForbidden(err) {
		t.Errorf("speaker updated a Service status: err = %v, want Forbidden", err)
	}

	// A change rebuilds the World: the endpoint goes unready, nobody announces (ETP Cluster
	// needs one ready endpoint somewhere).
	var es discoveryv1.EndpointSlice
	must(admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web-1"}, &es))
	notReady := false
	es.Endpoints[0].Conditions.Ready = &notReady
	must(admin.Update(ctx, &es))
	testenv.Eventually(t, 20*time.Second, "no announcement without a ready endpoint", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(announced) != 0 {
			return fmt.Errorf("still announcing %v", announced)
		}
		return nil
	})
}

// applyRBAC creates the objects of config/speaker/rbac.yaml.
func applyRBAC(t *testing.T, c client.Client) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "speaker", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetNamespace() == "" && u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" {
			u.SetNamespace(ns)
		}
		if err := c.Create(context.Background(), &u); err != nil {
			t.Fatal(fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err))
		}
	}
}
