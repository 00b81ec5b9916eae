// Package config_test checks the deploy manifests under config/: least-privilege RBAC per
// component, the kind cluster config, and — against a real kube-apiserver (envtest) — that
// every kustomization applies cleanly (kubectl apply --dry-run=server -k).
package config_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// docs splits a multi-document YAML file.
func docs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		d, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(d)) > 0 && !isOnlyComments(d) {
			out = append(out, d)
		}
	}
	return out
}

func isOnlyComments(d []byte) bool {
	for _, line := range strings.Split(string(d), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

type meta struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
}

// objects decodes every document of the files whose kind is kind into new(T) values.
func objects[T any](t *testing.T, kind string, files ...string) []*T {
	t.Helper()
	var out []*T
	for _, f := range files {
		for _, d := range docs(t, f) {
			var m meta
			if err := yaml.Unmarshal(d, &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Kind != kind {
				continue
			}
			v := new(T)
			if err := yaml.UnmarshalStrict(d, v); err != nil {
				t.Fatalf("%s: %s %s: %v", f, kind, m.Metadata.Name, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// grants flattens rules into "group/resource:verb" strings.
func grants(rules ...[]rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	for _, rs := range rules {
		for _, r := range rs {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						set[g+"/"+res+":"+v] = true
					}
				}
			}
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func rulesOf[T rbacv1.Role | rbacv1.ClusterRole](objs []*T) [][]rbacv1.PolicyRule {
	var out [][]rbacv1.PolicyRule
	for _, o := range objs {
		switch r := any(o).(type) {
		case *rbacv1.Role:
			out = append(out, r.Rules)
		case *rbacv1.ClusterRole:
			out = append(out, r.Rules)
		}
	}
	return out
}

// generatedProxyGrants are the proxy's needs as generated from its kubebuilder markers.
func generatedProxyGrants(t *testing.T) []string {
	return grants(rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", "rbac/proxy/role.yaml"))...)
}

// TestProxyRBACMatchesCode: the hand-written proxy RBAC grants exactly what the code's
// kubebuilder markers (config/rbac/proxy/role.yaml) ask for — cluster-wide proxy and
// namespace-scoped proxy alike — and the namespace-scoped proxy reads Secrets (and everything
// else namespaced) only through a Role in its own namespace.
func TestProxyRBACMatchesCode(t *testing.T) {
	want := generatedProxyGrants(t)
	classes := objects[rbacv1.ClusterRole](t, "ClusterRole", "proxy/ingressclass/ingressclass.yaml")
	if len(classes) != 1 || classes[0].Name != "metalgate-proxy-ingressclasses" {
		t.Fatalf("proxy/ingressclass: want one ClusterRole metalgate-proxy-ingressclasses, got %d", len(classes))
	}
	if got := grants(classes[0].Rules); !slices.Equal(got, []string{
		"authentication.k8s.io/tokenreviews:create", "authorization.k8s.io/subjectaccessreviews:create",
		"networking.k8s.io/ingressclasses:get", "networking.k8s.io/ingressclasses:list", "networking.k8s.io/ingressclasses:watch"}) {
		t.Errorf("ClusterRole metalgate-proxy-ingressclasses grants %v, want read of IngressClasses and the admin port's token and access reviews only", got)
	}

	// Cluster-wide: ClusterRole + Role (Lease, own Pod) + the IngressClass ClusterRole.
	cw := grants(append(append(rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", "proxy/rbac.yaml")),
		rulesOf(objects[rbacv1.Role](t, "Role", "proxy/rbac.yaml"))...), classes[0].Rules)...)
	if !slices.Equal(cw, want) {
		t.Errorf("config/proxy grants\n  %v\nthe code needs (config/rbac/proxy/role.yaml)\n  %v", cw, want)
	}
	for _, r := range rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", "proxy/rbac.yaml")) {
		for _, g := range grants(r) {
			if strings.HasPrefix(g, "coordination.k8s.io/leases:") || strings.HasPrefix(g, "/pods:") {
				t.Errorf("config/proxy: %s is cluster-wide; the Lease and the own Pod are in the proxy's namespace only", g)
			}
		}
	}

	// Namespace-scoped: no ClusterRole of its own; the Role has every namespaced rule.
	if crs := objects[rbacv1.ClusterRole](t, "ClusterRole", "proxy/namespaced/rbac.yaml"); len(crs) != 0 {
		t.Errorf("config/proxy/namespaced defines %d ClusterRoles; it must use Roles (and the shared IngressClass ClusterRole) only", len(crs))
	}
	ns := grants(append(rulesOf(objects[rbacv1.Role](t, "Role", "proxy/namespaced/rbac.yaml")), classes[0].Rules)...)
	if !slices.Equal(ns, want) {
		t.Errorf("config/proxy/namespaced grants\n  %v\nthe code needs\n  %v", ns, want)
	}
	for _, b := range objects[rbacv1.ClusterRoleBinding](t, "ClusterRoleBinding", "proxy/namespaced/rbac.yaml") {
		if b.RoleRef.Name != "metalgate-proxy-ingressclasses" {
			t.Errorf("config/proxy/namespaced: ClusterRoleBinding %s binds %s; only IngressClasses may be cluster-wide", b.Name, b.RoleRef.Name)
		}
	}
}

// TestSpeakerRBAC: the speaker cannot write Services (or anything but Events, BGPPeer status
// and the token and access reviews of its metrics port), and its container adds no capability
// beyond NET_RAW/NET_ADMIN, on the host network.
func TestSpeakerRBAC(t *testing.T) {
	rules := append(rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", "speaker/rbac.yaml")),
		rulesOf(objects[rbacv1.Role](t, "Role", "speaker/rbac.yaml"))...)
	if len(rules) == 0 {
		t.Fatal("no speaker roles found")
	}
	for _, g := range grants(rules...) {
		res, verb, _ := strings.Cut(g, ":")
		reviews := (res == "authentication.k8s.io/tokenreviews" || res == "authorization.k8s.io/subjectaccessreviews") && verb == "create"
		if !slices.Contains([]string{"get", "list", "watch"}, verb) && res != "events.k8s.io/events" &&
			(res != "metalgate.io/bgppeers/status" || verb != "patch") && !reviews {
			t.Errorf("speaker may %s %s; it only reads, records Events, patches BGPPeer status and reviews tokens", verb, res)
		}
		if strings.HasPrefix(res, "/services") && !slices.Contains([]string{"get", "list", "watch"}, verb) {
			t.Errorf("speaker may %s Services", verb)
		}
	}
	ds := objects[appsv1.DaemonSet](t, "DaemonSet", "speaker/daemonset.yaml")
	if len(ds) != 1 {
		t.Fatalf("want one DaemonSet, got %d", len(ds))
	}
	spec := ds[0].Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("speaker DaemonSet: hostNetwork must be true (ARP/NDP on the node's interfaces)")
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: must drop ALL capabilities", c.Name)
			continue
		}
		for _, cp := range sc.Capabilities.Add {
			if cp != "NET_RAW" && cp != "NET_ADMIN" {
				t.Errorf("container %s adds capability %s; only NET_RAW/NET_ADMIN are allowed", c.Name, cp)
			}
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s is privileged", c.Name)
		}
	}
}

// TestProxyDeployment: non-root, no capabilities, unprivileged ports, the Service maps 80/443
// and keeps client addresses (externalTrafficPolicy Local).
func TestProxyDeployment(t *testing.T) {
	deps := objects[appsv1.Deployment](t, "Deployment", "proxy/base/deployment.yaml")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deps))
	}
	spec := deps[0].Spec.Template.Spec
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Error("proxy must run as non-root")
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) != 0 ||
		!slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Error("proxy container must drop ALL capabilities and add none")
	}
	if c.Args[0] != "proxy" {
		t.Errorf("args = %v, want the proxy subcommand first", c.Args)
	}
	svcs := objects[corev1.Service](t, "Service", "proxy/base/service.yaml")
	if len(svcs) != 1 || svcs[0].Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("want one LoadBalancer Service")
	}
	// Issue 14: backends see the client's address (no SNAT by kube-proxy).
	if got := svcs[0].Spec.ExternalTrafficPolicy; got != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("Service externalTrafficPolicy = %q, want Local", got)
	}
	ports := map[int32]string{}
	for _, p := range svcs[0].Spec.Ports {
		ports[p.Port] = p.TargetPort.String()
	}
	if ports[80] != "http" || ports[443] != "https" {
		t.Errorf("Service ports = %v, want 80→http, 443→https", ports)
	}
}

