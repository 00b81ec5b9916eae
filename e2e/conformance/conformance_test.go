package conformance

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	upstream "sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/metalgate/metalgate/controllers/gateway/claim"
)

// Flags of this package; the suite's own flags (-gateway-class, -report-output, -run-test,
// -skip-tests, -supported-features, -version, …) are registered by its flags package.
var (
	usableAddresses   = flag.String("usable-addresses", "", "Comma-separated IP addresses a Gateway may request (GatewayStaticAddresses): inside a lab pool, free.")
	unusableAddresses = flag.String("unusable-addresses", "", "Comma-separated IP addresses a Gateway may not get (GatewayStaticAddresses): in no pool.")
	profiles          = flag.String("profiles", string(suite.GatewayHTTPConformanceProfileName)+","+string(suite.GatewayGRPCConformanceProfileName)+","+string(suite.GatewayTLSConformanceProfileName), "Comma-separated conformance profiles to run.")
)

// preloadedImages are the images the lab nodes hold (e2e/lab.ConformanceEchoImage): manifest
// documents naming any other image are left out, because the nodes never pull.
var preloadedImages = []string{"gcr.io/k8s-staging-gateway-api/echo-basic:v20260204-monthly-2026.01-60-g28382302"}

// TestConformance runs the suite with the features metalgate claims
// (claim.Features, or -supported-features for a development loop). It needs a lab
// with metalgate deployed, KUBECONFIG pointing at it, and must run inside the lab client's
// network namespace: hack/conformance.sh does all three.
func TestConformance(t *testing.T) {
	if *flags.GatewayClassName == "gateway-conformance" {
		t.Skip("needs a lab: run `make conformance` (root, Linux), which sets -gateway-class and runs this test in the lab client's network namespace")
	}
	opts := upstream.DefaultOptions(t)

	claimed, err := claimedFeatures(*flags.SupportedFeatures, claim.Features())
	if err != nil {
		t.Fatal(err)
	}
	opts.SupportedFeatures = claimed
	opts.ConformanceProfiles = suite.ParseConformanceProfiles(*profiles)
	if opts.UsableNetworkAddresses, err = parseAddresses("-usable-addresses", *usableAddresses); err != nil {
		t.Fatal(err)
	}
	if opts.UnusableNetworkAddresses, err = parseAddresses("-unusable-addresses", *unusableAddresses); err != nil {
		t.Fatal(err)
	}
	base, dropped, err := preloadedOnly(upstream.Manifests, "base/manifests.yaml", preloadedImages)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dropped {
		t.Logf("base manifests: left out %s (its image is not in the lab; no claimed feature uses it)", d)
	}
	opts.ManifestFS = []fs.FS{base}
	// The lab shares two cores with the controller, three kubelets and every Gateway's
	// proxy: the suite's defaults are kept except the wait for the base pods (14 echo
	// backends start at once on a cold lab).
	opts.TimeoutConfig.NamespacesMustBeReady = 6 * time.Minute

	upstream.RunConformanceWithOptions(t, opts)
}

// claimedFeatures is the set the suite runs with: the -supported-features flag when set (a
// development loop), else metalgate's claim. An unknown name is an error.
func claimedFeatures(flagValue string, claim []features.FeatureName) (sets.Set[features.FeatureName], error) {
	if strings.TrimSpace(flagValue) == "" {
		return sets.New(claim...), nil
	}
	known := features.SetsToNamesSet(features.AllFeatures)
	set := suite.ParseSupportedFeatures(flagValue)
	for f := range set {
		if !known.Has(f) {
			return nil, fmt.Errorf("-supported-features: %q is not a feature of this release", f)
		}
	}
	return set, nil
}

// parseAddresses turns a comma-separated list of IP addresses into Gateway spec addresses.
func parseAddresses(name, v string) ([]v1beta1.GatewaySpecAddress, error) {
	var out []v1beta1.GatewaySpecAddress
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an IP address: %w", name, s, err)
		}
		out = append(out, v1beta1.GatewaySpecAddress{Type: ptr.To(v1beta1.IPAddressType), Value: a.String()})
	}
	return out, nil
}

// preloadedOnly returns src with the file name replaced by a copy without the YAML documents
// that name an image outside images, and what it left out ("Kind namespace/name").
func preloadedOnly(src fs.FS, name string, images []string) (fs.FS, []string, error) {
	b, err := fs.ReadFile(src, name)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	var kept [][]byte
	var dropped []string
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if img, ok := foreignImage(doc, images); ok {
			dropped = append(dropped, describe(doc)+" (image "+img+")")
			continue
		}
		kept = append(kept, doc)
	}
	return overlay{FS: src, name: name, file: fstest.MapFS{name: &fstest.MapFile{Data: bytes.Join(kept, []byte("\n---\n"))}}}, dropped, nil
}

// overlay is src with one file replaced. The suite reads a manifest from every FS it is given
// and applies them all, so the filtered file must replace the original, not sit beside it.
type overlay struct {
	fs.FS
	name string
	file fstest.MapFS
}

func (o overlay) Open(name string) (fs.File, error) {
	if name == o.name {
		return o.file.Open(name)
	}
	return o.FS.Open(name)
}

// foreignImage returns the first image reference in doc that is not one of images.
func foreignImage(doc []byte, images []string) (string, bool) {
	for _, line := range strings.Split(string(doc), "\n") {
		f := strings.Fields(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "-")))
		if len(f) == 2 && f[0] == "image:" && !slices.Contains(images, f[1]) {
			return f[1], true
		}
	}
	return "", false
}

// describe names a manifest document by its kind, namespace and name (first occurrences).
func describe(doc []byte) string {
	var kind, ns, name string
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case kind == "" && strings.HasPrefix(line, "kind:"):
			kind = strings.TrimSpace(strings.TrimPrefix(line, "kind:"))
		case ns == "" && strings.HasPrefix(line, "  namespace:"):
			ns = strings.TrimSpace(strings.TrimPrefix(line, "  namespace:"))
		case name == "" && strings.HasPrefix(line, "  name:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "  name:"))
		}
	}
	return kind + " " + ns + "/" + name
}
