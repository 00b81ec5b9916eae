// Package imagebuild makes a container image from one static binary, without Docker and
// without a registry: an empty base and a single layer holding
//
//	/metalgate (or Options.Path)           the binary, mode 0755, the entrypoint
//	/etc/ssl/certs/ca-certificates.crt     a CA bundle (Options.CABundle)
//	/etc/passwd, /etc/group                root and the non-root user Options.UID "nonroot"
//	/tmp                                   mode 1777
//
// Layer and config timestamps are fixed, so the same inputs give the same image digest.
// hack/image (the lab's images) and hack/release (the published multi-arch image) use it.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Options describe one image.
type Options struct {
	Binary   string            // host path of the static binary
	Path     string            // absolute path of the binary inside the image (the entrypoint)
	CABundle string            // host path of the CA bundle; "" leaves it out
	Args     []string          // default arguments (image Cmd)
	UID      int               // user (and group) the image runs as
	Arch     string            // GOARCH of the binary: the config's architecture
	Labels   map[string]string // image config labels (org.opencontainers.image.*)
}

// Epoch is the modification time of every file in the layer and the image's creation time:
// reproducible digests.
var Epoch = time.Unix(0, 0).UTC()

// Image builds the image opts describe.
func Image(opts Options) (v1.Image, error) {
	if opts.Binary == "" || opts.Arch == "" {
		return nil, errors.New("the binary and its architecture are required")
	}
	if !path.IsAbs(opts.Path) {
		return nil, fmt.Errorf("path %q: must be absolute", opts.Path)
	}
	layerTar, err := Layer(opts)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "imagebuild " + filepath.Base(opts.Binary), Created: v1.Time{Time: Epoch}},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = opts.Arch
	cf.Created = v1.Time{Time: Epoch}
	cf.Config.Entrypoint = []string{opts.Path}
	cf.Config.Cmd = opts.Args
	cf.Config.User = fmt.Sprintf("%d:%d", opts.UID, opts.UID)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	if len(opts.Labels) > 0 {
		cf.Config.Labels = maps.Clone(opts.Labels)
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// Layer returns the uncompressed tar of the image's only layer.
func Layer(opts Options) ([]byte, error) {
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var ca []byte
	if opts.CABundle != "" {
		if ca, err = os.ReadFile(opts.CABundle); err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", opts.UID, opts.UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", opts.UID)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	// addDirs writes every parent directory of p once, in order, as real images do.
	addDirs := func(p string) error {
		var parents []string
		for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			mode := int64(0o755)
			if d == "tmp" {
				mode = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		return nil
	}
	type file struct {
		name string
		mode int64
		data []byte
	}
	files := []file{
		{"etc/passwd", 0o644, []byte(passwd)},
		{"etc/group", 0o644, []byte(group)},
		{strings.TrimPrefix(opts.Path, "/"), 0o755, bin},
	}
	if ca != nil {
		files = append(files, file{"etc/ssl/certs/ca-certificates.crt", 0o644, ca})
	}
	if err := addDirs("tmp/x"); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	for _, f := range files {
		if err := addDirs(f.name); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: Epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write layer header %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("write layer file %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}
