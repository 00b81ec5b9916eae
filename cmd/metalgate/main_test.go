package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/dataplane"
)

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "no command", args: nil, wantCode: 2, wantErr: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate"`},
		{name: "version", args: []string{"version"}, wantCode: 0, wantOut: "metalgate v0.0.0-dev revision unknown go1."},
		{name: "help", args: []string{"help"}, wantCode: 0, wantOut: "metalgate controller"},
		{name: "bad flag", args: []string{"controller", "--no-such-flag"}, wantCode: 2, wantErr: "flag provided but not defined: -no-such-flag"},
		{name: "stray argument", args: []string{"controller", "extra"}, wantCode: 2, wantErr: `unexpected argument "extra"`},
		{name: "controller help", args: []string{"controller", "-h"}, wantCode: 0, wantErr: "-lb-class"},
		// Bad controller tuning names the flag before anything connects.
		{name: "no service workers", args: []string{"controller", "--concurrent-service-syncs", "0"}, wantCode: 1, wantErr: "--concurrent-service-syncs 0: want at least 1"},
		{name: "zero QPS", args: []string{"controller", "--kube-api-qps", "0"}, wantCode: 1, wantErr: "--kube-api-qps 0: want a positive rate"},
		{name: "zero burst", args: []string{"controller", "--kube-api-burst", "0"}, wantCode: 1, wantErr: "--kube-api-burst 0: want at least 1"},
		{name: "missing kubeconfig", args: []string{"controller", "--kubeconfig", "/nonexistent/kubeconfig"}, wantCode: 1, wantErr: "load kubeconfig /nonexistent/kubeconfig"},
		// Bad proxy flags name the flag and the reason before anything starts.
		{name: "PROXY protocol from anyone", args: []string{"proxy", "--proxy-protocol-https", "required"}, wantCode: 1, wantErr: "set --proxy-protocol-from"},
		{name: "PROXY protocol mode", args: []string{"proxy", "--proxy-protocol-http", "yes", "--proxy-protocol-from", "10.0.0.0/8"}, wantCode: 1, wantErr: `--proxy-protocol-http "yes": want off, optional or required`},
		{name: "PROXY protocol source", args: []string{"proxy", "--proxy-protocol-http", "optional", "--proxy-protocol-from", "lb.example"}, wantCode: 1, wantErr: `--proxy-protocol-from "lb.example"`},
		{name: "escaped slashes", args: []string{"proxy", "--escaped-slashes", "maybe"}, wantCode: 1, wantErr: `--escaped-slashes "maybe"`},
		{name: "public port", args: []string{"proxy", "--public-https-port", "70000"}, wantCode: 1, wantErr: "--public-https-port 70000: want 1 to 65535"},
		{name: "auth check wait", args: []string{"proxy", "--auth-check-wait", "0s"}, wantCode: 1, wantErr: "--auth-check-wait 0s: want more than 0"},
		{name: "auth check slots", args: []string{"proxy", "--auth-check-slots", "-1"}, wantCode: 1, wantErr: "--auth-check-slots -1: want 0"},
		{name: "auth check nice below 0", args: []string{"proxy", "--auth-check-nice", "-1"}, wantCode: 1, wantErr: "--auth-check-nice -1: want 0 (the proxy's own priority) to 19"},
		{name: "auth check nice past 19", args: []string{"proxy", "--auth-check-nice", "20"}, wantCode: 1, wantErr: "--auth-check-nice 20: want 0 (the proxy's own priority) to 19"},
		{name: "negative shutdown delay", args: []string{"proxy", "--shutdown-delay", "-1s"}, wantCode: 1, wantErr: "--shutdown-delay -1s: want 0 (none) or more"},
		{name: "no shutdown timeout", args: []string{"proxy", "--shutdown-timeout", "0s"}, wantCode: 1, wantErr: "--shutdown-timeout 0s: want more than 0"},
		{name: "renew deadline past the lease", args: []string{"proxy", "--leader-election-renew-deadline", "20s"}, wantCode: 1, wantErr: "--leader-election-lease-duration 15s: want more than --leader-election-renew-deadline (20s)"},
		{name: "renew deadline within a retry", args: []string{"proxy", "--leader-election-retry-period", "9s"}, wantCode: 1, wantErr: "--leader-election-renew-deadline 10s: want more than 1.2 × --leader-election-retry-period (9s)"},
		{name: "OTLP endpoint without a scheme", args: []string{"proxy", "--otlp-endpoint", "collector:4318"}, wantCode: 1, wantErr: "--otlp-endpoint, --otlp-sample-ratio: otlp endpoint \"collector:4318\": the scheme must be http or https"},
		{name: "OTLP ratio above 1", args: []string{"proxy", "--otlp-endpoint", "http://collector:4318", "--otlp-sample-ratio", "2"}, wantCode: 1, wantErr: "otlp sample ratio 2: must be between 0 and 1"},
		{name: "ticket key rotation within the promotion delay", args: []string{"proxy", "--tls-ticket-key-rotation", "2m"}, wantCode: 1, wantErr: "--tls-ticket-key-rotation 2m0s: want more than 2m0s"},
		{name: "ticket key lifetime shorter than a rotation", args: []string{"proxy", "--tls-ticket-key-lifetime", "1h"}, wantCode: 1, wantErr: "--tls-ticket-key-rotation, --tls-ticket-key-lifetime: lifetime 1h0m0s: want at least the rotation period plus the promotion delay (1h2m0s)"},
		{name: "ticket keys for too long", args: []string{"proxy", "--tls-ticket-key-rotation", "5m", "--tls-ticket-key-lifetime", "24h"}, wantCode: 1, wantErr: "lifetime 24h0m0s: want at most 49 rotation periods (4h5m0s)"},
		{name: "ticket key Secret without a namespace", args: []string{"proxy", "--tls-ticket-key-secret", "tickets"}, wantCode: 1, wantErr: `--tls-ticket-key-secret "tickets": want namespace/name or -`},
		{name: "ticket key Secret with a static config", args: []string{"proxy", "--static-config", "x.yaml", "--tls-ticket-key-secret", "ns/tickets"}, wantCode: 1, wantErr: "--tls-ticket-key-secret \"ns/tickets\": not with --static-config"},
		{name: "negative HSTS max-age", args: []string{"proxy", "--hsts-max-age", "-1"}, wantCode: 1, wantErr: "--hsts-max-age -1: want 0 or more seconds"},
		// Every command's memory limit ratio is a fraction.
		{name: "memory limit ratio above 1", args: []string{"controller", "--memory-limit-ratio", "1.5"}, wantCode: 1, wantErr: "--memory-limit-ratio 1.5: want 0 (off) or more, up to 1"},
		{name: "negative memory limit ratio", args: []string{"proxy", "--memory-limit-ratio", "-0.1"}, wantCode: 1, wantErr: "--memory-limit-ratio -0.1: want 0 (off) or more, up to 1"},
		{name: "memory limit ratio NaN", args: []string{"speaker", "--node-name", "n1", "--memory-limit-ratio", "NaN"}, wantCode: 1, wantErr: "--memory-limit-ratio NaN: want 0 (off) or more, up to 1"},
		// The speaker's hold is bounded.
		{name: "speaker hold too long", args: []string{"speaker", "--node-name", "n1", "--l2-hold", "61s"}, wantCode: 1, wantErr: "--l2-hold 1m1s: want 0 (off) up to 1m0s"},
		{name: "speaker hold negative", args: []string{"speaker", "--node-name", "n1", "--l2-hold", "-1s"}, wantCode: 1, wantErr: "--l2-hold -1s: want 0 (off) up to 1m0s"},
		{name: "response header size", args: []string{"proxy", "--max-response-header-bytes", "lots"}, wantCode: 1, wantErr: `--max-response-header-bytes "lots"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// testenv.Buffer locks: run sets controller-runtime's process-wide logger to one
			// writing to errOut, and only the first such call in a process counts, so later
			// tests' controllers log into the first row's errOut from many goroutines.
			var out, errOut testenv.Buffer
			code := run(context.Background(), tc.args, &out, &errOut)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr: %s)", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
}

// TestControllerGivesSamplesAddresses runs `metalgate controller --kubeconfig …` against a real
// API server, applies config/samples/ with the real kubectl, and checks what a user checks:
// `kubectl get svc`, the pool's status and the metrics.
func TestControllerGivesSamplesAddresses(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}, DualStack: true})
	kubectlBin, kubeconfig := env.Kubectl(t), env.Kubeconfig
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	metricsAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testenv.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"controller", "--kubeconfig", kubeconfig,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0"}, io.Discard, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("controller exited with %d", code)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})

	kubectl("create", "namespace", "metalgate-system")
	kubectl("apply", "-f", filepath.Join("..", "..", "config", "samples"))

	pool := netip.MustParsePrefix("100.64.0.0/16")
	testenv.Eventually(t, 30*time.Second, "every sample LoadBalancer Service gets an address from the pool", func() error {
		out := kubectl("get", "svc", "-A", "-o", `jsonpath={range .items[?(@.spec.type=="LoadBalancer")]}{.metadata.name}={.status.loadBalancer.ingress[*].ip}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			name, ip, _ := strings.Cut(line, "=")
			if ip == "" {
				return fmt.Errorf("service %s has no address yet", name)
			}
			a, err := netip.ParseAddr(strings.Fields(ip)[0])
			if err != nil {
				return fmt.Errorf("service %s shows %q", name, ip)
			}
			if a.Is4() && !pool.Contains(a) {
				return fmt.Errorf("service %s got %s, outside %s", name, a, pool)
			}
		}
		return nil
	})
	t.Log(kubectl("get", "svc", "-A"))
	testenv.Eventually(t, 30*time.Second, "the pool's status counts the address", func() error {
		got := kubectl("get", "ipaddresspool", "-n", "metalgate-system", "default", "-o", "jsonpath={.status.assignedIPv4}/{.status.availableIPv4}")
		if got != "1/65535" {
			return fmt.Errorf("pool default status assigned/available = %s, want 1/65535", got)
		}
		return nil
	})
	t.Log(kubectl("get", "ipaddresspools", "-A"))
	testenv.Eventually(t, 30*time.Second, "the metrics count the address", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`metalgate_pool_addresses_in_use{family="ipv4",pool="default"} 1`,
			`metalgate_build_info{goversion="` + runtime.Version() + `",revision="`,
			`metalgate_services_pending 0`,
			`metalgate_allocation_duration_seconds_count `,
		} {
			if !strings.Contains(string(body), want) {
				return errors.New("metrics lack " + want)
			}
		}
		return nil
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestHSTSValue pins the Strict-Transport-Security value each --hsts flag set gives: the
// default is ingress-nginx's.
func TestHSTSValue(t *testing.T) {
	for _, tc := range []struct {
		name                string
		on, subdomains, pre bool
		maxAge              int64
		want                string
	}{
		{name: "off", on: false, maxAge: 31536000, subdomains: true, want: "-"},
		{name: "default", on: true, maxAge: 31536000, subdomains: true, want: "max-age=31536000; includeSubDomains"},
		{name: "preload", on: true, maxAge: 63072000, subdomains: true, pre: true, want: "max-age=63072000; includeSubDomains; preload"},
		{name: "host only, zero (browsers forget it)", on: true, maxAge: 0, want: "max-age=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hstsValue(tc.on, tc.maxAge, tc.subdomains, tc.pre)
			if err != nil || got != tc.want {
				t.Errorf("hstsValue = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestAuthCheckProcs pins the Go threads (GOMAXPROCS) the proxy runs with: with password
// checks at a lower priority, the CPUs plus the checks that may run at once, so that a check
// whose thread the kernel holds back never holds a P that request handling needs; and the
// default slots are resolved before GOMAXPROCS is raised, so raising it does not also
// raise the slots.
func TestAuthCheckProcs(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		procs, slots, nice, want int
	}{
		{name: "lowered priority: one P per slot more", procs: 2, slots: 2, nice: 19, want: 4},
		{name: "more slots than CPUs", procs: 4, slots: 8, nice: 1, want: 12},
		{name: "the proxy's own priority: unchanged", procs: 2, slots: 2, nice: 0, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := authCheckProcs(tc.procs, tc.slots, tc.nice); got != tc.want {
				t.Errorf("authCheckProcs(%d, %d, %d) = %d, want %d", tc.procs, tc.slots, tc.nice, got, tc.want)
			}
		})
	}
	var o proxyOptions
	if err := parseFlags("proxy", nil, io.Discard, o.bind); err != nil {
		t.Fatal(err)
	}
	d, err := o.dataplaneOptions(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if d.AuthCheckSlots != dataplane.DefaultAuthCheckSlots() || d.AuthCheckNice != 19 {
		t.Errorf("defaults: %d slots at nice %d, want %d (resolved before GOMAXPROCS is raised) at 19", d.AuthCheckSlots, d.AuthCheckNice, dataplane.DefaultAuthCheckSlots())
	}
}

// TestIngressBodySize pins the Ingress routes' default body limit each flag set gives:
// ingress-nginx's 1m unless told otherwise, and a --max-body-size given alone keeps the
// meaning it had for Ingress routes.
func TestIngressBodySize(t *testing.T) {
	for _, tc := range []struct {
		name, def, max string
		want           int64
		wantErr        string
	}{
		{name: "bad default", def: "lots", max: "0", wantErr: `--default-body-size: `},
		{name: "bad max alone", def: "", max: "lots", wantErr: `--max-body-size: `},
		{name: "nothing given: ingress-nginx's 1m", def: "", max: "0", want: 1 << 20},
		{name: "0: unlimited", def: "0", max: "0", want: -1},
		{name: "given", def: "8m", max: "0", want: 8 << 20},
		{name: "--max-body-size alone keeps its meaning", def: "", max: "4m", want: 4 << 20},
		{name: "--default-body-size wins", def: "2k", max: "4m", want: 2 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ingressBodySize(tc.def, tc.max)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ingressBodySize(%q, %q) = %d, %v; want %d", tc.def, tc.max, got, err, tc.want)
			}
		})
	}
}
