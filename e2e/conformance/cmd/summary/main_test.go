package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testReport = `apiVersion: gateway.networking.k8s.io/v1
kind: ConformanceReport
date: "2026-11-26T00:00:00Z"
gatewayAPIChannel: standard
gatewayAPIVersion: v1.5.1
implementation:
  contact: [https://example.test/issues]
  organization: metalgate
  project: metalgate
  url: https://example.test
  version: v0.0.0
mode: default
profiles:
- name: GATEWAY-HTTP
  summary: ""
  core:
    result: failure
    statistics: {Failed: 1, Passed: 1, Skipped: 0}
    failedTests: [HTTPRouteServiceTypes]
  extended:
    result: success
    statistics: {Failed: 0, Passed: 1, Skipped: 0}
    supportedFeatures: [HTTPRouteMethodMatching]
`

const testLog = `=== RUN   TestConformance
    --- PASS: TestConformance/HTTPRouteSimpleSameNamespace (0.15s)
    --- FAIL: TestConformance/HTTPRouteServiceTypes (0.52s)
    --- PASS: TestConformance/HTTPRouteMethodMatching (0.14s)
    --- SKIP: TestConformance/HTTPRouteCORS (0.00s)
        --- PASS: TestConformance/HTTPRouteWeight/subtest (1.00s)
--- FAIL: TestConformance (10.00s)
`

// TestRun: broken inputs first (no results in the log, a report that does not parse, a
// missing flag), then a run with a failure: it is reported, the exit says so, and the
// features table counts each claimed feature's tests and leaves unclaimed ones untested.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	report, log := write("report.yaml", testReport), write("test.log", testLog)
	for _, tc := range []struct {
		name, report, log, wantErr string
	}{
		{name: "log without results", report: report, log: write("empty.log", "=== RUN   TestConformance\nFAIL\n"), wantErr: "no conformance test results"},
		{name: "report that does not parse", report: write("bad.yaml", "profiles: {"), log: log, wantErr: "parse report"},
		{name: "report with an unknown field", report: write("unknown.yaml", testReport+"surprise: 1\n"), log: log, wantErr: "parse report"},
		{name: "no report", log: log, wantErr: "-report and -log are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(&bytes.Buffer{}, tc.report, tc.log, "")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	var out bytes.Buffer
	features := filepath.Join(dir, "features.md")
	failed, err := run(&out, report, log, features)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("a FAIL in the log did not make the run fail")
	}
	for _, want := range []string{
		"FAIL HTTPRouteServiceTypes",
		"PASS HTTPRouteSimpleSameNamespace",
		"tests: 2 passed, 1 failed, 1 skipped",
		"profile GATEWAY-HTTP: core failure (1 passed, 1 failed, 0 skipped); extended success (1 passed, 0 failed, 0 skipped)",
		"core test failed: HTTPRouteServiceTypes",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "HTTPRouteWeight") {
		t.Errorf("a subtest's verdict was counted as a test:\n%s", out.String())
	}
	b, err := os.ReadFile(features)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| GATEWAY-HTTP | HTTPRoute | core | yes | 2/3 |", // every test here needs HTTPRoute; the skipped CORS one is not counted
		"| GATEWAY-HTTP | HTTPRouteMethodMatching | extended | yes | 1/1 |",
		"| GATEWAY-HTTP | HTTPRouteCORS | extended | no | — |",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("features table lacks %q:\n%s", want, b)
		}
	}
}
