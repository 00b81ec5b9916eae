package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The Grafana dashboards (config/grafana) and the chart's monitoring objects (PodMonitor,
// PrometheusRule, dashboard ConfigMaps), kept true to the metrics the code registers, to
// promtool and to each other.

const (
	dashboardsDir      = "grafana"
	chartDashboardsDir = chart + "/files/dashboards"
	chartRulesFile     = chart + "/files/metalgate-rules.yaml"
)

// dashboard is the part of a Grafana dashboard's JSON the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashboardsDir, err)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

// grafanaVariable is a dashboard variable or Grafana's built-in interval in a query.
var grafanaVariable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// promQL is a panel's query as Prometheus sees it: Grafana's interval variables become 5m, a
// dashboard variable (a multi-value regular expression) becomes ".*".
func promQL(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__rate_interval") || strings.Contains(v, "__interval") || strings.Contains(v, "__range") {
			return "5m"
		}
		return ".*"
	})
}

// TestDashboards: every dashboard has a unique uid and a title, every panel a query; every
// query reads only metrics the code registers and only the dashboard's own variables, and
// promtool parses it; docs/observability.md names each dashboard file.
func TestDashboards(t *testing.T) {
	code := registeredMetrics(t)
	doc, err := os.ReadFile(observabilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	n := 0
	for file, d := range readDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q, title %q: want both", file, d.UID, d.Title)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share the uid %q", file, other, d.UID)
		}
		uids[d.UID] = file
		if !strings.Contains(string(doc), filepath.Base(file)) {
			t.Errorf("%s does not name the dashboard %s", observabilityDoc, filepath.Base(file))
		}
		vars := map[string]bool{"datasource": true}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		if len(d.Panels) == 0 {
			t.Errorf("%s has no panels", file)
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, q := range p.Targets {
				if q.Expr == "" {
					t.Errorf("%s: panel %q query %s is empty", file, p.Title, q.RefID)
					continue
				}
				ms := metricName.FindAllString(q.Expr, -1)
				if len(ms) == 0 {
					t.Errorf("%s: panel %q query %s reads no metalgate metric: %s", file, p.Title, q.RefID, q.Expr)
				}
				for _, m := range ms {
					if !code[baseMetric(m, code)] {
						t.Errorf("%s: panel %q reads %s, which no code registers", file, p.Title, m)
					}
				}
				for _, v := range grafanaVariable.FindAllStringSubmatch(q.Expr, -1) {
					if !strings.HasPrefix(v[1], "__") && !vars[v[1]] {
						t.Errorf("%s: panel %q uses $%s, which the dashboard does not define", file, p.Title, v[1])
					}
				}
				n++
				b, err := json.Marshal(promQL(q.Expr))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", n, b)
			}
		}
	}
	bin := promtool(t)
	f := filepath.Join(t.TempDir(), "dashboards.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool does not parse every dashboard query: %v\n%s", err, out)
	}
}

