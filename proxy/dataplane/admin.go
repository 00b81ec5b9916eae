package dataplane

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminRoute is one more handler on the admin listener, e.g. Debug.Route().
type AdminRoute struct {
	Pattern string // an http.ServeMux pattern: "GET /debug/backends"
	Handler http.Handler
}

// The admin port checks bearer tokens with the API server (TokenReview, then
// SubjectAccessReview for the path), so the proxy's ServiceAccount may create both:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// AdminOpenPaths are the admin paths anyone may read: the kubelet's probes, which come from
// the node without a token. Everything else on the admin port (/metrics, /debug/*) is for
// loopback (kubectl port-forward, kubectl metalgate) and for callers whose bearer token the
// API server authorises for the path: cmd/metalgate serves AdminHandler behind an
// internal/adminauth Guard with these open paths (docs/proxy.md, "Admin port").
var AdminOpenPaths = []string{healthzPath, readyzPath}

const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
)

// AdminHandler serves /healthz (the process is up), /readyz (ready returns nil), /metrics
// (from g) and the extra routes. It belongs on its own port, away from client traffic, behind
// a guard that opens AdminOpenPaths only.
func AdminHandler(g prometheus.Gatherer, ready func() error, extra ...AdminRoute) http.Handler {
	mux := http.NewServeMux()
	for _, r := range extra {
		mux.Handle(r.Pattern, r.Handler)
	}
	mux.HandleFunc(healthzPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc(readyzPath, func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}
