// Command summary prints what a conformance run did and writes the features table for the
// README, from the suite's ConformanceReport and the verbose log of the test binary:
//
//	go run ./cmd/summary -report report.yaml -log test.log -features features.md
//
// It prints one line per test that ran or was skipped (PASS, FAIL, SKIP with the features it
// needs), then one line per profile (core and extended result, counts, failed tests). The
// features table has one row per feature of the profiles that ran: core or extended, claimed
// or not, and how many of its tests passed. It exits 1 when a test failed.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"
)

func main() {
	report := flag.String("report", "", "ConformanceReport YAML written by the suite (required).")
	logPath := flag.String("log", "", "Verbose (-test.v) output of the conformance test binary (required).")
	featuresPath := flag.String("features", "", "Write the Markdown features table here (optional).")
	flag.Parse()
	failed, err := run(os.Stdout, *report, *logPath, *featuresPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "summary: %v\n", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// outcome is what the log says of one test: PASS, FAIL or SKIP.
type outcome string

// resultLine matches go test's verdict of one conformance test, e.g.
// "    --- PASS: TestConformance/HTTPRouteExactPathMatching (2.01s)".
var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformance/([A-Za-z0-9]+) \(([0-9.]+s)\)`)

func run(w io.Writer, reportPath, logPath, featuresPath string) (bool, error) {
	if reportPath == "" || logPath == "" {
		return false, fmt.Errorf("-report and -log are required")
	}
	outcomes, durations, err := readLog(logPath)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(reportPath)
	if err != nil {
		return false, fmt.Errorf("read report: %w", err)
	}
	var rep confv1.ConformanceReport
	if err := yaml.UnmarshalStrict(b, &rep); err != nil {
		return false, fmt.Errorf("parse report %s: %w", reportPath, err)
	}
	// The suite writes its profiles in no fixed order (two runs of the same code differ): the
	// summary and the committed features table list them in the order of knownProfiles.
	sortProfiles(rep.ProfileReports)
	testFeatures := map[string][]features.FeatureName{}
	for _, t := range tests.ConformanceTests {
		testFeatures[t.ShortName] = t.Features
	}

	names := make([]string, 0, len(outcomes))
	for n := range outcomes {
		names = append(names, n)
	}
	sort.Strings(names)
	failed := false
	count := map[outcome]int{}
	fmt.Fprintf(w, "\nConformance: Gateway API %s (%s channel), %s %s\n", rep.GatewayAPIVersion, rep.GatewayAPIChannel, rep.Project, rep.Version)
	for _, n := range names {
		o := outcomes[n]
		count[o]++
		failed = failed || o == "FAIL"
		if o == "SKIP" {
			continue
		}
		fmt.Fprintf(w, "  %-4s %-60s %8s\n", o, n, durations[n])
	}
	fmt.Fprintf(w, "  tests: %d passed, %d failed, %d skipped (not claimed or not selected)\n", count["PASS"], count["FAIL"], count["SKIP"])
	for _, p := range rep.ProfileReports {
		fmt.Fprintf(w, "  profile %s: core %s (%d passed, %d failed, %d skipped)", p.Name, p.Core.Result, p.Core.Passed, p.Core.Failed, p.Core.Skipped)
		if e := p.Extended; e != nil {
			fmt.Fprintf(w, "; extended %s (%d passed, %d failed, %d skipped)", e.Result, e.Passed, e.Failed, e.Skipped)
		}
		fmt.Fprintln(w)
		for _, f := range p.Core.FailedTests {
			fmt.Fprintf(w, "    core test failed: %s\n", f)
		}
		if e := p.Extended; e != nil {
			for _, f := range e.FailedTests {
				fmt.Fprintf(w, "    extended test failed: %s\n", f)
			}
		}
	}
	if featuresPath != "" {
		if err := os.WriteFile(featuresPath, []byte(featuresTable(rep, outcomes, testFeatures)), 0o644); err != nil {
			return failed, fmt.Errorf("write features table: %w", err)
		}
		fmt.Fprintf(w, "  features table: %s\n", featuresPath)
	}
	return failed, nil
}

// readLog returns each conformance test's verdict and duration from a verbose test log.
func readLog(path string) (map[string]outcome, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	outcomes := map[string]outcome{}
	durations := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if m := resultLine.FindStringSubmatch(sc.Text()); m != nil {
			outcomes[m[2]] = outcome(m[1])
			durations[m[2]] = m[3]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read log %s: %w", path, err)
	}
	if len(outcomes) == 0 {
		return nil, nil, fmt.Errorf("log %s has no conformance test results (did the suite set up?)", path)
	}
	return outcomes, durations, nil
}

// featuresTable renders one row per feature of each profile in the report.
func featuresTable(rep confv1.ConformanceReport, outcomes map[string]outcome, testFeatures map[string][]features.FeatureName) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- generated by `make conformance` (e2e/conformance/cmd/summary) from the report of Gateway API %s -->\n", rep.GatewayAPIVersion)
	b.WriteString("| profile | feature | level | claimed | tests passed |\n|---|---|---|---|---|\n")
	for _, p := range rep.ProfileReports {
		prof, ok := profileByName(p.Name)
		if !ok {
			continue
		}
		claimed := map[string]bool{}
		if p.Extended != nil {
			for _, f := range p.Extended.SupportedFeatures {
				claimed[f] = true
			}
		}
		rows := func(level string, fs []features.FeatureName, isClaimed func(string) bool) {
			for _, f := range fs {
				pass, all := 0, 0
				for name, o := range outcomes {
					if !slices.Contains(testFeatures[name], f) || o == "SKIP" {
						continue
					}
					all++
					if o == "PASS" {
						pass++
					}
				}
				c, tested := "no", "—"
				if isClaimed(string(f)) {
					c = "yes"
					tested = fmt.Sprintf("%d/%d", pass, all)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", p.Name, f, level, c, tested)
			}
		}
		rows("core", sortedNames(prof.CoreFeatures.UnsortedList()), func(string) bool { return true })
		rows("extended", sortedNames(prof.ExtendedFeatures.UnsortedList()), func(f string) bool { return claimed[f] })
	}
	return b.String()
}

// knownProfiles are the profiles the features table knows, in the order it lists them.
func knownProfiles() []suite.ConformanceProfile {
	return []suite.ConformanceProfile{suite.GatewayHTTPConformanceProfile, suite.GatewayGRPCConformanceProfile,
		suite.GatewayTLSConformanceProfile, suite.MeshHTTPConformanceProfile, suite.MeshGRPCConformanceProfile}
}

func profileByName(name string) (suite.ConformanceProfile, bool) {
	for _, p := range knownProfiles() {
		if string(p.Name) == name {
			return p, true
		}
	}
	return suite.ConformanceProfile{}, false
}

// sortProfiles orders ps as knownProfiles does; unknown profiles go last, by name.
func sortProfiles(ps []confv1.ProfileReport) {
	rank := func(name string) int {
		i := slices.IndexFunc(knownProfiles(), func(p suite.ConformanceProfile) bool { return string(p.Name) == name })
		if i < 0 {
			return len(knownProfiles())
		}
		return i
	}
	slices.SortStableFunc(ps, func(a, b confv1.ProfileReport) int {
		return cmp.Or(cmp.Compare(rank(a.Name), rank(b.Name)), strings.Compare(a.Name, b.Name))
	})
}

func sortedNames(fs []features.FeatureName) []features.FeatureName {
	slices.Sort(fs)
	return fs
}
