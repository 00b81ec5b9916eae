package config_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/internal/testenv"
)

// The chart's install-time behaviour against a real API server (helm install/upgrade/uninstall,
// the chart's lookups): the Gateway API CRDs it may install, and the Pod Security check.

const (
	bundleVersion    = "gateway.networking.k8s.io/bundle-version"
	httpRoutesCRD    = "httproutes.gateway.networking.k8s.io"
	chartGatewayCRDs = chart + "/files/gateway-api"
	gatewayCRDsDir   = "gateway-api/crds"
)

// helmIn runs helm against the API server of kubeconfig.
func helmIn(t *testing.T, helm, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	return runHelm(t, helm, append(args, "--kubeconfig", kubeconfig)...)
}

func crdClient(t *testing.T, env *testenv.Env) apiextensionsclient.Interface {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getCRD(t *testing.T, c apiextensionsclient.Interface, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	return crd
}

// TestChartGatewayCRDs: with gatewayAPI.installCRDs the chart installs the Gateway API CRDs,
// kept on uninstall; an upgrade never takes one back to an older bundle version; CRDs another
// owner installed are left untouched (no adoption, no failure).
func TestChartGatewayCRDs(t *testing.T) {
	t.Parallel() // each subtest has its own API server
	helm := helmBinary(t)
	ctx := context.Background()

	t.Run("another owner's CRDs are left alone", func(t *testing.T) {
		t.Parallel()
		env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs, testenv.GatewayCRDs}})
		c := crdClient(t, env)
		before := getCRD(t, c, httpRoutesCRD)
		if out, err := helmIn(t, helm, env.Kubeconfig, "install", "mg", chart, "-n", "metalgate-system", "--create-namespace",
			"--set", "gatewayAPI.installCRDs=true"); err != nil {
			t.Fatalf("helm install over another owner's Gateway API CRDs: %v\n%s", err, out)
		}
		// The API server itself writes the CRD's status (Established) at any time, so compare
		// what a writer of the CRD would change: its spec (generation), labels, annotations
		// and the field managers.
		after := getCRD(t, c, httpRoutesCRD)
		var managers []string
		for _, m := range after.ManagedFields {
			managers = append(managers, m.Manager)
		}
		if after.Generation != before.Generation || after.Annotations["meta.helm.sh/release-name"] != "" ||
			after.Labels["app.kubernetes.io/managed-by"] != "" || strings.Contains(strings.Join(managers, ","), "helm") {
			t.Errorf("the chart touched another owner's CRD: generation %d → %d, labels %v, annotations %v, managers %v",
				before.Generation, after.Generation, after.Labels, after.Annotations, managers)
		}
	})

	t.Run("installed, never downgraded, kept", func(t *testing.T) {
		t.Parallel()
		env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}})
		c := crdClient(t, env)
		if out, err := helmIn(t, helm, env.Kubeconfig, "install", "mg", chart, "-n", "metalgate-system", "--create-namespace",
			"--set", "gatewayAPI.installCRDs=true"); err != nil {
			t.Fatalf("helm install: %v\n%s", err, out)
		}
		files, _ := filepath.Glob(filepath.Join(gatewayCRDsDir, "*.yaml"))
		if len(files) == 0 {
			t.Fatal("no Gateway API CRDs in config/gateway-api/crds")
		}
		crd := getCRD(t, c, httpRoutesCRD)
		ours := crd.Annotations[bundleVersion]
		if ours == "" || crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Fatalf("installed %s has annotations %v: want a bundle version and helm.sh/resource-policy keep", httpRoutesCRD, crd.Annotations)
		}
		list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var gw int
		for _, d := range list.Items {
			if d.Spec.Group == "gateway.networking.k8s.io" {
				gw++
			}
		}
		if gw != len(files) {
			t.Errorf("%d Gateway API CRDs installed, config/gateway-api/crds has %d", gw, len(files))
		}

		// Another controller upgraded the CRD to a newer bundle: an upgrade of the release
		// must not take it back.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{bundleVersion: "v9.9.9"}}})
		if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, httpRoutesCRD, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if out, err := helmIn(t, helm, env.Kubeconfig, "upgrade", "mg", chart, "-n", "metalgate-system",
			"--set", "gatewayAPI.installCRDs=true"); err != nil {
			t.Fatalf("helm upgrade: %v\n%s", err, out)
		}
		if v := getCRD(t, c, httpRoutesCRD).Annotations[bundleVersion]; v != "v9.9.9" {
			t.Errorf("helm upgrade took %s from bundle v9.9.9 to %s: a downgrade", httpRoutesCRD, v)
		}
		if v := getCRD(t, c, "gateways.gateway.networking.k8s.io").Annotations[bundleVersion]; v != ours {
			t.Errorf("gateways CRD at %q after the upgrade, want %s", v, ours)
		}

		if out, err := helmIn(t, helm, env.Kubeconfig, "uninstall", "mg", "-n", "metalgate-system"); err != nil {
			t.Fatalf("helm uninstall: %v\n%s", err, out)
		}
		for _, name := range []string{httpRoutesCRD, "gateways.gateway.networking.k8s.io"} {
			if d := getCRD(t, c, name); d.DeletionTimestamp != nil {
				t.Errorf("helm uninstall is deleting %s (and every object of it)", name)
			}
		}
	})
}

