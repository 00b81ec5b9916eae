package config_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// components are the chart's workloads, each a Deployment or DaemonSet labelled
// app.kubernetes.io/component.
var components = []string{"controller", "speaker", "proxy"}

// rendered is one helm template of the chart.
type rendered struct {
	t    *testing.T
	objs []*unstructured.Unstructured
}

func renderChart(t *testing.T, helm string, args ...string) (rendered, string, error) {
	t.Helper()
	out, err := runHelm(t, helm, append([]string{"template", "metalgate", chart, "--namespace", "metalgate-system"}, args...)...)
	if err != nil {
		return rendered{}, out, err
	}
	return rendered{t: t, objs: decodeAll(t, "helm template", []byte(out))}, out, nil
}

// checkDebugReader: the release has the debug reader (ServiceAccount, ClusterRole with the
// rules of want, a binding of the one to the other) when want is not nil, else none of it.
func (r rendered) checkDebugReader(t *testing.T, want []*rbacv1.ClusterRole) {
	t.Helper()
	var got []string
	for _, o := range r.objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "debug-reader" {
			got = append(got, o.GetKind()+" "+o.GetName())
		}
	}
	if want == nil {
		if len(got) != 0 {
			t.Errorf("debug reader objects %v, want none", got)
		}
		return
	}
	if diff := cmp.Diff([]string{"ServiceAccount metalgate-debug-reader", "ClusterRole metalgate-debug-reader", "ClusterRoleBinding metalgate-debug-reader"}, got); diff != "" {
		t.Errorf("debug reader objects (-want +got):\n%s", diff)
	}
	for _, o := range r.of("ClusterRole") {
		if o.GetName() == "metalgate-debug-reader" {
			var cr rbacv1.ClusterRole
			fromUnstructured(t, o, &cr)
			if len(want) != 1 {
				t.Fatalf("config/: %d debug reader ClusterRoles, want 1", len(want))
			}
			if diff := cmp.Diff(want[0].Rules, cr.Rules); diff != "" {
				t.Errorf("debug reader rules differ from config/'s (-config +chart):\n%s", diff)
			}
		}
	}
	for _, o := range r.of("ClusterRoleBinding") {
		if o.GetName() == "metalgate-debug-reader" {
			var b rbacv1.ClusterRoleBinding
			fromUnstructured(t, o, &b)
			wantSubj := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "metalgate-debug-reader", Namespace: "metalgate-system"}}
			if b.RoleRef.Name != "metalgate-debug-reader" || !cmp.Equal(wantSubj, b.Subjects) {
				t.Errorf("debug reader binding binds %v to %s, want %v to metalgate-debug-reader", b.Subjects, b.RoleRef.Name, wantSubj)
			}
		}
	}
}

// of is every object of kind.
func (r rendered) of(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// workload is the Deployment or DaemonSet of component, as a name and its pod template.
func (r rendered) workload(component string) (string, corev1.PodTemplateSpec) {
	r.t.Helper()
	for _, o := range r.objs {
		if o.GetLabels()["app.kubernetes.io/component"] != component {
			continue
		}
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			fromUnstructured(r.t, o, &d)
			return d.Name, d.Spec.Template
		case "DaemonSet":
			var d appsv1.DaemonSet
			fromUnstructured(r.t, o, &d)
			return d.Name, d.Spec.Template
		}
	}
	r.t.Fatalf("no Deployment or DaemonSet of component %s", component)
	return "", corev1.PodTemplateSpec{}
}

func (r rendered) container(component string) corev1.Container {
	_, p := r.workload(component)
	return p.Spec.Containers[0]
}