// TestChartMonitoringFiles: the chart ships the same dashboards and rules as config/ (helm
// cannot read files outside the chart); -update copies them.
func TestChartMonitoringFiles(t *testing.T) {
	pairs := map[string]string{rulesFile: chartRulesFile}
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		pairs[f] = filepath.Join(chartDashboardsDir, filepath.Base(f))
	}
	if *update {
		if err := os.MkdirAll(chartDashboardsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for src, dst := range pairs {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	inChart, err := filepath.Glob(filepath.Join(chartDashboardsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inChart) != len(files) {
		t.Errorf("the chart has %d dashboards, config/grafana %d (run: go test ./config/ -run TestChartMonitoringFiles -update)", len(inChart), len(files))
	}
	for src, dst := range pairs {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Errorf("%v (run: go test ./config/ -run TestChartMonitoringFiles -update)", err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s (run: go test ./config/ -run TestChartMonitoringFiles -update)", dst, src)
		}
	}
}

// TestChartMonitoring: with the Prometheus Operator's API served, the chart renders a
// PodMonitor that presents a token bound to the metrics reader for every metalgate pod's
// metrics port, a PrometheusRule equal to the rules file, and one ConfigMap per dashboard;
// without the API, neither operator object (and no error); the PodMonitor without the reader
// ClusterRole is refused by name.
func TestChartMonitoring(t *testing.T) {
	helm := helmBinary(t)
	all := []string{"--set", "monitoring.podMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboards.enabled=true"}

	r, out, err := renderChart(t, helm, append(all, "--api-versions", "monitoring.coreos.com/v1")...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	pms := r.of("PodMonitor")
	if len(pms) != 1 {
		t.Fatalf("%d PodMonitors, want 1", len(pms))
	}
	var pm struct {
		Spec struct {
			NamespaceSelector struct {
				Any bool `json:"any"`
			} `json:"namespaceSelector"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port        string `json:"port"`
				Path        string `json:"path"`
				Relabelings []struct {
					Action string `json:"action"`
					Regex  string `json:"regex"`
				} `json:"relabelings"`
				Authorization struct {
					Type        string `json:"type"`
					Credentials struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"credentials"`
				} `json:"authorization"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	fromUnstructured(t, pms[0], &pm)
	if !pm.Spec.NamespaceSelector.Any || pm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "metalgate" {
		t.Errorf("PodMonitor selects %+v in any namespace: %v; want app.kubernetes.io/name=metalgate everywhere (Gateway proxies live in the Gateways' namespaces)", pm.Spec.Selector, pm.Spec.NamespaceSelector.Any)
	}
	// Each component's metrics port is one of the endpoints, by the name its pod gives it.
	ports := map[string]bool{}
	for _, e := range pm.Spec.Endpoints {
		ports[e.Port] = true
		if e.Path != "/metrics" || e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Key != "token" {
			t.Errorf("PodMonitor endpoint %+v: want /metrics with a bearer token", e)
		}
		// The operator gives every target the pod's namespace as label namespace, which the
		// proxies' route metrics have too: on the admin port it must be dropped, or the route's
		// namespace ends up in exported_namespace, where no dashboard or alert looks.
		var dropsNamespace bool
		for _, rl := range e.Relabelings {
			dropsNamespace = dropsNamespace || rl.Action == "labeldrop" && rl.Regex == "namespace"
		}
		if dropsNamespace != (e.Port == "admin") {
			t.Errorf("PodMonitor endpoint %s: drops the target label namespace: %v, want %v (only the proxies' admin port, whose metrics carry namespace)", e.Port, dropsNamespace, e.Port == "admin")
		}
		secret := e.Authorization.Credentials.Name
		var found bool
		for _, s := range r.of("Secret") {
			if s.GetName() == secret && s.Object["type"] == "kubernetes.io/service-account-token" {
				found = s.GetAnnotations()["kubernetes.io/service-account.name"] != ""
			}
		}
		if !found {
			t.Errorf("PodMonitor's token Secret %q is not a rendered service-account token", secret)
		}
	}
	for _, c := range []struct{ component, port string }{{"controller", "metrics"}, {"speaker", "metrics"}, {"proxy", "admin"}} {
		var named bool
		for _, p := range r.container(c.component).Ports {
			named = named || p.Name == c.port
		}
		if !named || !ports[c.port] {
			t.Errorf("%s: port %q named on the pod %v, scraped by the PodMonitor %v", c.component, c.port, named, ports[c.port])
		}
	}
	var bound bool
	for _, b := range r.of("ClusterRoleBinding") {
		ref, _ := b.Object["roleRef"].(map[string]any)
		subjects, _ := b.Object["subjects"].([]any)
		if strings.HasSuffix(fmt.Sprint(ref["name"]), "-metrics-reader") && strings.Contains(fmt.Sprint(subjects), "metrics-scraper") {
			bound = true
		}
	}
	if !bound {
		t.Error("no ClusterRoleBinding binds the metrics-reader ClusterRole to the scraper's ServiceAccount")
	}

	prs := r.of("PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(prs))
	}
	var pr struct {
		Spec ruleFile `json:"spec"`
	}
	fromUnstructured(t, prs[0], &pr)
	if diff := cmp.Diff(readRules(t), pr.Spec); diff != "" {
		t.Errorf("the chart's PrometheusRule differs from %s (-file +chart):\n%s", rulesFile, diff)
	}

	dashboards := readDashboards(t)
	var cms int
	for _, cm := range r.of("ConfigMap") {
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		cms++
		data, _ := cm.Object["data"].(map[string]any)
		for name, v := range data {
			var d dashboard
			if err := json.Unmarshal([]byte(fmt.Sprint(v)), &d); err != nil {
				t.Errorf("ConfigMap %s: %s is not JSON: %v", cm.GetName(), name, err)
				continue
			}
			if want := dashboards[filepath.Join(dashboardsDir, name)]; want.UID == "" || want.UID != d.UID {
				t.Errorf("ConfigMap %s holds %s with uid %q, config/grafana has %q", cm.GetName(), name, d.UID, want.UID)
			}
		}
	}
	if cms != len(dashboards) {
		t.Errorf("%d dashboard ConfigMaps, want %d", cms, len(dashboards))
	}

	r, out, err = renderChart(t, helm, all...)
	if err != nil {
		t.Fatalf("helm template without monitoring.coreos.com/v1: %v\n%s", err, out)
	}
	if n := len(r.of("PodMonitor")) + len(r.of("PrometheusRule")); n != 0 {
		t.Errorf("without the Prometheus Operator's API the chart renders %d of its objects, want 0", n)
	}

	_, out, err = renderChart(t, helm, append(all, "--api-versions", "monitoring.coreos.com/v1", "--set", "metricsReader.create=false")...)
	if err == nil || !strings.Contains(out, "monitoring.podMonitor.enabled") {
		t.Errorf("PodMonitor without the metrics reader: err %v, output %q; want a refusal naming monitoring.podMonitor.enabled", err, out)
	}
}

const (
	compatRulesFile     = "prometheus/compat-rules.yaml"
	compatRulesTestFile = "prometheus/compat-rules_test.yaml"
)

// TestCompatRules: the recording rules that emit MetalLB's and ingress-nginx's metric names
// read only metrics the code registers, every rule is documented in the mapping table of
// docs/observability.md, and promtool accepts them and passes their unit tests.
func TestCompatRules(t *testing.T) {
	b, err := os.ReadFile(compatRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("%s: %v", compatRulesFile, err)
	}
	doc, err := os.ReadFile(observabilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	code := registeredMetrics(t)
	var n int
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			if strings.HasPrefix(r.Record, "metalgate_") || r.Record == "" {
				t.Errorf("rule %q: a compatibility rule records another project's name", r.Record)
			}
			if r.Labels["compat"] != "metalgate" {
				t.Errorf("rule %s: no compat=metalgate label", r.Record)
			}
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !code[baseMetric(m, code)] {
					t.Errorf("rule %s reads %s, which no code registers", r.Record, m)
				}
			}
			name := strings.TrimSuffix(r.Record, "_bucket")
			if !strings.Contains(string(doc), "`"+name+"`") {
				t.Errorf("%s does not map %s", observabilityDoc, name)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no rules", compatRulesFile)
	}
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", filepath.Base(compatRulesFile)}, {"test", "rules", filepath.Base(compatRulesTestFile)}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = filepath.Dir(compatRulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestKustomizeMonitoring: config/monitoring, the PodMonitor for kustomize users, scrapes as
// the chart's does (the same spec as the chart renders for a release named metalgate in
// metalgate-system), with a token of a ServiceAccount bound to metalgate-metrics-reader only.
func TestKustomizeMonitoring(t *testing.T) {
	helm := helmBinary(t)
	r, out, err := renderChart(t, helm, "--set", "monitoring.podMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	pms := r.of("PodMonitor")
	if len(pms) != 1 {
		t.Fatalf("%d PodMonitors from the chart, want 1", len(pms))
	}
	var ours map[string]any
	b, err := os.ReadFile("monitoring/podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &ours); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pms[0].Object["spec"], ours["spec"]); diff != "" {
		t.Errorf("config/monitoring/podmonitor.yaml's spec differs from the chart's (-chart +kustomize):\n%s", diff)
	}
	const f = "monitoring/scraper.yaml"
	sas := objects[corev1.ServiceAccount](t, "ServiceAccount", f)
	secrets := objects[corev1.Secret](t, "Secret", f)
	crbs := objects[rbacv1.ClusterRoleBinding](t, "ClusterRoleBinding", f)
	sa := len(sas) == 1 && sas[0].Name == "metalgate-metrics-scraper"
	secret := len(secrets) == 1 && secrets[0].Name == "metalgate-metrics-scraper-token" &&
		secrets[0].Annotations["kubernetes.io/service-account.name"] == "metalgate-metrics-scraper"
	binding := len(crbs) == 1 && crbs[0].RoleRef.Name == "metalgate-metrics-reader" && len(crbs[0].Subjects) == 1 &&
		crbs[0].Subjects[0].Name == "metalgate-metrics-scraper" && crbs[0].Subjects[0].Namespace == "metalgate-system"
	if !sa || !secret || !binding {
		t.Errorf("scraper.yaml: ServiceAccount %t, its token Secret %t, bound to metalgate-metrics-reader %t; want all", sa, secret, binding)
	}
}
