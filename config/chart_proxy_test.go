package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// chartVersionLabels are the labels that follow Chart.yaml (make chart-package rewrites it): a
// golden file holds placeholders for them.
var chartVersionLabels = regexp.MustCompile(`(?m)^(\s*)(helm\.sh/chart|app\.kubernetes\.io/version): .*$`)

// TestChartProxyDeploymentGolden: with proxy.kind left to its default (Deployment) the proxy's
// objects render byte for byte as they did before the chart could run the proxy as a
// DaemonSet — with the default values and with the conventional ones (HPA, PDB, strategy).
// testdata/TestChartProxyDeploymentGolden/<case>.golden; -update rewrites them.
func TestChartProxyDeploymentGolden(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "defaults"},
		{name: "conventions", args: []string{"-f", chart + "/ci/conventions-values.yaml"}},
		{name: "kind Deployment", args: []string{"--set", "proxy.kind=Deployment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out, err := renderChart(t, helm, append([]string{"--show-only", "templates/proxy.yaml"}, tc.args...)...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", tc.args, err, out)
			}
			got := chartVersionLabels.ReplaceAllString(out, "$1$2: VERSION")
			// "kind Deployment" must equal the defaults: the same file.
			name := strings.ReplaceAll(tc.name, " ", "-")
			if tc.name == "kind Deployment" {
				name = "defaults"
			}
			golden := filepath.Join("testdata", t.Name()[:strings.IndexByte(t.Name(), '/')], name+".golden")
			if *update && tc.name != "kind Deployment" {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run: go test ./config/ -run TestChartProxyDeploymentGolden -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("proxy objects differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestChartProxyDaemonSet: proxy.kind DaemonSet renders the proxy as a DaemonSet and no
// Deployment: without replicas or a Deployment's strategy, with the updateStrategy asked for
// (by default a node's new proxy is ready before its old one stops: maxSurge 1, maxUnavailable
// 0), no HPA, and the pod the Deployment would have with the same values (so nodeSelector,
// tolerations and affinity choose the nodes).
func TestChartProxyDaemonSet(t *testing.T) {
	helm := helmBinary(t)
	surgeFirst := &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}
	for _, tc := range []struct {
		name string
		set  []string // --set-json, besides proxy.kind
		// wantStrategy is spec.updateStrategy as rendered (nil: none, Kubernetes' default).
		wantStrategy *appsv1.DaemonSetUpdateStrategy
		wantPDB      *policyv1.PodDisruptionBudgetSpec
		// wantNodes: the DaemonSet pod's nodeSelector and tolerations (the nodes it runs on).
		wantNodes *nodes
	}{
		{name: "defaults", wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: surgeFirst}},
		{name: "replicas is not the DaemonSet's", set: []string{"proxy.replicas=3"},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: surgeFirst}},
		{name: "stop, then start", set: []string{`proxy.updateStrategy={"rollingUpdate":{"maxSurge":0,"maxUnavailable":"10%"}}`},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%")), MaxSurge: ptr.To(intstr.FromInt32(0))}}},
		{name: "two nodes at a time", set: []string{`proxy.updateStrategy={"rollingUpdate":{"maxSurge":2}}`},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(2))}}},
		{name: "OnDelete", set: []string{`proxy.updateStrategy={"type":"OnDelete","rollingUpdate":null}`},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}},
		{name: "Kubernetes' default", set: []string{`proxy.updateStrategy=null`}},
		{name: "nodes chosen", set: []string{`proxy.nodeSelector={"edge":"true"}`, `proxy.tolerations=[{"key":"edge","operator":"Exists","effect":"NoSchedule"}]`,
			`proxy.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"rack","operator":"In","values":["a"]}]}]}}}`},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: surgeFirst},
			wantNodes: &nodes{NodeSelector: map[string]string{"edge": "true"}, Tolerations: []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}}},
		{name: "PodDisruptionBudget minAvailable", set: []string{`proxy.podDisruptionBudget={"enabled":true,"minAvailable":2}`},
			wantStrategy: &appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: surgeFirst},
			wantPDB: &policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/instance": "metalgate", "app.kubernetes.io/component": "proxy"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set-json", s)
			}
			ds, out, err := renderChart(t, helm, append(args, "--set-json", `proxy.kind="DaemonSet"`)...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", args, err, out)
			}
			dep, out, err := renderChart(t, helm, args...)
			if err != nil {
				t.Fatalf("helm template %v (as a Deployment): %v\n%s", args, err, out)
			}
			var proxies []*unstructured.Unstructured
			for _, o := range ds.objs {
				if (o.GetKind() == "Deployment" || o.GetKind() == "DaemonSet") && o.GetLabels()["app.kubernetes.io/component"] == "proxy" {
					proxies = append(proxies, o)
				}
			}
			if len(proxies) != 1 || proxies[0].GetKind() != "DaemonSet" || proxies[0].GetName() != "metalgate-proxy" {
				t.Fatalf("proxy workloads %v, want the one DaemonSet metalgate-proxy", kindsAndNames(proxies))
			}
			// A typed decode drops fields a DaemonSet has not: look at what was rendered.
			for _, field := range []string{"replicas", "strategy"} {
				if v, found, _ := unstructured.NestedFieldNoCopy(proxies[0].Object, "spec", field); found {
					t.Errorf("the DaemonSet has spec.%s %v (a Deployment's field)", field, v)
				}
			}
			var d appsv1.DaemonSet
			fromUnstructured(t, proxies[0], &d)
			var gotStrategy *appsv1.DaemonSetUpdateStrategy
			if _, found, _ := unstructured.NestedFieldNoCopy(proxies[0].Object, "spec", "updateStrategy"); found {
				gotStrategy = &d.Spec.UpdateStrategy
			}
			if diff := cmp.Diff(tc.wantStrategy, gotStrategy); diff != "" {
				t.Errorf("updateStrategy (-want +got):\n%s", diff)
			}
			if hpas := ds.of("HorizontalPodAutoscaler"); len(hpas) != 0 {
				t.Errorf("%d HorizontalPodAutoscalers, want none for a DaemonSet", len(hpas))
			}
			_, wantPod := dep.workload("proxy")
			if diff := cmp.Diff(wantPod, d.Spec.Template); diff != "" {
				t.Errorf("the DaemonSet's pod differs from the Deployment's with the same values (-Deployment +DaemonSet):\n%s", diff)
			}
			wantSel := map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/instance": "metalgate", "app.kubernetes.io/component": "proxy"}
			if diff := cmp.Diff(&metav1.LabelSelector{MatchLabels: wantSel}, d.Spec.Selector); diff != "" {
				t.Errorf("the DaemonSet's selector (-want +got):\n%s", diff)
			}
			for k, v := range wantSel {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("the DaemonSet's pods lack its selector's %s=%s: %v", k, v, d.Spec.Template.Labels)
				}
			}
			if tc.wantNodes == nil {
				tc.wantNodes = &nodes{}
			}
			p := d.Spec.Template.Spec
			if diff := cmp.Diff(tc.wantNodes, &nodes{p.NodeSelector, p.Tolerations, p.Affinity}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the DaemonSet's nodes (-want +got):\n%s", diff)
			}
			var gotPDB *policyv1.PodDisruptionBudgetSpec
			for _, o := range ds.of("PodDisruptionBudget") {
				var p policyv1.PodDisruptionBudget
				fromUnstructured(t, o, &p)
				if p.Name == "metalgate-proxy" {
					gotPDB = &p.Spec
				}
			}
			if diff := cmp.Diff(tc.wantPDB, gotPDB); diff != "" {
				t.Errorf("proxy PodDisruptionBudget (-want +got):\n%s", diff)
			}
		})
	}
}

// nodes are what chooses the nodes of a DaemonSet's pods.
type nodes struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Affinity     *corev1.Affinity
}

func kindsAndNames(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetName())
	}
	return out
}