// serviceAccounts are the names of the ServiceAccounts rendered.
func (r rendered) serviceAccounts() []string {
	var out []string
	for _, o := range r.of("ServiceAccount") {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

// subjects are the ServiceAccounts the bindings of component's roles name.
func (r rendered) subjects(component string) []string {
	var out []string
	for _, o := range append(r.of("ClusterRoleBinding"), r.of("RoleBinding")...) {
		if o.GetLabels()["app.kubernetes.io/component"] != component {
			continue
		}
		var b rbacv1.RoleBinding
		fromUnstructured(r.t, o, &b)
		for _, s := range b.Subjects {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func argsWith(c corev1.Container, prefix string) []string {
	var out []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// TestChartValuesRefused: values.schema.json refuses a misspelt key and a wrong type at any
// depth, and helm's error names the field; the chart renders nothing then.
func TestChartValuesRefused(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name     string
		values   string // a values file
		set      []string
		wantErrs []string // all in helm's output
	}{
		{name: "typo at the top", values: "controler:\n  replicas: 2\n", wantErrs: []string{"controler"}},
		{name: "typo in a component", values: "controller:\n  replica: 2\n", wantErrs: []string{"replica", "/controller"}},
		{name: "typo in a ServiceAccount", set: []string{`speaker.serviceAccount.nmae="x"`}, wantErrs: []string{"nmae", "/speaker/serviceAccount"}},
		{name: "typo in the PDB", set: []string{"proxy.podDisruptionBudget.minAvailible=1"}, wantErrs: []string{"minAvailible", "/proxy/podDisruptionBudget"}},
		{name: "replicas a string", values: "controller:\n  replicas: \"two\"\n", wantErrs: []string{"/controller/replicas", "integer"}},
		{name: "enabled a string", set: []string{`proxy.enabled="yes"`}, wantErrs: []string{"/proxy/enabled", "boolean"}},
		{name: "a port out of range", set: []string{"speaker.metricsPort=70000"}, wantErrs: []string{"/speaker/metricsPort"}},
		{name: "externalTrafficPolicy", set: []string{`proxy.service.externalTrafficPolicy="local"`}, wantErrs: []string{"/proxy/service/externalTrafficPolicy"}},
		{name: "pullPolicy", set: []string{`image.pullPolicy="Sometimes"`}, wantErrs: []string{"/image/pullPolicy"}},
		{name: "log level", set: []string{`logLevel="verbose"`}, wantErrs: []string{"/logLevel"}},
		{name: "a pool without spec", set: []string{`pools=[{"name":"default"}]`}, wantErrs: []string{"/pools/0", "spec"}},
		{name: "podLabels a list", set: []string{`controller.podLabels=["a"]`}, wantErrs: []string{"/controller/podLabels"}},
		{name: "a negative shutdown delay", set: []string{"proxy.shutdownDelaySeconds=-1"}, wantErrs: []string{"/proxy/shutdownDelaySeconds"}},
		{name: "a shutdown timeout as a duration", set: []string{`proxy.shutdownTimeoutSeconds="30s"`}, wantErrs: []string{"/proxy/shutdownTimeoutSeconds", "integer"}},
		{name: "autoscaling typo", set: []string{"proxy.autoscaling.maxReplica=3"}, wantErrs: []string{"maxReplica", "/proxy/autoscaling"}},
		{name: "autoscaling min above max", set: []string{"proxy.autoscaling.enabled=true", "proxy.autoscaling.minReplicas=5", "proxy.autoscaling.maxReplicas=3"}, wantErrs: []string{"proxy.autoscaling", "minReplicas 5 is above maxReplicas 3"}},
		{name: "autoscaling without a metric", set: []string{"proxy.autoscaling.enabled=true", "proxy.autoscaling.targetCPUUtilizationPercentage=null"}, wantErrs: []string{"proxy.autoscaling", "needs a metric"}},
		{name: "autoscaling zero replicas", set: []string{"proxy.autoscaling.minReplicas=0"}, wantErrs: []string{"/proxy/autoscaling/minReplicas"}},
		// proxy.kind DaemonSet: what a DaemonSet cannot take.
		{name: "kind misspelt", set: []string{`proxy.kind="Daemonset"`}, wantErrs: []string{"/proxy/kind", "DaemonSet"}},
		{name: "DaemonSet with autoscaling", set: []string{`proxy.kind="DaemonSet"`, "proxy.autoscaling.enabled=true"}, wantErrs: []string{"proxy.kind DaemonSet", "proxy.autoscaling.enabled=false"}},
		{name: "DaemonSet with Recreate", set: []string{`proxy.kind="DaemonSet"`, `proxy.updateStrategy={"type":"Recreate","rollingUpdate":null}`}, wantErrs: []string{`proxy.updateStrategy.type "Recreate"`, "RollingUpdate or OnDelete"}},
		{name: "DaemonSet surging and stopping", set: []string{`proxy.kind="DaemonSet"`, `proxy.updateStrategy={"rollingUpdate":{"maxUnavailable":1}}`}, wantErrs: []string{"proxy.updateStrategy.rollingUpdate", "one of maxSurge (1) and maxUnavailable (1)"}},
		{name: "DaemonSet surging, maxUnavailable defaulted", set: []string{`proxy.kind="DaemonSet"`, `proxy.updateStrategy={"rollingUpdate":{"maxSurge":"20%","maxUnavailable":null}}`}, wantErrs: []string{"proxy.updateStrategy.rollingUpdate", "maxUnavailable defaults to 1"}},
		{name: "DaemonSet neither surging nor stopping", set: []string{`proxy.kind="DaemonSet"`, `proxy.updateStrategy={"rollingUpdate":{"maxSurge":0,"maxUnavailable":"0%"}}`}, wantErrs: []string{"proxy.updateStrategy.rollingUpdate", "cannot both be 0"}},
		{name: "DaemonSet with the default budget", set: []string{`proxy.kind="DaemonSet"`, `proxy.podDisruptionBudget={"enabled":true}`}, wantErrs: []string{"proxy.podDisruptionBudget", "minAvailable to a number"}},
		{name: "DaemonSet with a percentage budget", set: []string{`proxy.kind="DaemonSet"`, `proxy.podDisruptionBudget={"enabled":true,"minAvailable":"50%"}`}, wantErrs: []string{"proxy.podDisruptionBudget", "minAvailable to a number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.values != "" {
				f := t.TempDir() + "/values.yaml"
				writeFile(t, f, tc.values)
				args = append(args, "-f", f)
			}
			for _, s := range tc.set {
				args = append(args, "--set-json", s)
			}
			_, out, err := renderChart(t, helm, args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want it refused", args)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(out, want) {
					t.Errorf("helm's error does not name %q:\n%.1500s", want, out)
				}
			}
		})
	}
}

// TestChartValues: with the defaults the chart renders what it always did (no PDB, no log
// level, the ServiceAccounts <fullname>-<component>), and each conventional value lands where
// it should and nowhere else.
func TestChartValues(t *testing.T) {
	helm := helmBinary(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name  string
		set   []string // --set-json
		check func(t *testing.T, r rendered)
	}{
		{name: "defaults", check: func(t *testing.T, r rendered) {
			if pdbs := r.of("PodDisruptionBudget"); len(pdbs) != 0 {
				t.Errorf("%d PodDisruptionBudgets, want none by default", len(pdbs))
			}
			wantSAs := []string{"metalgate-controller", "metalgate-debug-reader", "metalgate-gateway-proxy", "metalgate-proxy", "metalgate-speaker"}
			if diff := cmp.Diff(wantSAs, r.serviceAccounts()); diff != "" {
				t.Errorf("ServiceAccounts (-want +got):\n%s", diff)
			}
			// The debug reader kubectl metalgate reads the speakers as: config/'s rules, bound
			// to its ServiceAccount only.
			r.checkDebugReader(t, objects[rbacv1.ClusterRole](t, "ClusterRole", "rbac/debug-reader/debug_reader.yaml"))
			for _, c := range components {
				ctr := r.container(c)
				if got := argsWith(ctr, "--zap-log-level"); len(got) != 0 {
					t.Errorf("%s: %v, want no log level by default", c, got)
				}
				if got := argsWith(ctr, "--gateway-proxy-service-account"); len(got) != 0 {
					t.Errorf("%s: %v, want the controller to derive the Gateway proxies' ServiceAccount", c, got)
				}
				if ctr.Image != "ghcr.io/metalgate/metalgate:dev" {
					t.Errorf("%s: image %q, want ghcr.io/metalgate/metalgate:dev (the chart's appVersion)", c, ctr.Image)
				}
				if want := "metalgate-" + c; !slices.Contains(r.subjects(c), want) {
					t.Errorf("%s: its roles are bound to %v, want %s", c, r.subjects(c), want)
				}
			}
		}},
		{name: "proxy rollout and drain", check: func(t *testing.T, r rendered) {
			checkProxyRollout(t, r, &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}, "5s", "30s", 45)
		}},
		{name: "proxy drain times", set: []string{"proxy.shutdownDelaySeconds=12", "proxy.shutdownTimeoutSeconds=60", `proxy.updateStrategy={"rollingUpdate":{"maxSurge":2}}`}, check: func(t *testing.T, r rendered) {
			checkProxyRollout(t, r, &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(2))}, "12s", "60s", 82)
		}},
		{name: "image digest", set: []string{`image.digest="` + digest + `"`, `image.tag="v9.9.9"`}, check: func(t *testing.T, r rendered) {
			for _, c := range components {
				if got := r.container(c).Image; got != "ghcr.io/metalgate/metalgate@"+digest {
					t.Errorf("%s: image %q, want the digest (it takes precedence over the tag)", c, got)
				}
			}
		}},
		{name: "image registry, repository, tag", set: []string{`image.registry="registry.example:5000"`, `image.repository="mirror/mg"`, `image.tag="v1.2.3"`}, check: func(t *testing.T, r rendered) {
			for _, c := range components {
				if got := r.container(c).Image; got != "registry.example:5000/mirror/mg:v1.2.3" {
					t.Errorf("%s: image %q", c, got)
				}
			}
		}},
		{name: "image without registry", set: []string{`image.registry=""`, `image.repository="mg"`}, check: func(t *testing.T, r rendered) {
			if got := r.container("controller").Image; got != "mg:dev" {
				t.Errorf("image %q, want mg:dev", got)
			}
		}},
		{name: "nameOverride", set: []string{`nameOverride="lb"`}, check: func(t *testing.T, r rendered) {
			if name, _ := r.workload("controller"); name != "metalgate-lb-controller" {
				t.Errorf("controller Deployment %q, want metalgate-lb-controller", name)
			}
			if got := r.of("DaemonSet")[0].GetLabels()["app.kubernetes.io/name"]; got != "metalgate" {
				t.Errorf("app.kubernetes.io/name %q, want metalgate (kubectl metalgate selects by it)", got)
			}
		}},
		{name: "fullnameOverride", set: []string{`fullnameOverride="lb"`}, check: func(t *testing.T, r rendered) {
			if name, _ := r.workload("speaker"); name != "lb-speaker" {
				t.Errorf("speaker DaemonSet %q, want lb-speaker", name)
			}
		}},
		{name: "commonLabels", set: []string{`commonLabels={"team":"net"}`, `pools=[{"name":"default","spec":{"addresses":["192.0.2.0/24"]},"l2Advertisement":{}}]`}, check: func(t *testing.T, r rendered) {
			for _, o := range r.objs {
				if o.GetLabels()["team"] != "net" {
					t.Errorf("%s %s lacks the common label", o.GetKind(), o.GetName())
				}
			}
			for _, c := range components {
				if _, p := r.workload(c); p.Labels["team"] != "net" {
					t.Errorf("%s: pod labels %v lack the common label", c, p.Labels)
				}
			}
			for _, o := range r.of("Deployment") {
				var d appsv1.Deployment
				fromUnstructured(t, o, &d)
				if _, in := d.Spec.Selector.MatchLabels["team"]; in {
					t.Errorf("%s: a common label in the selector (immutable: it would block upgrades)", d.Name)
				}
			}
		}},
		{name: "logLevel", set: []string{`logLevel="debug"`, `proxy.logLevel=2`}, check: func(t *testing.T, r rendered) {
			for c, want := range map[string]string{"controller": "--zap-log-level=debug", "speaker": "--zap-log-level=debug", "proxy": "--zap-log-level=2"} {
				if got := argsWith(r.container(c), "--zap-log-level"); !slices.Equal(got, []string{want}) {
					t.Errorf("%s: %v, want [%s]", c, got, want)
				}
			}
		}},
		{name: "PodDisruptionBudgets", set: []string{`controller.podDisruptionBudget={"enabled":true}`, `proxy.podDisruptionBudget={"enabled":true,"minAvailable":"50%"}`}, check: func(t *testing.T, r rendered) {
			got := map[string]policyv1.PodDisruptionBudgetSpec{}
			for _, o := range r.of("PodDisruptionBudget") {
				var p policyv1.PodDisruptionBudget
				fromUnstructured(t, o, &p)
				got[p.Name] = p.Spec
			}
			sel := func(c string) map[string]string {
				return map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/instance": "metalgate", "app.kubernetes.io/component": c}
			}
			want := map[string]policyv1.PodDisruptionBudgetSpec{
				"metalgate-controller": {MaxUnavailable: ptr.To(intstr.FromInt32(1))},
				"metalgate-proxy":      {MinAvailable: ptr.To(intstr.FromString("50%"))},
			}
			for name, spec := range want {
				spec.Selector = nil
				if g, ok := got[name]; ok {
					if diff := cmp.Diff(sel(strings.TrimPrefix(name, "metalgate-")), g.Selector.MatchLabels); diff != "" {
						t.Errorf("%s selects other pods (-want +got):\n%s", name, diff)
					}
					g.Selector = nil
					got[name] = g
				}
				want[name] = spec
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PodDisruptionBudgets (-want +got):\n%s", diff)
			}
		}},
		{name: "no HorizontalPodAutoscaler by default", check: func(t *testing.T, r rendered) {
			if hpas := r.of("HorizontalPodAutoscaler"); len(hpas) != 0 {
				t.Errorf("%d HorizontalPodAutoscalers, want none by default", len(hpas))
			}
			if got := proxyReplicas(t, r); got == nil || *got != 1 {
				t.Errorf("proxy Deployment replicas %v, want 1 (proxy.replicas)", got)
			}
		}},
		{name: "proxy HorizontalPodAutoscaler", set: []string{`proxy.autoscaling={"enabled":true,"minReplicas":3,"maxReplicas":7,"targetMemoryUtilizationPercentage":80,"behavior":{"scaleDown":{"stabilizationWindowSeconds":300}}}`}, check: func(t *testing.T, r rendered) {
			hpas := r.of("HorizontalPodAutoscaler")
			if len(hpas) != 1 {
				t.Fatalf("%d HorizontalPodAutoscalers, want 1", len(hpas))
			}
			var h autoscalingv2.HorizontalPodAutoscaler
			fromUnstructured(t, hpas[0], &h)
			want := autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "metalgate-proxy"},
				MinReplicas:    ptr.To[int32](3),
				MaxReplicas:    7,
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}}},
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}},
				},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](300)}},
			}
			if diff := cmp.Diff(want, h.Spec); diff != "" {
				t.Errorf("HorizontalPodAutoscaler spec (-want +got):\n%s", diff)
			}
			if name, _ := r.workload("proxy"); name != h.Spec.ScaleTargetRef.Name {
				t.Errorf("the HPA scales %q, the proxy Deployment is %q", h.Spec.ScaleTargetRef.Name, name)
			}
			// replicas in the Deployment would fight the HPA at every helm upgrade.
			if got := proxyReplicas(t, r); got != nil {
				t.Errorf("proxy Deployment replicas %d, want it unset (the HPA's)", *got)
			}
		}},
		{name: "no debug reader", set: []string{`debugReader.create=false`}, check: func(t *testing.T, r rendered) {
			r.checkDebugReader(t, nil)
		}},
		{name: "no speaker, no debug reader", set: []string{`speaker.enabled=false`}, check: func(t *testing.T, r rendered) {
			r.checkDebugReader(t, nil)
		}},
		{name: "ServiceAccounts of your own", set: []string{`controller.serviceAccount={"create":false,"name":"lb-controller"}`, `speaker.serviceAccount={"annotations":{"a":"b"}}`, `proxy.serviceAccount={"name":"edge"}`, `gatewayProxy.serviceAccount={"create":false,"name":"gw"}`}, check: func(t *testing.T, r rendered) {
			if diff := cmp.Diff([]string{"edge", "metalgate-debug-reader", "metalgate-speaker"}, r.serviceAccounts()); diff != "" {
				t.Errorf("ServiceAccounts created (-want +got):\n%s", diff)
			}
			for c, want := range map[string]string{"controller": "lb-controller", "speaker": "metalgate-speaker", "proxy": "edge", "gateway-proxy": "gw"} {
				if c != "gateway-proxy" {
					if _, p := r.workload(c); p.Spec.ServiceAccountName != want {
						t.Errorf("%s runs as %q, want %q", c, p.Spec.ServiceAccountName, want)
					}
				}
				if got := r.subjects(c); !slices.Equal(got, []string{want}) {
					t.Errorf("%s: roles bound to %v, want [%s]", c, got, want)
				}
			}
			if got := argsWith(r.container("controller"), "--gateway-proxy-service-account"); !slices.Equal(got, []string{"--gateway-proxy-service-account=gw"}) {
				t.Errorf("controller args %v, want it told the Gateway proxies' ServiceAccount gw", got)
			}
			for _, o := range r.of("ServiceAccount") {
				if want := map[string]string{"a": "b"}; o.GetName() == "metalgate-speaker" && !cmp.Equal(o.GetAnnotations(), want) {
					t.Errorf("speaker ServiceAccount annotations %v, want %v", o.GetAnnotations(), want)
				}
			}
		}},
		{name: "controller renamed, Gateway proxies named after it", set: []string{`controller.serviceAccount={"name":"lb-controller"}`}, check: func(t *testing.T, r rendered) {
			// The controller would look for lb-gateway-proxy; the chart made metalgate-gateway-proxy.
			if got := argsWith(r.container("controller"), "--gateway-proxy-service-account"); !slices.Equal(got, []string{"--gateway-proxy-service-account=metalgate-gateway-proxy"}) {
				t.Errorf("controller args %v", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set-json", s)
			}
			r, out, err := renderChart(t, helm, args...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", args, err, out)
			}
			tc.check(t, r)
		})
	}
}

