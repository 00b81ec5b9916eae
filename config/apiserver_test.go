package config_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/internal/testenv"
)

// apiServer is a real kube-apiserver + etcd (envtest, RBAC authorizer on) with the CRDs of
// crd/bases and the Gateway API CRDs of gateway-api/crds installed (as config/default
// installs them), for one test; kubectl is the one built beside it.
type apiServer struct {
	kubeconfig string
	kubectl    string
	cs         kubernetes.Interface
	// namespaced says, for "group/resource" (subresources too), whether it lives in a
	// namespace, as the API server's discovery reports it.
	namespaced map[string]bool
}

// startAPIServer starts one (internal/testenv), or skips the test without KUBEBUILDER_ASSETS.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs, testenv.GatewayCRDs}, DualStack: true})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &apiServer{kubeconfig: env.Kubeconfig, kubectl: env.Kubectl(t), cs: cs, namespaced: map[string]bool{}}
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	for _, l := range lists {
		group, _, _ := strings.Cut(l.GroupVersion, "/")
		if !strings.Contains(l.GroupVersion, "/") {
			group = "" // core: "v1"
		}
		for _, r := range l.APIResources {
			s.namespaced[group+"/"+r.Name] = r.Namespaced
		}
	}
	// ServerPreferredResources leaves out subresources; they live where their resource does.
	for _, sub := range []string{"/services/status", "networking.k8s.io/ingresses/status",
		"metalgate.io/ipaddresspools/status", "metalgate.io/bgppeers/status",
		"gateway.networking.k8s.io/gatewayclasses/status", "gateway.networking.k8s.io/gateways/status"} {
		res, _ := strings.CutSuffix(sub, "/status")
		s.namespaced[sub] = s.namespaced[res]
	}
	return s
}

// run runs kubectl against the server, with stdin when it is not nil.
func (s *apiServer) run(ctx context.Context, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.kubectl, append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ensureNamespaces creates the namespaces that do not exist yet.
func (s *apiServer) ensureNamespaces(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	for _, ns := range names {
		_, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
}

// install creates every namespace the manifests use, then applies them: first
// --dry-run=server (what a user's first try would see), then for real.
func (s *apiServer) install(ctx context.Context, t *testing.T, what string, manifests []byte) {
	t.Helper()
	var nss []string
	for _, o := range decodeAll(t, what, manifests) {
		if ns := o.GetNamespace(); ns != "" {
			nss = append(nss, ns)
		}
	}
	s.ensureNamespaces(ctx, t, nss...)
	out, err := s.run(ctx, manifests, "apply", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server (%s): %v\n%s", what, err, out)
	}
	if !strings.Contains(out, "(server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server (%s): unexpected output:\n%s", what, out)
	}
	if out, err := s.run(ctx, manifests, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply (%s): %v\n%s", what, err, out)
	}
}

// decodeAll splits a rendered multi-document YAML stream into objects (empty documents and
// documents of comments only are skipped).
func decodeAll(t *testing.T, what string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: read YAML: %v", what, err)
		}
		if len(bytes.TrimSpace(d)) == 0 || isOnlyComments(d) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(d, &u.Object); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, d)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
