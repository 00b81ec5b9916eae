package adminauth

import (
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// FilterProvider returns a controller-runtime metrics server FilterProvider that puts one
// Guard (made from opts, with a KubeReviewer of the manager's config unless opts.Reviewer is
// set) in front of /metrics and every extra handler. It stands in for
// sigs.k8s.io/controller-runtime/pkg/metrics/filters.WithAuthenticationAndAuthorization, which
// has no loopback bypass (the kubectl plugin reaches the controller through port-forward, from
// loopback; opts.HostNetwork turns the bypass off, as the speaker needs),
// counts no refusals, and logs every one.
func FilterProvider(opts Options) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		if opts.Reviewer == nil {
			r, err := NewKubeReviewer(cfg, httpClient)
			if err != nil {
				return nil, err
			}
			opts.Reviewer = r
		}
		g, err := New(opts)
		if err != nil {
			return nil, err
		}
		return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return g.Wrap(h), nil }, nil
	}
}