// proxyReplicas is the proxy Deployment's spec.replicas as rendered (nil when absent).
func proxyReplicas(t *testing.T, r rendered) *int32 {
	t.Helper()
	for _, o := range r.of("Deployment") {
		if o.GetLabels()["app.kubernetes.io/component"] != "proxy" {
			continue
		}
		var d appsv1.Deployment
		fromUnstructured(t, o, &d)
		return d.Spec.Replicas
	}
	t.Fatal("no proxy Deployment rendered")
	return nil
}

// TestChartPodValues: each per-component pod value lands in that component's pod and no other.
func TestChartPodValues(t *testing.T) {
	helm := helmBinary(t)
	type pod struct {
		Labels, Annotations map[string]string
		PriorityClass       string
		NodeSelector        map[string]string
		Tolerations         []corev1.Toleration
		Affinity            *corev1.Affinity
		Resources           corev1.ResourceRequirements
		PodSecurity         *corev1.PodSecurityContext
		Security            *corev1.SecurityContext
		Env                 []corev1.EnvVar
		Volumes             []corev1.Volume
		Mounts              []corev1.VolumeMount
	}
	of := func(p corev1.PodTemplateSpec) pod {
		c := p.Spec.Containers[0]
		return pod{p.Labels, p.Annotations, p.Spec.PriorityClassName, p.Spec.NodeSelector, p.Spec.Tolerations, p.Spec.Affinity,
			c.Resources, p.Spec.SecurityContext, c.SecurityContext, c.Env, p.Spec.Volumes, c.VolumeMounts}
	}
	base, out, err := renderChart(t, helm)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, c := range components {
		t.Run(c, func(t *testing.T) {
			affinity := `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"lb","operator":"Exists"}]}]}}}`
			set := []string{
				c + `.podLabels={"tier":"edge"}`,
				c + `.podAnnotations={"note":"x"}`,
				c + `.priorityClassName="system-node-critical"`,
				c + `.nodeSelector={"lb":"yes"}`,
				c + `.tolerations=[{"key":"lb","operator":"Exists","effect":"NoSchedule"}]`,
				c + `.affinity=` + affinity,
				c + `.resources={"requests":{"cpu":"1"}}`,
				c + `.podSecurityContext={"fsGroup":2000}`,
				c + `.securityContext={"readOnlyRootFilesystem":false}`,
				c + `.extraEnv=[{"name":"GODEBUG","value":"http2debug=1"}]`,
				c + `.extraVolumes=[{"name":"extra","emptyDir":{}}]`,
				c + `.extraVolumeMounts=[{"name":"extra","mountPath":"/extra"}]`,
			}
			var args []string
			for _, s := range set {
				args = append(args, "--set-json", s)
			}
			r, out, err := renderChart(t, helm, args...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", args, err, out)
			}
			_, before := base.workload(c)
			want := of(before)
			want.Labels = merged(want.Labels, map[string]string{"tier": "edge"})
			want.Annotations = merged(want.Annotations, map[string]string{"note": "x"})
			want.PriorityClass = "system-node-critical"
			// nodeSelector and resources are merged with the defaults by helm (maps).
			want.NodeSelector = merged(want.NodeSelector, map[string]string{"lb": "yes"})
			want.Tolerations = []corev1.Toleration{{Key: "lb", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			want.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "lb", Operator: corev1.NodeSelectorOpExists}}}}}}}
			want.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, "1"), corev1.ResourceMemory: want.Resources.Requests[corev1.ResourceMemory]}
			// The security contexts merge too: one field changed, the others kept.
			want.PodSecurity = want.PodSecurity.DeepCopy()
			want.PodSecurity.FSGroup = ptr.To[int64](2000)
			want.Security = want.Security.DeepCopy()
			want.Security.ReadOnlyRootFilesystem = ptr.To(false)
			want.Env = append(want.Env, corev1.EnvVar{Name: "GODEBUG", Value: "http2debug=1"})
			want.Volumes = append(want.Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			want.Mounts = append(want.Mounts, corev1.VolumeMount{Name: "extra", MountPath: "/extra"})
			_, after := r.workload(c)
			if diff := cmp.Diff(want, of(after), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s pod (-want +got):\n%s", c, diff)
			}
			for _, other := range components {
				if other == c {
					continue
				}
				_, b := base.workload(other)
				_, a := r.workload(other)
				if diff := cmp.Diff(of(b), of(a), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s's values changed the %s pod (-before +after):\n%s", c, other, diff)
				}
			}
		})
	}
	t.Run("updateStrategy", func(t *testing.T) {
		r, out, err := renderChart(t, helm, "--set-json", `controller.updateStrategy={"type":"Recreate"}`,
			"--set-json", `speaker.updateStrategy={"type":"OnDelete","rollingUpdate":null}`, "--set-json", `proxy.updateStrategy={"rollingUpdate":{"maxSurge":2}}`)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		got := map[string]string{}
		for _, o := range r.objs {
			switch o.GetKind() {
			case "Deployment":
				var d appsv1.Deployment
				fromUnstructured(t, o, &d)
				got[d.Name] = fmt.Sprintf("%s %v", d.Spec.Strategy.Type, d.Spec.Strategy.RollingUpdate != nil && d.Spec.Strategy.RollingUpdate.MaxSurge != nil)
			case "DaemonSet":
				var d appsv1.DaemonSet
				fromUnstructured(t, o, &d)
				got[d.Name] = fmt.Sprintf("%s %v", d.Spec.UpdateStrategy.Type, d.Spec.UpdateStrategy.RollingUpdate != nil)
			}
		}
		want := map[string]string{"metalgate-controller": "Recreate false", "metalgate-speaker": "OnDelete false", "metalgate-proxy": "RollingUpdate true"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("strategies (-want +got):\n%s", diff)
		}
	})
}

