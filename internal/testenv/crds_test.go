package testenv

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCRDsExcept: the Gateway API manifests without GRPCRoute's are all the others, as
// absolute paths; a resource without a manifest is an error.
func TestCRDsExcept(t *testing.T) {
	all, err := CRDsExcept(GatewayCRDs)
	if err != nil {
		t.Fatal(err)
	}
	some, err := CRDsExcept(GatewayCRDs, "grpcroutes")
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != len(all)-1 || len(some) == 0 {
		t.Fatalf("%d manifests without grpcroutes, %d with", len(some), len(all))
	}
	for _, f := range some {
		if !filepath.IsAbs(f) || strings.Contains(f, "grpcroutes") || !slices.Contains(all, f) {
			t.Errorf("manifest %s", f)
		}
	}
	if _, err := CRDsExcept(GatewayCRDs, "grpcroute"); err == nil || !strings.Contains(err.Error(), "grpcroute") {
		t.Errorf("a resource without a manifest: error %v, want one naming it", err)
	}
}
