package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CRDsExcept are the CRD manifests of dir (relative to the repository root, as GatewayCRDs,
// or absolute) but those of the named resources (plural, as "grpcroutes"; a manifest is
// named <group>_<resource>.yaml), as absolute file paths for Options.CRDs: an API server
// that lacks some kinds, as an older install would. Naming a resource dir has no manifest
// of is an error, so a renamed file cannot leave the kind in unnoticed.
func CRDsExcept(dir string, resources ...string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD directory: %w", err)
	}
	var out []string
	left := slices.Clone(resources)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		if i := slices.IndexFunc(left, func(r string) bool { return strings.HasSuffix(name, "_"+r+".yaml") }); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("no CRD manifest in %s for %v", dir, left)
	}
	return out, nil
}
