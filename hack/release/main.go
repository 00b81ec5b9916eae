// Command release builds the artefacts of one metalgate release into a directory (make release
// VERSION=x.y.z; docs/release.md), without Docker and without a registry:
//
//	metalgate-image-<version>.oci.tar       the operator image for every -platforms entry, an
//	                                        OCI image layout (index → one manifest per platform)
//	                                        in a tar; the index is tagged v<version>
//	metalgate-<version>.tgz                 the Helm chart at this version (appVersion v<version>)
//	kubectl-metalgate_<version>_<os>_<arch>.tar.gz (.zip on Windows)
//	                                        the kubectl plugin per -plugin-platforms entry
//	metalgate.krew.yaml                     the krew plugin manifest for those archives
//	sbom.spdx.json                          SPDX 2.3: the Go modules linked into the binaries
//	SHA256SUMS                              the checksum of every file above
//
// Publishing them (the image and chart to an OCI registry, the archives to a release page, the
// manifest to a krew index) is the hosting CI's job: .github/workflows/release.yaml.
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/metalgate/metalgate/hack/image/imagebuild"
)

// options are the command-line flags.
type options struct {
	Version         string   // semantic version without the v: 1.2.3, 1.2.3-rc.1
	Revision        string   // the commit the release is built from
	Out             string   // output directory (emptied first)
	Root            string   // the repository's root
	Helm            string   // helm binary
	Platforms       []string // image platforms, linux/<arch>
	PluginPlatforms []string // kubectl plugin platforms, <os>/<arch>
	CABundle        string   // CA bundle put into the image
	Repository      string   // image repository the index is tagged for
	Source          string   // the project's URL (labels, krew manifest)
	Progress        io.Writer
}

const versionPkg = "github.com/metalgate/metalgate/cmd/metalgate/internal/version"

// semver is a semantic version 2.0.0 without a leading v.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func main() {
	o := options{Progress: os.Stdout}
	var platforms, plugins string
	flag.StringVar(&o.Version, "version", "", "Release version, x.y.z (semantic version; a leading v is dropped). Required.")
	flag.StringVar(&o.Revision, "revision", "", "Commit the release is built from. Required.")
	flag.StringVar(&o.Out, "out", "_out/release", "Output directory; emptied first.")
	flag.StringVar(&o.Root, "root", ".", "The repository's root.")
	flag.StringVar(&o.Helm, "helm", "helm", "The helm binary.")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Image platforms.")
	flag.StringVar(&plugins, "plugin-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64", "kubectl plugin platforms.")
	flag.StringVar(&o.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA bundle installed in the image.")
	flag.StringVar(&o.Repository, "repository", "ghcr.io/metalgate/metalgate", "Image repository.")
	flag.StringVar(&o.Source, "source", "https://github.com/metalgate/metalgate", "The project's URL.")
	flag.Parse()
	o.Platforms = splitList(platforms)
	o.PluginPlatforms = splitList(plugins)
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// platform is GOOS/GOARCH.
type platform struct{ OS, Arch string }

func parsePlatform(s string) (platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return platform{}, fmt.Errorf("platform %q: want <os>/<arch>", s)
	}
	return platform{os, arch}, nil
}

// tag is the image tag of a version: v<version>, "+" (not allowed in tags) as "-".
func tag(version string) string { return "v" + strings.ReplaceAll(version, "+", "-") }

func run(ctx context.Context, o options) error {
	o.Version = strings.TrimPrefix(o.Version, "v")
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("-version %q: not a semantic version x.y.z[-pre][+build]", o.Version)
	}
	if o.Revision == "" {
		return errors.New("-revision: required (the commit the release is built from)")
	}
	if len(o.Platforms) == 0 {
		return errors.New("-platforms: at least one")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	var err error
	if o.Root, err = filepath.Abs(o.Root); err != nil {
		return fmt.Errorf("-root: %w", err)
	}
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return fmt.Errorf("empty %s: %w", o.Out, err)
	}
	build := filepath.Join(o.Out, "build")
	if err := os.MkdirAll(build, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", build, err)
	}
	var binaries []string
	image, bins, err := buildImage(ctx, o, build)
	if err != nil {
		return err
	}
	binaries = append(binaries, bins...)
	fmt.Fprintf(o.Progress, ">> image %s\n", filepath.Base(image))
	plugins, bins, err := buildPlugins(ctx, o, build)
	if err != nil {
		return err
	}
	binaries = append(binaries, bins...)
	if err := writeKrewManifest(o, plugins); err != nil {
		return err
	}
	fmt.Fprintf(o.Progress, ">> chart\n")
	if out, err := command(ctx, o.Root, nil, o.Helm, "package", filepath.Join(o.Root, "charts", "metalgate"),
		"--version", o.Version, "--app-version", tag(o.Version), "-d", o.Out); err != nil {
		return fmt.Errorf("helm package: %w\n%s", err, out)
	}
	fmt.Fprintf(o.Progress, ">> SBOM\n")
	if err := writeSBOM(o, binaries); err != nil {
		return err
	}
	if err := os.RemoveAll(build); err != nil {
		return fmt.Errorf("remove %s: %w", build, err)
	}
	return writeChecksums(o.Out)
}

