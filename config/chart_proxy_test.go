package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
