package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// semver is a semantic version with a leading v (semver.org's grammar, loosely: the pre-release
// and build identifiers are dot-separated [0-9A-Za-z-]).
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	const commit = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	for _, tc := range []struct {
		name               string
		version, revision  string // the -X values
		bi                 *debug.BuildInfo
		wantVer, wantRevis string
	}{
		{name: "make build on a tag", version: "v0.1.0", revision: commit, bi: vcs("ffff", "false"), wantVer: "v0.1.0", wantRevis: commit},
		{name: "make build after a tag", version: "v0.1.0-3-g1a2b3c4", revision: commit, wantVer: "v0.1.0-3-g1a2b3c4", wantRevis: commit},
		{name: "make build without a tag", version: "v0.0.0-dev+1a2b3c4", revision: commit, wantVer: "v0.0.0-dev+1a2b3c4", wantRevis: commit},
		{name: "go install at a version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, wantVer: "v0.2.0", wantRevis: UnknownRevision},
		{name: "go build in a checkout", bi: vcs(commit, "false"), wantVer: DevVersion, wantRevis: commit},
		{name: "go build with changes", bi: vcs(commit, "true"), wantVer: DevVersion, wantRevis: commit + "-dirty"},
		{name: "go test", bi: &debug.BuildInfo{}, wantVer: DevVersion, wantRevis: UnknownRevision},
		{name: "no build info", wantVer: DevVersion, wantRevis: UnknownRevision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.revision, tc.bi)
			if got.Version != tc.wantVer || got.Revision != tc.wantRevis {
				t.Errorf("resolve(%q, %q) = version %q revision %q, want %q %q", tc.version, tc.revision, got.Version, got.Revision, tc.wantVer, tc.wantRevis)
			}
			if !semver.MatchString(got.Version) {
				t.Errorf("version %q is not a semantic version vX.Y.Z[-pre][+build]", got.Version)
			}
			if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("go %q platform %q, want %q %q", got.GoVersion, got.Platform, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
			}
		})
	}
}

// TestString: `metalgate version` is one line naming the version, the revision, the Go version
// and the platform, in that order.
func TestString(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	const want = "metalgate v1.2.3 revision 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b go1.26.0 linux/amd64"
	if got := i.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestLinkerFlags: the -X flags the Makefile passes name this package's Version and Revision
// (a -X naming a symbol that does not exist is silently ignored by the linker), and a binary
// linked with them prints them.
func TestLinkerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	pkg := reflect.TypeFor[Info]().PkgPath()
	makefile, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VERSION_PKG := " + pkg + "\n", "-X $(VERSION_PKG).Version=$(VERSION)", "-X $(VERSION_PKG).Revision=$(REVISION)"} {
		if !strings.Contains(string(makefile), want) {
			t.Errorf("the Makefile does not say %q", want)
		}
	}

	const ver, rev = "v1.2.3-rc.1+build.5", "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X "+pkg+".Version="+ver+" -X "+pkg+".Revision="+rev, "./testdata/printversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^metalgate ` + regexp.QuoteMeta(ver) + ` revision ` + rev + ` go1\.[0-9.a-z]+ [a-z0-9]+/[a-z0-9]+\n$`)
	if !want.Match(out) {
		t.Errorf("the binary printed %q, want %s", out, want)
	}
}
