package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// TestTicketKeeper pins which proxies share TLS session ticket keys and through which
// Secret: an Ingress proxy by default through <pod namespace>/metalgate-proxy-tls-tickets; a
// Gateway proxy, --static-config, "-" and a pod without POD_NAMESPACE keep keys of their own
// unless a Secret is named; the flags' policy reaches the Keeper.
func TestTicketKeeper(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		podNS     string
		opts      proxyOptions
		want      string // the Secret, "" for none
		wantError string
	}{
		{name: "Ingress proxy", podNS: "edge", want: "edge/metalgate-proxy-tls-tickets"},
		{name: "Ingress proxy, no POD_NAMESPACE", want: ""},
		{name: "named", podNS: "edge", opts: proxyOptions{TicketKeySecret: "keys/tickets"}, want: "keys/tickets"},
		{name: "off", podNS: "edge", opts: proxyOptions{TicketKeySecret: "-"}, want: ""},
		{name: "Gateway proxy", podNS: "metalgate-system", opts: proxyOptions{Gateway: "infra/gw"}, want: ""},
		{name: "Gateway proxy, named", podNS: "metalgate-system", opts: proxyOptions{Gateway: "infra/gw", TicketKeySecret: "infra/gw-tickets"}, want: "infra/gw-tickets"},
		{name: "static config", podNS: "edge", opts: proxyOptions{StaticConfig: "x.yaml"}, want: ""},
		{name: "a name with two slashes", opts: proxyOptions{TicketKeySecret: "a/b/c"}, wantError: `--tls-ticket-key-secret "a/b/c": want namespace/name or -`},
		{name: "no name", opts: proxyOptions{TicketKeySecret: "a/"}, wantError: `--tls-ticket-key-secret "a/": want namespace/name or -`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.podNS)
			opts := tc.opts
			opts.Kubeconfig = kubeconfig
			opts.TicketKeyRotation, opts.TicketKeyLifetime = 30*time.Minute, 6*time.Hour
			k, err := ticketKeeper(opts, prometheus.NewRegistry(), logr.Discard())
			if tc.wantError != "" {
				if err == nil || err.Error() != tc.wantError {
					t.Fatalf("error %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && k != nil:
				t.Fatalf("shares keys through %s, want keys of its own", k.Secret)
			case tc.want == "":
			case k == nil:
				t.Fatalf("keys of its own, want them shared through %s", tc.want)
			case k.Secret.String() != tc.want:
				t.Fatalf("Secret %s, want %s", k.Secret, tc.want)
			case k.Policy.Rotation != 30*time.Minute || k.Policy.Lifetime != 6*time.Hour || k.Policy.Promote != ticketKeyPromote || k.Poll != ticketKeyPoll:
				t.Fatalf("policy %+v, poll %s; want the flags' rotation and lifetime", k.Policy, k.Poll)
			case k.Metrics == nil:
				t.Fatal("no metrics")
			}
		})
	}
}
