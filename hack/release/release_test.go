package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/internal/testenv"
)

func TestRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"not semver", options{Version: "1.2", Revision: "r", Platforms: []string{"linux/amd64"}}, "-version"},
		{"leading zero", options{Version: "01.2.3", Revision: "r", Platforms: []string{"linux/amd64"}}, "-version"},
		{"no revision", options{Version: "1.2.3", Platforms: []string{"linux/amd64"}}, "-revision"},
		{"no platform", options{Version: "1.2.3", Revision: "r"}, "-platforms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Out = filepath.Join(t.TempDir(), "out")
			err := run(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error naming %s", err, tc.want)
			}
			if _, err := os.Stat(tc.o.Out); !os.IsNotExist(err) {
				t.Errorf("bad input wrote %s (%v)", tc.o.Out, err)
			}
		})
	}
}

// TestRelease builds a release for this machine's platform (make release builds every one;
// the code path per platform is the same) and checks each artefact as a user takes it: the
// checksums hold; the OCI layout's index is tagged with the version and its image runs
// /metalgate, labelled with version and revision, and that binary says the version; the
// plugin archive and the krew manifest agree; the SBOM lists the modules linked in; the chart
// package carries the version and installs into a real API server with the image at that tag.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/metalgate and the plugin; skipped with -short")
	}
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Skip("needs helm: set HELM or run 'make test-integration' (builds bin/helm-<version>)")
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Skipf("no CA bundle on this host (%v): install ca-certificates", err)
	}
	const version, revision = "1.2.3-rc.1", "0123456789abcdef0123456789abcdef01234567"
	host := "linux/" + runtime.GOARCH
	out := filepath.Join(t.TempDir(), "release")
	// The command as make release runs it (go run ./hack/release), built without the race
	// detector: it runs one step after the other, and under -race compressing the image layer
	// and the plugin archive (about 100 MB) took a minute longer than the whole release.
	release := filepath.Join(t.TempDir(), "release-cmd")
	if b, err := exec.Command("go", "build", "-o", release, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/release: %v\n%s", err, b)
	}
	if b, err := exec.Command(release, "-version", "v"+version, "-revision", revision, "-out", out, "-root", "../..",
		"-helm", helm, "-platforms", host, "-plugin-platforms", host, "-ca-bundle", "/etc/ssl/certs/ca-certificates.crt",
		"-repository", "ghcr.io/metalgate/metalgate", "-source", "https://github.com/metalgate/metalgate").CombinedOutput(); err != nil {
		t.Fatalf("release: %v\n%s", err, b)
	}

	// SHA256SUMS covers every file and each sum holds.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		listed[file] = true
		if got, err := fileSHA256(filepath.Join(out, file)); err != nil || got != sum {
			t.Errorf("%s: sha256 %s (%v), SHA256SUMS says %s", file, got, err, sum)
		}
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("%s left in the release", e.Name())
		} else if e.Name() != "SHA256SUMS" && !listed[e.Name()] {
			t.Errorf("%s is not in SHA256SUMS", e.Name())
		}
	}
	for _, want := range []string{"metalgate-image-" + version + ".oci.tar", "metalgate-" + version + ".tgz",
		"kubectl-metalgate_" + version + "_linux_" + runtime.GOARCH + ".tar.gz", "metalgate.krew.yaml", "sbom.spdx.json"} {
		if !listed[want] {
			t.Errorf("no %s in the release (have %v)", want, listed)
		}
	}

	checkImage(t, filepath.Join(out, "metalgate-image-"+version+".oci.tar"), version, revision)
	checkKrew(t, out, version)
	checkSBOM(t, filepath.Join(out, "sbom.spdx.json"), version)
	checkChart(t, helm, filepath.Join(out, "metalgate-"+version+".tgz"), version)
}