// command runs name in dir with env added and returns its combined output.
func command(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// goBuild builds pkg for p into out, static, with the release's version stamped in.
func goBuild(ctx context.Context, o options, p platform, pkg, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Revision=%s", versionPkg, "v"+o.Version, versionPkg, o.Revision)
	if pkg == "./cmd/kubectl-metalgate" {
		// The plugin cannot import cmd/metalgate's internal version package: its own variable.
		ldflags = fmt.Sprintf("-s -w -X main.version=%s", "v"+o.Version)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Progress, ">> go build %s %s/%s\n", pkg, p.OS, p.Arch)
	if b, err := command(ctx, o.Root, []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Arch},
		"go", "build", "-trimpath", "-ldflags", ldflags, "-o", abs, pkg); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", pkg, p.OS, p.Arch, err, b)
	}
	return nil
}

// buildImage builds cmd/metalgate per image platform and writes the multi-platform OCI layout
// as a tar; it returns the tar's path and the binaries.
func buildImage(ctx context.Context, o options, build string) (string, []string, error) {
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	var bins []string
	labels := map[string]string{
		"org.opencontainers.image.title":    "metalgate",
		"org.opencontainers.image.version":  "v" + o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	for _, s := range o.Platforms {
		p, err := parsePlatform(s)
		if err != nil {
			return "", nil, fmt.Errorf("-platforms: %w", err)
		}
		if p.OS != "linux" {
			return "", nil, fmt.Errorf("-platforms: %s: images are linux only", s)
		}
		bin := filepath.Join(build, "metalgate-linux-"+p.Arch)
		if err := goBuild(ctx, o, p, "./cmd/metalgate", bin); err != nil {
			return "", nil, err
		}
		bins = append(bins, bin)
		img, err := imagebuild.Image(imagebuild.Options{Binary: bin, Path: "/metalgate", CABundle: o.CABundle,
			UID: 65532, Arch: p.Arch, Labels: labels})
		if err != nil {
			return "", nil, fmt.Errorf("image for %s: %w", s, err)
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	dir := filepath.Join(build, "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", nil, fmt.Errorf("OCI layout: %w", err)
	}
	ref := o.Repository + ":" + tag(o.Version)
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag(o.Version),
		"io.containerd.image.name":          ref,
	})); err != nil {
		return "", nil, fmt.Errorf("OCI layout: %w", err)
	}
	out := filepath.Join(o.Out, "metalgate-image-"+o.Version+".oci.tar")
	if err := tarDir(dir, out); err != nil {
		return "", nil, err
	}
	return out, bins, nil
}

// tarDir writes the files under dir into a tar at out, sorted, with fixed times and owners:
// the same layout gives the same bytes.
func tarDir(dir, out string) error {
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			files = append(files, p)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	sort.Strings(files)
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: imagebuild.Epoch, Format: tar.FormatPAX, Mode: 0o644}
		if st.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		in.Close()
		if err != nil {
			return fmt.Errorf("write %s into %s: %w", rel, out, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close %s: %w", out, err)
	}
	return f.Close()
}

// pluginArchive is one platform's kubectl plugin archive.
type pluginArchive struct {
	Platform platform
	File     string // base name in the output directory
	Binary   string // the executable's name inside it
	SHA256   string
}

// buildPlugins builds and archives cmd/kubectl-metalgate per plugin platform, with LICENSE.
func buildPlugins(ctx context.Context, o options, build string) ([]pluginArchive, []string, error) {
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return nil, nil, fmt.Errorf("read LICENSE: %w", err)
	}
	var out []pluginArchive
	var bins []string
	for _, s := range o.PluginPlatforms {
		p, err := parsePlatform(s)
		if err != nil {
			return nil, nil, fmt.Errorf("-plugin-platforms: %w", err)
		}
		exe := "kubectl-metalgate"
		if p.OS == "windows" {
			exe += ".exe"
		}
		bin := filepath.Join(build, p.OS+"-"+p.Arch, exe)
		if err := goBuild(ctx, o, p, "./cmd/kubectl-metalgate", bin); err != nil {
			return nil, nil, err
		}
		bins = append(bins, bin)
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, nil, err
		}
		base := fmt.Sprintf("kubectl-metalgate_%s_%s_%s", o.Version, p.OS, p.Arch)
		files := []archived{{exe, 0o755, data}, {"LICENSE", 0o644, license}}
		if p.OS == "windows" {
			base += ".zip"
			err = writeZip(filepath.Join(o.Out, base), files)
		} else {
			base += ".tar.gz"
			err = writeTarGz(filepath.Join(o.Out, base), files)
		}
		if err != nil {
			return nil, nil, err
		}
		sum, err := fileSHA256(filepath.Join(o.Out, base))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, pluginArchive{Platform: p, File: base, Binary: exe, SHA256: sum})
	}
	return out, bins, nil
}

