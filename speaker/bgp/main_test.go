package bgp

import (
	"os"
	"testing"
)

// TestMain turns the test binary into the speaker helper process of the FRR
// lab when helperEnv names its configuration (see frrlab_test.go).
func TestMain(m *testing.M) {
	if cfg := os.Getenv(helperEnv); cfg != "" {
		os.Exit(runHelper(cfg))
	}
	os.Exit(m.Run())
}
