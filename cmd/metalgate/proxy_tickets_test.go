package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/internal/testenv"
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

// TestProxiesShareTicketKeys runs two proxies (the command, as `metalgate proxy` runs) against
// a real API server with one --tls-ticket-key-secret: the first creates the Secret, and a
// client's TLS session made at one proxy resumes at the other, on TLS 1.2 and 1.3.
func TestProxiesShareTicketKeys(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "edge"}}); err != nil {
		t.Fatal(err)
	}
	start := func(name string) string {
		addr := freeAddr(t)
		var opts proxyOptions
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		opts.bind(fs)
		if err := fs.Parse([]string{"--kubeconfig", env.Kubeconfig, "--http-bind-address", "0", "--https-bind-address", addr,
			"--admin-bind-address", "0", "--leader-elect=false", "--affinity-key-secret", "-", "--shutdown-delay", "0",
			"--tls-ticket-key-secret", "edge/tickets"}); err != nil {
			t.Fatal(err)
		}
		opts.registry = prometheus.NewRegistry() // two proxies in one process
		rctx, cancel := context.WithCancel(logr.NewContext(ctx, testenv.Logger(t, "proxy "+name)))
		done := make(chan error, 1)
		go func() { done <- runProxy(rctx, opts) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("proxy %s returned %v", name, err)
			}
		})
		return addr
	}
	a, b := start("a"), start("b")
	get := func(addr string, version uint16, cache tls.ClientSessionCache) (int, bool, error) {
		tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{ServerName: "x.example", InsecureSkipVerify: true, //nolint:gosec // the default certificate is not what is tested
			MinVersion: version, MaxVersion: version, ClientSessionCache: cache}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/")
		if err != nil {
			return 0, false, err
		}
		resp.Body.Close()
		return resp.StatusCode, resp.TLS.DidResume, nil
	}
	// Both proxies have their first table (404: no route, rather than 503 "no routing table
	// yet") and have read the keys: the Secret exists, and each resumes its own sessions.
	for _, addr := range []string{a, b} {
		testenv.Eventually(t, 30*time.Second, "proxy at "+addr+" serves and resumes", func() error {
			cache := tls.NewLRUClientSessionCache(1)
			for i := range 2 {
				code, resumed, err := get(addr, tls.VersionTLS13, cache)
				if err != nil {
					return err
				}
				if code != http.StatusNotFound || resumed != (i == 1) {
					return fmt.Errorf("connection %d: %d, resumed %t", i+1, code, resumed)
				}
			}
			return nil
		})
	}
	s, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Secrets("edge").Get(ctx, "tickets", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ticket key Secret: %v", err)
	}
	if len(s.Data) != 1 {
		t.Errorf("the ticket key Secret holds %d entries, want the one key", len(s.Data))
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			cache := tls.NewLRUClientSessionCache(1)
			if _, resumed, err := get(a, version, cache); err != nil || resumed {
				t.Fatalf("first connection: %v, resumed %t", err, resumed)
			}
			if _, resumed, err := get(b, version, cache); err != nil || !resumed {
				t.Fatalf("the other proxy: %v, resumed %t; want the session made at the first resumed", err, resumed)
			}
		})
	}
}
