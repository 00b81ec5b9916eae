package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

// CRD directories, relative to the repository root, for Options.CRDs.
const (
	// MetalgateCRDs are the generated CRDs of api/v1alpha1.
	MetalgateCRDs = "config/crd/bases"
	// GatewayCRDs are the Gateway API CRDs config/ installs.
	GatewayCRDs = "config/gateway-api/crds"
)

// Options say what the API server holds. The zero value is a bare API server (RBAC authorizer
// on, as envtest starts it) with no CRDs and single-stack Services.
type Options struct {
	// CRDs are directories of CRD manifests, or manifests (CRDsExcept), relative to the
	// repository root (MetalgateCRDs, GatewayCRDs) or absolute; each must exist.
	CRDs []string
	// DualStack gives Services a cluster IP range of each family (10.0.0.0/16 and
	// fd00:10:96::/112), for dual-stack and IPv6 Services.
	DualStack bool
	// Scheme is the scheme of Env.Client. Defaults to client-go's built-in types plus
	// metalgate's v1alpha1.
	Scheme *runtime.Scheme
}

// Env is a running API server.
type Env struct {
	// Config is an admin's rest config; its client-side rate limit (500 QPS, burst 1000) is
	// high enough that tests are never throttled by it.
	Config *rest.Config
	// Client is an admin client with Options.Scheme.
	Client client.Client
	// Scheme is the scheme of Client.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of a kubeconfig file for the admin, for commands under test.
	Kubeconfig string

	assets string
	env    *envtest.Environment
	tmp    string
}

// Start starts an API server for one test and stops it when the test ends. Without
// KUBEBUILDER_ASSETS it skips the test, saying why and how to run it; with KUBEBUILDER_ASSETS
// set but unusable it fails the test.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if reason := SkipReason(); reason != "" {
		t.Skip(reason)
	}
	e, err := start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stop API server: %v", err)
		}
	})
	return e
}

// Main is TestMain for a package whose tests share one API server: it starts the server,
// calls setup (which keeps the Env and creates what every test needs), runs the tests and
// stops the server; it returns the exit code for os.Exit. Without KUBEBUILDER_ASSETS it runs
// the tests without a server and without calling setup; each test calls Need on the nil Env
// it kept and is skipped, saying why.
func Main(m *testing.M, opts Options, setup func(*Env) error) int {
	if SkipReason() != "" {
		return m.Run()
	}
	e, err := start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop API server:", err)
		}
	}()
	if err := setup(e); err != nil {
		fmt.Fprintln(os.Stderr, "set up the API server for the tests:", err)
		return 1
	}
	return m.Run()
}

// Need skips the test when e is nil: the package's TestMain (Main) had no KUBEBUILDER_ASSETS.
func (e *Env) Need(t testing.TB) {
	t.Helper()
	if e == nil {
		t.Skip(SkipReason())
	}
}

// Kubectl returns the path of the kubectl beside the API server, failing the test when
// KUBEBUILDER_ASSETS has none.
func (e *Env) Kubectl(t testing.TB) string {
	t.Helper()
	p := filepath.Join(e.assets, "kubectl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("KUBEBUILDER_ASSETS=%s has no kubectl (make kube-bin builds it): %v", e.assets, err)
	}
	return p
}

// Stop stops the API server and removes its kubeconfig; Start calls it when the test ends.
func (e *Env) Stop() error {
	return errors.Join(e.env.Stop(), os.RemoveAll(e.tmp))
}

// SkipReason is why API-server tests are skipped here, or "" when KUBEBUILDER_ASSETS is set.
func SkipReason() string {
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		return ""
	}
	dir := "bin/k8s-<version>"
	if v := kubeVersion(); v != "" {
		dir = "bin/k8s-" + v
	}
	return "needs a real kube-apiserver + etcd and KUBEBUILDER_ASSETS is not set: run 'make test-integration', " +
		"or 'make kube-bin' and then KUBEBUILDER_ASSETS=$PWD/" + dir + " go test (from the repository root)"
}

// startTimeout is how long kube-apiserver and etcd may take to start: envtest's 20s is not
// enough on a loaded machine (2 cores shared with labs and builds: kube-apiserver took longer
// than that five times in a row at load average 30).
const startTimeout = 3 * time.Minute

func start(opts Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s (make kube-bin builds it): %w", assets, bin, err)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("scheme: %w", err)
		}
		if err := v1alpha1.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("scheme: %w", err)
		}
	}
	env := &envtest.Environment{Scheme: scheme, ErrorIfCRDPathMissing: true}
	for _, dir := range opts.CRDs {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, dir)
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = startTimeout
	}
	if opts.DualStack {
		env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16,fd00:10:96::/112")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver + etcd (KUBEBUILDER_ASSETS=%s): %w", assets, err)
	}
	e := &Env{Config: cfg, Scheme: scheme, assets: assets, env: env}
	fail := func(err error) (*Env, error) { return nil, errors.Join(err, e.Stop()) }
	cfg.QPS, cfg.Burst = 500, 1000
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	if e.tmp, err = os.MkdirTemp("", "testenv-"); err != nil {
		return fail(fmt.Errorf("kubeconfig: %w", err))
	}
	e.Kubeconfig = filepath.Join(e.tmp, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		return fail(fmt.Errorf("kubeconfig: %w", err))
	}
	return e, nil
}

// repoRoot is the directory of go.mod above the working directory (a test runs in its
// package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

var kubeVersionLine = regexp.MustCompile(`(?m)^KUBE_VERSION\s*:?=\s*(\S+)`)

// kubeVersion is the Makefile's KUBE_VERSION (the assets make kube-bin builds), or "".
func kubeVersion() string {
	root, err := repoRoot()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return ""
	}
	if m := kubeVersionLine.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}
