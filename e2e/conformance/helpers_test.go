package conformance

import (
	"io/fs"
	"strings"
	"testing"

	upstream "sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// TestPreloadedOnly: the base manifests lose exactly the documents naming an image the lab
// does not hold (CoreDNS), keep every echo backend, and every other file of the suite is read
// through unchanged (the suite applies what every FS it is given holds, so the overlay must
// replace, not add).
func TestPreloadedOnly(t *testing.T) {
	base, dropped, err := preloadedOnly(upstream.Manifests, "base/manifests.yaml", preloadedImages)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || !strings.Contains(dropped[0], "Deployment gateway-conformance-infra/coredns") {
		t.Errorf("left out %v, want only the CoreDNS Deployment", dropped)
	}
	b, err := fs.ReadFile(base, "base/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "registry.k8s.io/coredns") {
		t.Error("the filtered base manifests still name the CoreDNS image")
	}
	orig, _ := fs.ReadFile(upstream.Manifests, "base/manifests.yaml")
	if got, want := strings.Count(string(b), preloadedImages[0]), strings.Count(string(orig), preloadedImages[0]); got != want || want == 0 {
		t.Errorf("echo-basic named %d times, want %d (every backend kept)", got, want)
	}
	other, err := fs.ReadFile(base, "tests/httproute-simple-same-namespace.yaml")
	if err != nil {
		t.Fatalf("a test manifest is not read through the overlay: %v", err)
	}
	if want, _ := fs.ReadFile(upstream.Manifests, "tests/httproute-simple-same-namespace.yaml"); string(other) != string(want) {
		t.Error("a test manifest changed through the overlay")
	}
	if _, _, err := preloadedOnly(upstream.Manifests, "base/missing.yaml", preloadedImages); err == nil {
		t.Error("a missing manifest gave no error")
	}
}

// TestFlagParsing: bad addresses and unknown features are refused with the flag named; an
// empty -supported-features means metalgate's own claim.
func TestFlagParsing(t *testing.T) {
	for _, tc := range []struct{ in, wantErr string }{
		{in: "100.64.0.1,not-an-ip", wantErr: `-usable-addresses: "not-an-ip" is not an IP address`},
		{in: "100.64.0.300", wantErr: `-usable-addresses: "100.64.0.300" is not an IP address`},
	} {
		if _, err := parseAddresses("-usable-addresses", tc.in); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("parseAddresses(%q) = %v, want %q", tc.in, err, tc.wantErr)
		}
	}
	got, err := parseAddresses("-usable-addresses", " 100.64.100.200 , ,2001:db8::1")
	if err != nil || len(got) != 2 || got[0].Value != "100.64.100.200" || got[1].Value != "2001:db8::1" {
		t.Errorf("parseAddresses = %+v, %v", got, err)
	}
	if _, err := claimedFeatures("Gateway,NoSuchFeature", nil); err == nil || !strings.Contains(err.Error(), `-supported-features: "NoSuchFeature"`) {
		t.Errorf("an unknown feature: %v", err)
	}
	claim := []features.FeatureName{features.SupportGateway}
	if set, err := claimedFeatures(" ", claim); err != nil || set.Len() != 1 || !set.Has(features.SupportGateway) {
		t.Errorf("empty flag: %v, %v; want the claim", set, err)
	}
}
