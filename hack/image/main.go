// Command image builds a container image tarball from one static binary, without Docker and
// without a registry.
//
// The image is hack/image/imagebuild's (an empty base, one layer with the binary, the build
// host's CA bundle (-ca-bundle), /etc/passwd with the non-root user 65532, /tmp) and runs as
// user 65532. The tarball is written with go-containerregistry's
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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/metalgate/metalgate/hack/image/imagebuild"
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
	img, err := imagebuild.Image(imagebuild.Options{Binary: opts.Binary, Path: opts.Path, CABundle: opts.CABundle,
		Args: opts.Args, UID: opts.UID, Arch: runtime.GOARCH})
	if err != nil {
		return err
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

// layoutVersion changes whenever imagebuild changes the layer or the config, so images
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
