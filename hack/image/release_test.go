package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestMetalgateImage builds the real operator image the way make image does (static
// cmd/metalgate, this builder, the host's CA bundle) and reads the tarball back as kind load
// image-archive and ctr images import do: the docker-save layout with the tag in
// manifest.json, one layer holding the static binary and the CA bundle, user 65532.
func TestMetalgateImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/metalgate; skipped with -short")
	}
	const caBundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("no CA bundle on this host (%v): install ca-certificates", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "metalgate")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../cmd/metalgate")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/metalgate: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "metalgate.tar")
	const ref = "ghcr.io/metalgate/metalgate:dev"
	// This command as make image runs it (bin/image-builder), built without the race detector:
	// it runs one step after the other, and under -race compressing the layer took half a minute.
	builder := filepath.Join(dir, "image-builder")
	if b, err := exec.Command("go", "build", "-o", builder, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/image: %v\n%s", err, b)
	}
	if b, err := exec.Command(builder, "-binary", bin, "-path", "/metalgate", "-tag", ref, "-o", out,
		"-ca-bundle", caBundle, "-uid", "65532").CombinedOutput(); err != nil {
		t.Fatalf("image-builder: %v\n%s", err, b)
	}

	// manifest.json names the tag: what kind and ctr import it as.
	manifest := readTarFile(t, out, "manifest.json")
	var m []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != ref || len(m[0].Layers) != 1 {
		t.Fatalf("manifest.json = %s, want one image tagged %s with one layer", manifest, ref)
	}

	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("tarball.ImageFromPath: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/metalgate" {
		t.Errorf("entrypoint = %v, want [/metalgate]", cf.Config.Entrypoint)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d (%v), want 1 on an empty base", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name], modes[h.Name] = b, h.Mode
	}
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(files["metalgate"], want) {
		t.Errorf("/metalgate in the layer is not the built binary (%d bytes, want %d)", len(files["metalgate"]), len(want))
	}
	if modes["metalgate"]&0o111 == 0 {
		t.Errorf("/metalgate mode %o is not executable", modes["metalgate"])
	}
	ca, _ := os.ReadFile(caBundle)
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"], ca) {
		t.Error("the CA bundle is missing from the layer or differs from the host's")
	}
	if !bytes.Contains(files["etc/passwd"], []byte(":65532:65532:")) {
		t.Errorf("/etc/passwd has no user 65532: %q", files["etc/passwd"])
	}
	// Static: no program interpreter (the image has no libc).
	f, err := elf.NewFile(bytes.NewReader(files["metalgate"]))
	if err != nil {
		t.Fatalf("/metalgate is not an ELF binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/metalgate is dynamically linked; the image has an empty base")
		}
	}
}

// readTarFile returns one file of the outer (docker save) tarball.
func readTarFile(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in %s: %v", name, path, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
