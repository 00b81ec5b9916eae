// Package version reports the build of the metalgate binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X …/version.Version=v0.1.0"; "dev" otherwise.
var Version = "dev"

// String describes the build: version, VCS revision when known, Go version and platform.
func String() string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("metalgate %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
