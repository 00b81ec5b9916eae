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

// Version and Revision are set at build time by the Makefile (make build):
//
//	-ldflags "-X github.com/metalgate/metalgate/cmd/metalgate/internal/version.Version=v0.1.0
//	          -X github.com/metalgate/metalgate/cmd/metalgate/internal/version.Revision=<commit>"
//
// Version is `git describe --tags --match 'v*' --dirty` (v0.1.0 on a release tag,
// v0.1.0-3-g1a2b3c4 three commits after it), or v0.0.0-dev+<short commit> where no tag is
// reachable. Revision is the full commit. They are variables only because -X can set nothing
// else; Get is what reads them.
var (
	Version  = ""
	Revision = ""
)

// Unknown versions: a build without -ldflags whose module version Go could not tell either
// (go build in a checkout without VCS information, go test).
const (
	DevVersion      = "v0.0.0-dev"
	UnknownRevision = "unknown"
)

// Info is one build of metalgate.
type Info struct {
	// Version is a semantic version with a leading v: v1.2.3, v1.2.3-rc.1,
	// v1.2.3-4-g1a2b3c4 (a commit after a tag), v0.0.0-dev+1a2b3c4 (no tag).
	Version string
	// Revision is the VCS commit the binary was built from ("-dirty" appended when the work
	// tree had changes), or "unknown".
	Revision string
	// GoVersion and Platform (GOOS/GOARCH) of the build.
	GoVersion, Platform string
}

// Get is this binary's build: the -ldflags values when set, else what the Go toolchain recorded
// (the module version of `go install …@v1.2.3`, the commit of a build in a git checkout).
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Revision, bi)
}

// resolve picks each field: the -X value first, then the build info bi (may be nil).
func resolve(version, revision string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Revision == "" {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "-dirty"
			}
			info.Revision = rev
		}
	}
	if info.Version == "" {
		info.Version = DevVersion
	}
	if info.Revision == "" {
		info.Revision = UnknownRevision
	}
	return info
}

// String is what `metalgate version` prints, one line:
//
//	metalgate v0.1.0 revision 1a2b3c4d5e6f… go1.26.0 linux/amd64
func (i Info) String() string {
	return fmt.Sprintf("metalgate %s revision %s %s %s", i.Version, i.Revision, i.GoVersion, i.Platform)
}

// String is Get().String().
func String() string { return Get().String() }

// RegisterBuildInfo registers metalgate_build_info{version,revision,goversion} = 1 with reg:
// every component (controller, speaker, proxy) exports it, so a dashboard or an alert can tell
// which build runs where, and a rollout half done shows as two series. Registering it again
// with the same reg is a no-op.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	info := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metalgate_build_info",
		Help: "Always 1; the labels name the build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{
			"version":   info.Version,
			"revision":  info.Revision,
			"goversion": info.GoVersion,
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
