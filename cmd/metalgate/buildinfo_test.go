package main

import (
	"context"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
)

// TestBuildInfoPerComponent: the registry each component serves on /metrics has
// metalgate_build_info = 1 with its version, revision and Go version — the controller's and
// the proxy's (built by the helpers their run functions call) and the speaker's (both ways of
// running build their metrics through newSpeakerEnv).
func TestBuildInfoPerComponent(t *testing.T) {
	tests := []struct {
		component string
		register  func(reg *prometheus.Registry) error
	}{
		{"controller", func(reg *prometheus.Registry) error {
			_, err := controllerMetrics(reg)
			return err
		}},
		{"proxy", func(reg *prometheus.Registry) error {
			_, err := proxyMetrics(reg)
			return err
		}},
		{"speaker", func(reg *prometheus.Registry) error {
			_, err := newSpeakerEnv(context.Background(), &speakerOptions{NodeIP: "127.0.0.1"}, reg, nil, &speakerRef{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.component, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if err := tc.register(reg); err != nil {
				t.Fatalf("register: %v", err)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatalf("gather: %v", err)
			}
			var found bool
			for _, mf := range mfs {
				if mf.GetName() != "metalgate_build_info" {
					continue
				}
				if n := len(mf.GetMetric()); n != 1 {
					t.Fatalf("metalgate_build_info has %d series, want 1", n)
				}
				m := mf.GetMetric()[0]
				if v := m.GetGauge().GetValue(); v != 1 {
					t.Errorf("metalgate_build_info = %v, want 1", v)
				}
				got := map[string]string{}
				for _, l := range m.GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
				if got["version"] != version.Get().Version || got["goversion"] != runtime.Version() || got["revision"] == "" {
					t.Errorf("labels = %v, want version=%s goversion=%s and a revision", got, version.Get().Version, runtime.Version())
				}
				found = true
			}
			if !found {
				t.Errorf("the %s's registry has no metalgate_build_info", tc.component)
			}
		})
	}
}

// TestBuildInfoRevision: a revision set at link time (-X …/version.Revision, as the Makefile
// does) is the label; without one the label is Go's vcs.revision or "unknown", never empty.
func TestBuildInfoRevision(t *testing.T) {
	saved := version.Revision
	t.Cleanup(func() { version.Revision = saved })
	for _, rev := range []string{"0123456789abcdef0123456789abcdef01234567", ""} {
		version.Revision = rev
		reg := prometheus.NewRegistry()
		if err := version.RegisterBuildInfo(reg); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, l := range mfs[0].GetMetric()[0].GetLabel() {
			if l.GetName() == "revision" {
				got = l.GetValue()
			}
		}
		if rev != "" && got != rev {
			t.Errorf("revision label = %q, want the linked %q", got, rev)
		}
		if got == "" {
			t.Errorf("Revision %q: revision label is empty", rev)
		}
	}
}

// TestBuildInfoTwoComponentsOneRegistry: a controller and a proxy started in one process on
// one registry (controller-runtime's, as the tests of this package do) both start, with one
// metalgate_build_info series.
func TestBuildInfoTwoComponentsOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := controllerMetrics(reg); err != nil {
		t.Fatalf("controller: %v", err)
	}
	if _, err := proxyMetrics(reg); err != nil {
		t.Fatalf("proxy on the controller's registry: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "metalgate_build_info" && len(mf.GetMetric()) != 1 {
			t.Errorf("metalgate_build_info has %d series, want 1", len(mf.GetMetric()))
		}
	}
}
