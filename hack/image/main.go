// Command image builds a container image tarball from one static binary, without Docker and
// without a registry.
//
// The image has an empty base and a single layer that holds:
//
//	/metalgate (or -path)                  the binary, mode 0755, the entrypoint
//	/etc/ssl/certs/ca-certificates.crt     the CA bundle of the build host (-ca-bundle)
//	/etc/passwd, /etc/group                root and the non-root user 65532 "nonroot"
//	/tmp                                   mode 1777
//
// and runs as user 65532. The tarball is written with go-containerregistry's
// tarball.WriteToFile (the `docker save` layout), which both `ctr images import` and
// `kind load image-archive` accept. Layer timestamps are fixed, so the same binary gives the
// same image digest. When the output exists and was built from the same inputs (recorded in
// <output>.inputs), it is left alone, so its timestamp and checksum change only when the image
// does.
//
// Usage:
//
//	go run ./hack/image -binary bin/metalgate -tag ghcr.io/metalgate/metalgate:dev -o _out/images/metalgate.tar
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// options are the command-line flags.
type options struct {
	Binary   string   // host path of the static binary
	Path     string   // path of the binary inside the image
	Tag      string   // image reference written into the tarball
	Out      string   // output tarball
	CABundle string   // host path of the CA bundle; "" leaves it out
	Args     []string // default arguments (image Cmd)
	UID      int      // user the image runs as
}

// epoch is the modification time of every file in the layer: reproducible digests.
var epoch = time.Unix(0, 0).UTC()

func main() {
	var opts options
	var args string
	flag.StringVar(&opts.Binary, "binary", "", "Static binary to put into the image (required).")
	flag.StringVar(&opts.Path, "path", "/metalgate", "Absolute path of the binary inside the image; it is the entrypoint.")
	flag.StringVar(&opts.Tag, "tag", "", "Image reference, e.g. ghcr.io/metalgate/metalgate:dev (required).")
	flag.StringVar(&opts.Out, "o", "", "Output tarball (required).")
	flag.StringVar(&opts.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to install at /etc/ssl/certs/ca-certificates.crt; empty to leave it out.")
	flag.StringVar(&args, "args", "", "Default arguments (image Cmd), space separated.")
	flag.IntVar(&opts.UID, "uid", 65532, "User (and group) the image runs as.")
	flag.Parse()
	if args != "" {
		opts.Args = strings.Fields(args)
	}
	if err := run(opts); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	if opts.Binary == "" || opts.Tag == "" || opts.Out == "" {
		return errors.New("-binary, -tag and -o are required")
	}
	if !path.IsAbs(opts.Path) {
		return fmt.Errorf("-path %q: must be absolute", opts.Path)
	}
	tag, err := name.NewTag(opts.Tag)
	if err != nil {
		return fmt.Errorf("parse tag %q: %w", opts.Tag, err)
	}
	key, err := inputsKey(opts)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(opts.Out + ".inputs"); err == nil && string(old) == key {
		if _, err := os.Stat(opts.Out); err == nil {
			fmt.Printf("%s %s up to date\n", opts.Out, tag)
			return nil
		}
	}
	layerTar, err := buildLayer(opts)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "hack/image " + filepath.Base(opts.Binary), Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{opts.Path}
	cf.Config.Cmd = opts.Args
	cf.Config.User = fmt.Sprintf("%d:%d", opts.UID, opts.UID)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(opts.Out), 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	// Write next to the target and rename, so a reader never sees half a tarball.
	tmp := opts.Out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", opts.Out, err)
	}
	if err := os.Rename(tmp, opts.Out); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image digest: %w", err)
	}
	if err := os.WriteFile(opts.Out+".inputs", []byte(key), 0o644); err != nil {
		return fmt.Errorf("record inputs: %w", err)
	}
	fmt.Printf("%s %s %s\n", opts.Out, tag, digest)
	return nil
}

// layoutVersion changes whenever buildLayer or the config written by run change, so images
// built by an older version of this program are rebuilt.
const layoutVersion = "1"

// inputsKey is a digest of everything the image is made of.
func inputsKey(opts options) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%q\x00%s\x00", layoutVersion, opts.Path, opts.Tag, opts.UID, opts.Args, runtime.GOARCH)
	for _, f := range []string{opts.Binary, opts.CABundle} {
		if f == "" {
			continue
		}
		in, err := os.Open(f)
		if err != nil {
			return "", fmt.Errorf("read input: %w", err)
		}
		_, err = io.Copy(h, in)
		in.Close()
		if err != nil {
			return "", fmt.Errorf("read input %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

// buildLayer returns the uncompressed tar of the image's only layer.
func buildLayer(opts options) ([]byte, error) {
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
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
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
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}
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