func checkImage(t *testing.T, archive, version, revision string) {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("OCI layout: %v", err)
	}
	// The layout's top index names the tag; the index under it holds one image per platform.
	top, err := idx.IndexManifest()
	if err != nil || len(top.Manifests) != 1 {
		t.Fatalf("layout index: %v, %d entries, want 1", err, len(top.Manifests))
	}
	if ref := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "v"+version {
		t.Errorf("layout tags the index %q, want v%s", ref, version)
	}
	multi, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := multi.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Platform == nil ||
		im.Manifests[0].Platform.Architecture != runtime.GOARCH || im.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("image index %+v (%v): want one linux/%s image", im, err, runtime.GOARCH)
	}
	img, err := multi.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/metalgate" || cf.Architecture != runtime.GOARCH || cf.Config.User != "65532:65532" {
		t.Errorf("image config: entrypoint %v, architecture %s, user %s", cf.Config.Entrypoint, cf.Architecture, cf.Config.User)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != "v"+version || cf.Config.Labels["org.opencontainers.image.revision"] != revision {
		t.Errorf("image labels %v: want version v%s and revision %s", cf.Config.Labels, version, revision)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bin := filepath.Join(t.TempDir(), "metalgate")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatal("the layer has no /metalgate")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "metalgate" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		break
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("/metalgate is not an ELF binary: %v", err)
	}
	f.Close()
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "v"+version) || !strings.Contains(string(got), revision) {
		t.Errorf("metalgate version: %v\n%s\nwant v%s and %s", err, got, version, revision)
	}
}

func checkKrew(t *testing.T, out, version string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "metalgate.krew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Kind string `json:"kind"`
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("krew manifest: %v", err)
	}
	if m.Kind != "Plugin" || m.Spec.Version != "v"+version || len(m.Spec.Platforms) != 1 {
		t.Fatalf("krew manifest %+v", m)
	}
	p := m.Spec.Platforms[0]
	file := filepath.Join(out, filepath.Base(p.URI))
	if sum, err := fileSHA256(file); err != nil || sum != p.SHA256 {
		t.Errorf("krew manifest: %s sha256 %s, the file's %s (%v)", p.URI, p.SHA256, sum, err)
	}
	if !strings.Contains(p.URI, "/releases/download/v"+version+"/") {
		t.Errorf("krew uri %s: want the release page of v%s", p.URI, version)
	}
	dir := t.TempDir()
	untarGz(t, file, dir)
	if st, err := os.Stat(filepath.Join(dir, p.Bin)); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("the archive has no executable %s (%v)", p.Bin, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
		t.Errorf("the plugin archive has no LICENSE: %v", err)
	}
	if got, err := exec.Command(filepath.Join(dir, p.Bin), "version").CombinedOutput(); err != nil || !strings.Contains(string(got), "v"+version) {
		t.Errorf("kubectl-metalgate version: %v\n%s\nwant v%s", err, got, version)
	}
}

func checkSBOM(t *testing.T, file, version string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name    string `json:"name"`
			Version string `json:"versionInfo"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"github.com/metalgate/metalgate": "v" + version}
	for _, mod := range []string{"sigs.k8s.io/controller-runtime", "github.com/osrg/gobgp/v4", "k8s.io/client-go"} {
		want[mod] = goModVersion(t, mod)
	}
	have := map[string]string{}
	for _, p := range doc.Packages {
		have[p.Name] = p.Version
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	for mod, v := range want {
		if have[mod] != v {
			t.Errorf("SBOM: %s at %q, want %q", mod, have[mod], v)
		}
	}
}

// goModVersion is the version go.mod requires of mod.
func goModVersion(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}

func checkChart(t *testing.T, helm, pkg, version string) {
	t.Helper()
	meta, err := exec.Command(helm, "show", "chart", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("helm show chart: %v\n%s", err, meta)
	}
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(meta, &c); err != nil || c.Version != version || c.AppVersion != "v"+version {
		t.Fatalf("chart %+v (%v): want version %s, appVersion v%s", c, err, version, version)
	}
	env := testenv.Start(t, testenv.Options{})
	home := t.TempDir()
	cmd := exec.Command(helm, "install", "metalgate", pkg, "--kubeconfig", env.Kubeconfig,
		"--namespace", "metalgate-system", "--create-namespace")
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install of the release's chart: %v\n%s", err, b)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments("metalgate-system").Get(context.Background(), "metalgate-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/metalgate/metalgate:v"+version {
		t.Errorf("the installed controller runs %s, want ghcr.io/metalgate/metalgate:v%s", img, version)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	extract(t, tar.NewReader(f), dir)
}

func untarGz(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	extract(t, tar.NewReader(zr), dir)
}

func extract(t *testing.T, tr *tar.Reader, dir string) {
	t.Helper()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("archive entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
}
