package main

import (
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/metalgate/metalgate/internal/adminauth"
)

// adminGuard is the guard of a listener serving metrics and debug endpoints (docs/architecture.md,
// "Observability across processes"): open paths for anyone, loopback (kubectl port-forward),
// and callers whose bearer token the API server of cfg authorises for the path. Without cfg
// (static mode, no API server) only loopback gets past the open paths.
func adminGuard(cfg *rest.Config, open []string, reg prometheus.Registerer, log logr.Logger) (*adminauth.Guard, error) {
	opts := adminGuardOptions(open, reg, log)
	if cfg != nil {
		r, err := adminauth.NewKubeReviewer(cfg, nil)
		if err != nil {
			return nil, err
		}
		opts.Reviewer = r
	}
	return adminauth.New(opts)
}

// adminGuardOptions are the Guard options every subcommand uses (the manager-based ones hand
// them to adminauth.FilterProvider, which adds the reviewer).
func adminGuardOptions(open []string, reg prometheus.Registerer, log logr.Logger) adminauth.Options {
	if open == nil {
		open = []string{}
	}
	return adminauth.Options{OpenPaths: open, Registerer: reg, Logger: log.WithName("admin")}
}
