// Package version reports the build of the metalgate binary: in `metalgate version`, in logs
// and as the metalgate_build_info metric of every component.
package version

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is set at build time with -ldflags "-X …/version.Version=v0.1.0"; "dev" otherwise.
var Version = "dev"

// Revision is the VCS revision, set at build time with -ldflags "-X …/version.Revision=<sha>"
// (the Makefile does). Empty: the vcs.revision Go stamped into the binary, if any (go build
// inside a git checkout), else "unknown".
var Revision = ""

// revision is Revision, else the vcs.revision of the build info, else "unknown".
func revision() string {
	if Revision != "" {
		return Revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String describes the build: version, VCS revision when known, Go version and platform.
func String() string {
	rev := ""
	if r := revision(); r != "unknown" {
		rev = " (" + r[:min(len(r), 12)] + ")"
	}
	return fmt.Sprintf("metalgate %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// RegisterBuildInfo registers metalgate_build_info{version,revision,goversion} = 1 with reg:
// every component (controller, speaker, proxy) exports it, so a dashboard or an alert can tell
// which build runs where, and a rollout half done shows as two series. Registering it again
// with the same reg is a no-op.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metalgate_build_info",
		Help: "Always 1; the labels name the build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{
			"version":   Version,
			"revision":  revision(),
			"goversion": runtime.Version(),
		},
	})
	g.Set(1)
	// Several components in one process (the tests run the controller and a proxy side by
	// side on controller-runtime's registry) share one build: the series is there already.
	if err := reg.Register(g); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return fmt.Errorf("register metalgate_build_info: %w", err)
	}
	return nil
}
