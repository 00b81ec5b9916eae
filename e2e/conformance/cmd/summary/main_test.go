package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
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

// TestProfileOrder: the suite writes its profiles in no fixed order; whatever the report's
// order, the summary and the features table list GATEWAY-HTTP, then GATEWAY-GRPC, then
// GATEWAY-TLS (so a rerun of the same code does not rewrite the committed table).
func TestProfileOrder(t *testing.T) {
	profile := func(name string) string {
		return "- name: " + name + `
  summary: ""
  core:
    result: success
    statistics: {Failed: 0, Passed: 1, Skipped: 0}
`
	}
	head, _, _ := strings.Cut(testReport, "profiles:\n")
	want := []string{"GATEWAY-HTTP", "GATEWAY-GRPC", "GATEWAY-TLS"}
	for _, tc := range []struct {
		name  string
		order []string
	}{
		{name: "TLS first", order: []string{"GATEWAY-TLS", "GATEWAY-HTTP", "GATEWAY-GRPC"}},
		{name: "reversed", order: []string{"GATEWAY-TLS", "GATEWAY-GRPC", "GATEWAY-HTTP"}},
		{name: "GRPC first", order: []string{"GATEWAY-GRPC", "GATEWAY-TLS", "GATEWAY-HTTP"}},
		{name: "already in order", order: want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			body := head + "profiles:\n"
			for _, p := range tc.order {
				body += profile(p)
			}
			report, log := filepath.Join(dir, "report.yaml"), filepath.Join(dir, "test.log")
			for p, c := range map[string]string{report: body, log: testLog} {
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			features := filepath.Join(dir, "features.md")
			if _, err := run(&out, report, log, features); err != nil {
				t.Fatal(err)
			}
			table, err := os.ReadFile(features)
			if err != nil {
				t.Fatal(err)
			}
			for what, text := range map[string]string{"summary": out.String(), "features table": string(table)} {
				var got []string
				for _, line := range strings.Split(text, "\n") {
					for _, p := range want {
						if (strings.HasPrefix(line, "  profile "+p+":") || strings.HasPrefix(line, "| "+p+" |")) && !slices.Contains(got, p) {
							got = append(got, p)
						}
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s lists the profiles %v, want %v:\n%s", what, got, want, text)
				}
			}
		})
	}
}