type archived struct {
	name string
	mode int64
	data []byte
}

func writeTarGz(out string, files []archived) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, a := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: a.name, Mode: a.mode, Size: int64(len(a.data)),
			ModTime: imagebuild.Epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(a.data); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

func writeZip(out string, files []archived) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, a := range files {
		h := &zip.FileHeader{Name: a.name, Method: zip.Deflate, Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)}
		h.SetMode(fs.FileMode(a.mode))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := w.Write(a.data); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeKrewManifest writes the krew plugin manifest (krew.sigs.k8s.io/v1alpha2 Plugin) naming
// each archive by its download URL on the release page and its checksum.
func writeKrewManifest(o options, archives []pluginArchive) error {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: metalgate
spec:
  version: v%s
  homepage: %s
  shortDescription: Inspect and migrate to metalgate (VIPs, announcers, proxies, Ingresses)
  description: |
    kubectl metalgate shows which node announces each load-balancer address, which proxy
    serves each Ingress and route and with which backends, checks pools and Gateways, and
    translates ingress-nginx Ingresses and MetalLB objects to metalgate's.
  platforms:
`, o.Version, o.Source)
	for _, a := range archives {
		fmt.Fprintf(&b, `  - selector:
      matchLabels:
        os: %s
        arch: %s
    uri: %s/releases/download/v%s/%s
    sha256: %s
    bin: %s
`, a.Platform.OS, a.Platform.Arch, o.Source, o.Version, a.File, a.SHA256, a.Binary)
	}
	return os.WriteFile(filepath.Join(o.Out, "metalgate.krew.yaml"), []byte(b.String()), 0o644)
}

// writeSBOM writes an SPDX 2.3 document listing the Go modules linked into the binaries (read
// from their embedded build information) with the version and go.sum hash of each.
func writeSBOM(o options, binaries []string) error {
	type extRef struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		SPDXID           string   `json:"SPDXID"`
		Name             string   `json:"name"`
		Version          string   `json:"versionInfo"`
		DownloadLocation string   `json:"downloadLocation"`
		FilesAnalyzed    bool     `json:"filesAnalyzed"`
		Comment          string   `json:"comment,omitempty"`
		ExternalRefs     []extRef `json:"externalRefs,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	mods := map[string]pkg{}
	var goVersion string
	for _, b := range binaries {
		bi, err := buildinfo.ReadFile(b)
		if err != nil {
			return fmt.Errorf("read build information of %s: %w", b, err)
		}
		goVersion = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			key := d.Path + "@" + d.Version
			if _, ok := mods[key]; ok {
				continue
			}
			p := pkg{Name: d.Path, Version: d.Version, DownloadLocation: "NOASSERTION", SPDXID: spdxID("go-" + key),
				ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + d.Path + "@" + d.Version}}}
			if d.Sum != "" {
				p.Comment = "go.sum " + d.Sum
			}
			mods[key] = p
		}
	}
	root := pkg{SPDXID: "SPDXRef-Package-metalgate", Name: "github.com/metalgate/metalgate", Version: "v" + o.Version,
		DownloadLocation: o.Source, Comment: "built with " + goVersion + " from " + o.Revision,
		ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/github.com/metalgate/metalgate@v" + o.Version}}}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "metalgate-v" + o.Version,
		"documentNamespace": o.Source + "/releases/v" + o.Version + "/sbom-" + o.Revision,
		"creationInfo":      map[string]any{"created": time.Now().UTC().Format(time.RFC3339), "creators": []string{"Tool: metalgate hack/release"}},
		"documentDescribes": []string{root.SPDXID},
	}
	pkgs := []pkg{root}
	rels := []rel{{"SPDXRef-DOCUMENT", "DESCRIBES", root.SPDXID}}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range mods {
			if !yield(k) {
				return
			}
		}
	}) {
		pkgs = append(pkgs, mods[k])
		rels = append(rels, rel{root.SPDXID, "DEPENDS_ON", mods[k].SPDXID})
	}
	doc["packages"], doc["relationships"] = pkgs, rels
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "sbom.spdx.json"), append(b, '\n'), 0o644)
}

// spdxID makes an SPDX identifier (letters, digits, "." and "-") of s.
func spdxID(s string) string { return "SPDXRef-" + notSPDX.ReplaceAllString(s, "-") }

var notSPDX = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// writeChecksums writes SHA256SUMS (sha256sum's format) of every file in dir.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