// TestChartPoolsKept: every IPAddressPool the chart makes carries helm.sh/resource-policy: keep,
// so neither helm upgrade (a pool dropped from pools) nor helm uninstall deletes it, and the
// addresses it assigned stay where they are.
func TestChartPoolsKept(t *testing.T) {
	helm := helmBinary(t)
	r, out, err := renderChart(t, helm, "-f", chart+"/ci/pools-values.yaml")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	pools := r.of("IPAddressPool")
	if len(pools) != 2 {
		t.Fatalf("%d IPAddressPools, want the 2 of ci/pools-values.yaml", len(pools))
	}
	for _, p := range pools {
		if got := p.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
			t.Errorf("IPAddressPool %s: helm.sh/resource-policy %q, want keep", p.GetName(), got)
		}
	}
}

func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkProxyRollout: the proxy Deployment rolls out with rolling (maxUnavailable, maxSurge),
// the proxy drains for delay and then gives requests timeout (its flags), and the pod's grace
// period (graceSeconds) outlasts both.
func checkProxyRollout(t *testing.T, r rendered, rolling *appsv1.RollingUpdateDeployment, delay, timeout string, graceSeconds int64) {
	t.Helper()
	var d appsv1.Deployment
	for _, o := range r.of("Deployment") {
		if o.GetLabels()["app.kubernetes.io/component"] == "proxy" {
			fromUnstructured(t, o, &d)
		}
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("proxy strategy %q, want RollingUpdate", d.Spec.Strategy.Type)
	}
	if diff := cmp.Diff(rolling, d.Spec.Strategy.RollingUpdate); diff != "" {
		t.Errorf("proxy rollingUpdate (-want +got):\n%s", diff)
	}
	c := r.container("proxy")
	if diff := cmp.Diff([]string{"--shutdown-delay=" + delay, "--shutdown-timeout=" + timeout},
		append(argsWith(c, "--shutdown-delay"), argsWith(c, "--shutdown-timeout")...)); diff != "" {
		t.Errorf("proxy drain flags (-want +got):\n%s", diff)
	}
	g := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil || *g != graceSeconds {
		t.Errorf("proxy terminationGracePeriodSeconds %v, want %d", g, graceSeconds)
	}
}
