package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("CERTS"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	opts := options{Binary: bin, Path: "/metalgate", Tag: "ghcr.io/metalgate/metalgate:dev", Out: out, CABundle: ca, UID: 65532, Args: []string{"controller"}}
	if err := run(opts); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(opts.Tag)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/metalgate" {
		t.Errorf("entrypoint = %v", got)
	}
	if cf.Config.User != "65532:65532" || cf.OS != "linux" || len(cf.Config.Cmd) != 1 {
		t.Errorf("config = user %q os %q cmd %v", cf.Config.User, cf.OS, cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]string{}
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
		files[h.Name] = string(b)
	}
	for f, want := range map[string]string{
		"metalgate":                         "#!binary",
		"etc/ssl/certs/ca-certificates.crt": "CERTS",
		"etc/passwd":                        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":                         "root:x:0:\nnonroot:x:65532:\n",
	} {
		if got, ok := files[f]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", f, got, ok, want)
		}
	}

	// Same inputs: the tarball is left alone.
	st1, _ := os.Stat(out)
	if err := run(opts); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(out)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("unchanged inputs rewrote the tarball")
	}
}