// kindCluster is the part of kind's v1alpha4 Cluster the repository relies on (the kind module
// is not a dependency).
type kindCluster struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Nodes      []struct {
		Role string `json:"role"`
	} `json:"nodes"`
}

func TestKindClusterConfig(t *testing.T) {
	b, err := os.ReadFile("kind/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c kindCluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("kind/cluster.yaml: %v", err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("kind/apiVersion = %s %s, want Cluster kind.x-k8s.io/v1alpha4", c.Kind, c.APIVersion)
	}
	var roles []string
	for _, n := range c.Nodes {
		roles = append(roles, n.Role)
	}
	if !slices.Equal(roles, []string{"control-plane", "worker", "worker"}) {
		t.Errorf("nodes = %v, want one control-plane and two workers", roles)
	}
}

// kustomizations are every directory applied on its own, in order, with the namespaces they
// need to exist (dry-run does not create them).
var kustomizations = []string{
	"default", "lab", "proxy", "edge", "kind",
	"demo/pool", "demo/l2", "demo/bgp", "demo/one", "demo/two", "demo/three", "demo/misinstalled-proxy",
	"demo/gatewayclass", "demo/gateway",
	"kind/samples", "samples",
}

// TestApplyDryRun: against a real kube-apiserver with the CRDs installed (and the namespaces
// created), kubectl apply --dry-run=server accepts every kustomization under config/.
func TestApplyDryRun(t *testing.T) {
	t.Parallel() // its own API server
	s := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s.ensureNamespaces(ctx, t, "metalgate-system", "metalgate-edge", "one", "two", "three", "shop", "demo")
	kubeconfig, kubectl := s.kubeconfig, s.kubectl
	for _, dir := range kustomizations {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-k", dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server -k config/%s: %v\n%s", dir, err, out)
			}
			if !strings.Contains(string(out), "(server dry run)") {
				t.Errorf("unexpected output:\n%s", out)
			}
		})
	}
	// The demo proxies are namespace-scoped: their ServiceAccount can read Secrets in its own
	// namespace and nowhere else (checked by the API server's authorizer).
	t.Run("namespaced_proxy_secrets", func(t *testing.T) {
		for _, ns := range []string{"default", "demo/one"} {
			out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "-k", ns).CombinedOutput()
			if err != nil {
				t.Fatalf("apply config/%s: %v\n%s", ns, err, out)
			}
		}
		sa := "system:serviceaccount:one:metalgate-proxy"
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "secrets", "-n", "one"}, "yes"},
			{[]string{"list", "secrets", "-n", "two"}, "no"},
			{[]string{"list", "secrets", "-A"}, "no"},
			{[]string{"update", "ingresses", "--subresource=status", "-n", "one"}, "yes"},
			{[]string{"update", "ingresses", "--subresource=status", "-n", "two"}, "no"},
			{[]string{"update", "ingresses", "-n", "one"}, "no"},
			{[]string{"list", "ingressclasses"}, "yes"},
			{[]string{"create", "leases.coordination.k8s.io", "-n", "one"}, "yes"},
			{[]string{"update", "services", "-n", "one"}, "no"},
		} {
			args := append([]string{"--kubeconfig", kubeconfig, "auth", "can-i", "--as", sa}, c.args...)
			out, _ := exec.CommandContext(ctx, kubectl, args...).Output()
			if got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); got != c.want {
				t.Errorf("%s can-i %v = %q, want %q", sa, c.args, got, c.want)
			}
		}
		speaker := "system:serviceaccount:metalgate-system:metalgate-speaker"
		for _, verb := range []string{"update", "patch", "create", "delete"} {
			for _, sub := range []string{"", "status"} {
				out, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "auth", "can-i", "--as", speaker, verb, "services", "--subresource="+sub, "-A").Output()
				if got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); got != "no" {
					t.Errorf("speaker can-i %s services (subresource %q) = %q, want no", verb, sub, got)
				}
			}
		}
	})
}