// TestChartRefusesRestrictedNamespace: installing the speaker into a namespace whose Pod
// Security admission enforces restricted fails, naming the label to set; without the speaker,
// the same namespace is accepted.
func TestChartRefusesRestrictedNamespace(t *testing.T) {
	t.Parallel() // its own API server
	helm := helmBinary(t)
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locked", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := helmIn(t, helm, env.Kubeconfig, "install", "mg", chart, "-n", "locked")
	if err == nil || !strings.Contains(out, "pod-security.kubernetes.io/enforce=privileged") || !strings.Contains(out, `"restricted"`) {
		t.Errorf("helm install of the speaker into a restricted namespace: err %v, output:\n%s\nwant a refusal naming the label", err, out)
	}
	if out, err := helmIn(t, helm, env.Kubeconfig, "install", "mg", chart, "-n", "locked", "--set", "speaker.enabled=false"); err != nil {
		t.Errorf("helm install without the speaker into a restricted namespace: %v\n%s", err, out)
	}
}

// TestChartGatewayCRDFiles: the chart's copies of the Gateway API CRDs are config/'s (-update
// copies them).
func TestChartGatewayCRDFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(gatewayCRDsDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", gatewayCRDsDir, err)
	}
	if *update {
		if err := os.RemoveAll(chartGatewayCRDs); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(chartGatewayCRDs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		dst := filepath.Join(chartGatewayCRDs, filepath.Base(f))
		a, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(dst, a, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(dst)
		if err != nil || string(a) != string(b) {
			t.Errorf("%s differs from %s or is missing (%v) (run: go test ./config/ -run TestChartGatewayCRDFiles -update)", dst, f, err)
		}
	}
	inChart, _ := filepath.Glob(filepath.Join(chartGatewayCRDs, "*.yaml"))
	if len(inChart) != len(files) {
		t.Errorf("the chart has %d Gateway API CRDs, %s %d", len(inChart), gatewayCRDsDir, len(files))
	}
}

// TestChartProxyDaemonSetStrategies: with proxy.kind DaemonSet the chart refuses exactly the
// update strategies the API server refuses for a DaemonSet (a Deployment takes them all), so a
// bad value fails helm before any object is written rather than halfway through an install;
// what the chart renders, the API server accepts (server-side dry run of every object).
func TestChartProxyDaemonSetStrategies(t *testing.T) {
	t.Parallel() // its own API server
	helm := helmBinary(t)
	s := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.ensureNamespaces(ctx, t, "metalgate-system")
	base, out, err := renderChart(t, helm, "--set", "proxy.kind=DaemonSet")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var daemonSet *unstructured.Unstructured
	for _, o := range base.of("DaemonSet") {
		if o.GetLabels()["app.kubernetes.io/component"] == "proxy" {
			daemonSet = o
		}
	}
	if daemonSet == nil {
		t.Fatal("no proxy DaemonSet rendered")
	}
	for _, tc := range []struct {
		name, strategy string // proxy.updateStrategy, --set-json
		wantRefused    bool
	}{
		{name: "the default", strategy: `{}`},
		{name: "stop, then start", strategy: `{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}`},
		{name: "surge a percentage", strategy: `{"rollingUpdate":{"maxSurge":"10%"}}`},
		{name: "OnDelete", strategy: `{"type":"OnDelete","rollingUpdate":null}`},
		{name: "Kubernetes' default", strategy: `null`},
		{name: "Recreate", strategy: `{"type":"Recreate","rollingUpdate":null}`, wantRefused: true},
		{name: "surge and stop", strategy: `{"rollingUpdate":{"maxUnavailable":"25%"}}`, wantRefused: true},
		{name: "surge, maxUnavailable defaulted to 1", strategy: `{"rollingUpdate":{"maxSurge":1,"maxUnavailable":null}}`, wantRefused: true},
		{name: "neither", strategy: `{"rollingUpdate":{"maxSurge":0,"maxUnavailable":0}}`, wantRefused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := "proxy.updateStrategy=" + tc.strategy
			// The value as Helm merges it into the default: the Deployment's spec.strategy.
			dep, out, err := renderChart(t, helm, "--set-json", set)
			if err != nil {
				t.Fatalf("helm template %s (as a Deployment): %v\n%s", set, err, out)
			}
			var merged any
			for _, o := range dep.of("Deployment") {
				if o.GetLabels()["app.kubernetes.io/component"] == "proxy" {
					merged = o.Object["spec"].(map[string]any)["strategy"]
				}
			}
			ds := daemonSet.DeepCopy()
			if merged == nil {
				unstructured.RemoveNestedField(ds.Object, "spec", "updateStrategy")
			} else if err := unstructured.SetNestedField(ds.Object, merged, "spec", "updateStrategy"); err != nil {
				t.Fatal(err)
			}
			manifest, err := json.Marshal(ds.Object)
			if err != nil {
				t.Fatal(err)
			}
			apiOut, apiErr := s.run(ctx, manifest, "apply", "--dry-run=server", "-f", "-")
			if (apiErr != nil) != tc.wantRefused {
				t.Errorf("the API server, for a DaemonSet with updateStrategy %v: err %v, want refused %v\n%s", merged, apiErr, tc.wantRefused, apiOut)
			}
			_, chartOut, chartErr := renderChart(t, helm, "--set", "proxy.kind=DaemonSet", "--set-json", set)
			if (chartErr != nil) != tc.wantRefused {
				t.Fatalf("helm template proxy.kind=DaemonSet %s: err %v, want refused %v\n%.800s", set, chartErr, tc.wantRefused, chartOut)
			}
			if chartErr != nil {
				if !strings.Contains(chartOut, "proxy.updateStrategy") {
					t.Errorf("the chart's refusal does not name proxy.updateStrategy:\n%.800s", chartOut)
				}
				return
			}
			if out, err := s.run(ctx, []byte(chartOut), "apply", "--dry-run=server", "-f", "-"); err != nil {
				t.Errorf("the API server refuses what the chart rendered: %v\n%s", err, out)
			}
		})
	}
}
