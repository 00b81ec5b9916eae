package config_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The alerting rules (config/prometheus), their runbooks and the metric reference
// (docs/observability.md), kept true to each other and to the metrics the code registers.

var update = flag.Bool("update", false, "regenerate prometheus/prometheusrule.yaml from prometheus/metalgate-rules.yaml")

const (
	rulesFile          = "prometheus/metalgate-rules.yaml"
	rulesTestFile      = "prometheus/metalgate-rules_test.yaml"
	prometheusRuleFile = "prometheus/prometheusrule.yaml"
	observabilityDoc   = "../docs/observability.md"
	runbookBase        = "https://github.com/metalgate/metalgate/blob/main/docs/observability.md#"
)

// ruleFile is the part of a Prometheus rules file the tests read.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(rf.Groups) == 0 {
		t.Fatalf("%s has no groups", rulesFile)
	}
	return rf
}

// prometheusRule is the monitoring.coreos.com/v1 PrometheusRule made of the rules file.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec ruleFile `json:"spec"`
}

const prometheusRuleHeader = `# Generated from metalgate-rules.yaml by
#   go test ./config/ -run TestPrometheusRuleMatchesRules -update
# Do not edit: edit metalgate-rules.yaml and regenerate (the test fails while they differ).
# A PrometheusRule for the Prometheus Operator: apply it in the namespace your Prometheus
# selects rules from (kubectl apply -n monitoring -f …), and add the labels its ruleSelector
# asks for (kube-prometheus-stack: release: <its release name>).
`

// TestPrometheusRuleMatchesRules: the PrometheusRule holds exactly the groups of the plain
// rules file (-update writes it).
func TestPrometheusRuleMatchesRules(t *testing.T) {
	rf := readRules(t)
	if *update {
		var pr prometheusRule
		pr.APIVersion, pr.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
		pr.Metadata.Name = "metalgate"
		pr.Metadata.Labels = map[string]string{"app.kubernetes.io/name": "metalgate"}
		pr.Spec = rf
		b, err := yaml.Marshal(pr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prometheusRuleFile, append([]byte(prometheusRuleHeader), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		t.Fatalf("%s: %v", prometheusRuleFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("%s is %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if diff := cmp.Diff(rf, pr.Spec); diff != "" {
		t.Errorf("%s differs from %s (run: go test ./config/ -run TestPrometheusRuleMatchesRules -update) (-rules +PrometheusRule):\n%s", prometheusRuleFile, rulesFile, diff)
	}
}

// promtool is the promtool binary, or the test is skipped — failed under CI=true, where a
// missing tool must not pass for a green run.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	const how = "needs promtool (Debian: apt-get install prometheus; make deps installs it)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %v", how, err)
	}
	t.Skipf("%s: %v", how, err)
	return ""
}

// TestPrometheusRules: promtool accepts the rules file (check rules), and its unit tests pass:
// every alert fires on synthetic series of its failure, none on a healthy cluster.
func TestPrometheusRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Base(rulesFile)},
		{"test", "rules", filepath.Base(rulesTestFile)},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertHasItsTest: each alert of the rules file is expected to fire in the promtool
// tests and expected silent in at least one other case.
func TestEveryAlertHasItsTest(t *testing.T) {
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: fires in a test: %v, silent in a test: %v; want both", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
}

// TestAlertsAreComplete: every alert has a severity, a summary, a description and a
// runbook_url pointing at its own section of docs/observability.md.
func TestAlertsAreComplete(t *testing.T) {
	doc, err := os.ReadFile(observabilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s", r.Alert, a)
				}
			}
			want := runbookBase + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("alert %s: %s has no section headed %q (its runbook)", r.Alert, observabilityDoc, r.Alert)
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives the Markdown headings of doc (lower case, spaces
// to dashes, punctuation dropped).
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

var metricName = regexp.MustCompile(`\bmetalgate_[a-z0-9_]+`)

// baseMetric is the name a histogram's or summary's series come from.
func baseMetric(name string, known map[string]bool) string {
	if known[name] {
		return name
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
			return b
		}
	}
	return name
}

// TestRulesAndDocsUseRegisteredMetrics: every metric an alert reads is one the code
// registers, and docs/observability.md names every registered metric and no other.
func TestRulesAndDocsUseRegisteredMetrics(t *testing.T) {
	code := registeredMetrics(t)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !code[baseMetric(m, code)] {
					t.Errorf("alert %s reads %s, which no code registers", r.Alert, m)
				}
			}
		}
	}
	b, err := os.ReadFile(observabilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, m := range metricName.FindAllString(string(b), -1) {
		m = baseMetric(m, code)
		inDoc[m] = true
		if !code[m] {
			t.Errorf("%s names %s, which no code registers", observabilityDoc, m)
		}
	}
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range code {
			if !yield(m) {
				return
			}
		}
	}) {
		if !inDoc[m] {
			t.Errorf("%s does not document %s", observabilityDoc, m)
		}
	}
}

// registeredMetrics are the metalgate_* metric names in the Go sources of the repository
// (tests, e2e and the tools under bin/ left out): each Opts literal's Namespace, Subsystem and
// Name joined as Prometheus joins them, and each prometheus.NewDesc's name.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "e2e", "testdata", "vendor", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				parts := map[string]string{}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					k, ok1 := kv.Key.(*ast.Ident)
					v, ok2 := kv.Value.(*ast.BasicLit)
					if ok1 && ok2 && v.Kind == token.STRING {
						parts[k.Name], _ = strconv.Unquote(v.Value)
					}
				}
				if parts["Name"] == "" {
					return true
				}
				var name []string
				for _, p := range []string{parts["Namespace"], parts["Subsystem"], parts["Name"]} {
					if p != "" {
						name = append(name, p)
					}
				}
				if full := strings.Join(name, "_"); strings.HasPrefix(full, "metalgate_") {
					out[full] = true
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "NewDesc" || len(n.Args) == 0 {
					return true
				}
				if v, ok := n.Args[0].(*ast.BasicLit); ok && v.Kind == token.STRING {
					if s, _ := strconv.Unquote(v.Value); strings.HasPrefix(s, "metalgate_") {
						out[s] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One of each way of naming: a plain Name, Namespace+Subsystem+Name, a NewDesc.
	for _, m := range []string{"metalgate_build_info", "metalgate_bgp_session_up", "metalgate_proxy_watch_healthy"} {
		if !out[m] {
			t.Fatalf("the scan of the Go sources missed %s (found %d metrics): fix registeredMetrics", m, len(out))
		}
	}
	return out
}
