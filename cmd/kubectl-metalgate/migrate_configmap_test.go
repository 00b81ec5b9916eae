package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
)

// configMapSource is a controller ConfigMap ns/name with data, as read from a file.
func configMapSource(t *testing.T, ns, name string, data map[string]string) source {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace(ns)
	u.SetName(name)
	if data != nil {
		m := map[string]any{}
		for k, v := range data {
			m[k] = v
		}
		u.Object["data"] = m
	}
	return source{obj: u, origin: "test.yaml"}
}

// TestMigrateConfigMapKeys translates one ConfigMap (or a few keys that act together) at a
// time: the verdict of each key, the proxy flags printed and the per-Ingress annotations. The
// hostile cases come first: settings that would trust everyone, values that do not parse.
func TestMigrateConfigMapKeys(t *testing.T) {
	tests := []struct {
		name     string
		data     map[string]string
		key      string  // the key whose verdict is checked
		verdict  verdict // its verdict
		detail   string  // a part of its line
		flags    []string
		defaults []string // name=value of the per-Ingress annotations
	}{
		{"forwarded headers from everyone (ingress-nginx's default CIDR)", map[string]string{"use-forwarded-headers": "true"},
			"use-forwarded-headers", breaking, "metalgate never trusts everyone", nil, nil},
		{"forwarded headers from 0.0.0.0/0 said aloud", map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "10.0.0.0/8,0.0.0.0/0"},
			"use-forwarded-headers", breaking, "trusts everyone (0.0.0.0/0)", nil, nil},
		{"forwarded headers from ::/0", map[string]string{"enable-real-ip": "true", "proxy-real-ip-cidr": "::/0"},
			"enable-real-ip", breaking, "trusts everyone (::/0)", nil, nil},
		{"forwarded headers from a CIDR that does not parse", map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "10.0.0.0/33"},
			"use-forwarded-headers", breaking, "not an address or CIDR", nil, nil},
		{"PROXY protocol without the load balancer's range", map[string]string{"use-proxy-protocol": "true"},
			"use-proxy-protocol", breaking, "--proxy-protocol-from", []string{"--proxy-protocol-http=required", "--proxy-protocol-https=required"}, nil},
		{"global authentication is lost", map[string]string{"global-auth-url": "http://oauth2.auth.svc/oauth2/auth"},
			"global-auth-url", breaking, "metalgate has no global one", nil, nil},
		{"user agents blocked", map[string]string{"block-user-agents": "~*curl"}, "block-user-agents", breaking, "metalgate serves them", nil, nil},
		{"ModSecurity on", map[string]string{"enable-modsecurity": "true"}, "enable-modsecurity", breaking, "ModSecurity", nil, nil},
		{"a body size that does not parse", map[string]string{"proxy-body-size": "8mb"}, "proxy-body-size", unsupported, "not a size", nil, nil},
		{"a boolean that does not parse", map[string]string{"ssl-redirect": "nope"}, "ssl-redirect", unsupported, "not a boolean", nil, nil},
		{"a timeout that does not parse", map[string]string{"proxy-read-timeout": "1m"}, "proxy-read-timeout", unsupported, "not a number of seconds", nil, nil},
		{"snippets allowed", map[string]string{"allow-snippet-annotations": "true"}, "allow-snippet-annotations", refused, "refuses every *-snippet", nil, nil},
		{"a snippet", map[string]string{"http-snippet": "server_tokens on;"}, "http-snippet", refused, "never translated", nil, nil},
		{"an unknown key", map[string]string{"x-owner": "team"}, "x-owner", unsupported, `no equivalent: x-owner="team" (not a key migrate knows`, nil, nil},
		{"a known key without equivalent", map[string]string{"use-gzip": "true"}, "use-gzip", unsupported, `no equivalent: use-gzip="true" (gzip compression`, nil, nil},
		{"custom error pages: per Ingress, with the proxy's default backend", map[string]string{"custom-http-errors": "404,503"}, "custom-http-errors", changed, "--default-backend-service", nil, []string{"custom-http-errors=404,503"}},
		{"forwarded headers from the load balancer", map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": " 10.1.2.0/24 , 192.0.2.10", "compute-full-forwarded-for": "true"},
			"use-forwarded-headers", changed, "as compute-full-forwarded-for did", []string{"--trusted-proxies=10.1.2.0/24,192.0.2.10/32"}, nil},
		{"full X-Forwarded-For off", map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "10.1.2.0/24", "compute-full-forwarded-for": "false"},
			"compute-full-forwarded-for", changed, "the client's address alone", []string{"--trusted-proxies=10.1.2.0/24"}, nil},
		{"PROXY protocol from the load balancer", map[string]string{"use-proxy-protocol": "true", "proxy-real-ip-cidr": "10.1.2.0/24"},
			"use-proxy-protocol", changed, "a connection from outside those addresses is refused", []string{"--proxy-protocol-http=required", "--proxy-protocol-https=required", "--proxy-protocol-from=10.1.2.0/24"}, nil},
		{"body size 8M", map[string]string{"proxy-body-size": "8M"}, "proxy-body-size", same, "--default-body-size=8m", []string{"--default-body-size=8m"}, nil},
		{"body size unlimited", map[string]string{"proxy-body-size": "0"}, "proxy-body-size", same, "", []string{"--default-body-size=0"}, nil},
		{"body size 1024k is the default", map[string]string{"proxy-body-size": "1024k"}, "proxy-body-size", same, "nothing to set", nil, nil},
		{"HSTS off", map[string]string{"hsts": "false"}, "hsts", same, "", []string{"--hsts=false"}, nil},
		{"HSTS settings", map[string]string{"hsts-max-age": "600", "hsts-include-subdomains": "false", "hsts-preload": "true"}, "hsts-max-age", same, "",
			[]string{"--hsts-max-age=600", "--hsts-include-subdomains=false", "--hsts-preload=true"}, nil},
		{"HSTS at the defaults", map[string]string{"hsts": "true", "hsts-max-age": "31536000", "hsts-include-subdomains": "true", "hsts-preload": "false"}, "hsts-max-age", same, "nothing to set", nil, nil},
		{"timeouts", map[string]string{"proxy-connect-timeout": "10", "proxy-read-timeout": "120", "keep-alive": "75"}, "proxy-read-timeout", same, "",
			[]string{"--client-idle-timeout=75s", "--connect-timeout=10s", "--response-header-timeout=120s", "--upstream-read-timeout=120s"}, nil},
		{"send timeout per Ingress", map[string]string{"proxy-send-timeout": "90"}, "proxy-send-timeout", changed, "no global setting", nil, []string{"proxy-send-timeout=90s"}},
		{"global ssl-redirect off", map[string]string{"ssl-redirect": "false"}, "ssl-redirect", same, "migrate adds no ssl-redirect", nil, nil},
		{"global force-ssl-redirect", map[string]string{"force-ssl-redirect": "true"}, "force-ssl-redirect", same, "", nil, []string{"force-ssl-redirect=true"}},
		{"global address lists", map[string]string{"whitelist-source-range": "10.0.0.0/8, 192.168.0.0/16", "denylist-source-range": "10.9.0.0/16", "block-cidrs": "198.51.100.0/24"}, "whitelist-source-range", same, "",
			nil, []string{"allowlist-source-range=10.0.0.0/8,192.168.0.0/16", "denylist-source-range=10.9.0.0/16", "denylist-source-range=198.51.100.0/24"}},
		{"ewma", map[string]string{"load-balance": "ewma"}, "load-balance", same, "", nil, []string{"load-balance=ewma"}},
		{"old TLS versions", map[string]string{"ssl-protocols": "TLSv1 TLSv1.2"}, "ssl-protocols", changed, "TLS 1.2 and 1.3 only", nil, nil},
		{"rate-limit status 503", map[string]string{"limit-req-status-code": "503"}, "limit-req-status-code", changed, "429 with Retry-After", nil, nil},
		{"HTTP/2 off", map[string]string{"use-http2": "false"}, "use-http2", unsupported, "always offers h2", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, rest, _ := takeControllerConfig([]source{configMapSource(t, "ingress-nginx", "ingress-nginx-controller", tc.data)}, defaultSettings())
			if !cfg.found || len(rest) != 0 {
				t.Fatalf("found %t, %d objects left", cfg.found, len(rest))
			}
			for k := range tc.data {
				if !mentioned(cfg.rep, k) {
					t.Errorf("key %s has no report line", k)
				}
			}
			var line *entry
			for i, e := range cfg.rep.entries {
				if e.what == tc.key {
					line = &cfg.rep.entries[i]
				}
			}
			if line == nil || line.verdict != tc.verdict || !strings.Contains(line.detail, tc.detail) {
				t.Errorf("%s: got %+v, want %s with %q", tc.key, line, tc.verdict, tc.detail)
			}
			var flags []string
			for _, f := range cfg.flags {
				flags = append(flags, "--"+f.name+"="+f.value)
			}
			slices.Sort(flags)
			want := slices.Clone(tc.flags)
			slices.Sort(want)
			if !slices.Equal(flags, want) {
				t.Errorf("proxy flags %q, want %q", flags, want)
			}
			var defaults []string
			for _, d := range cfg.defaults {
				defaults = append(defaults, d.name+"="+d.value)
			}
			slices.Sort(defaults)
			wantDefaults := slices.Clone(tc.defaults)
			slices.Sort(wantDefaults)
			if !slices.Equal(defaults, wantDefaults) {
				t.Errorf("per-Ingress annotations %q, want %q", defaults, wantDefaults)
			}
		})
	}
}

// TestMigrateConfigMapDiscovery: which ConfigMap migrate reads. A workload's --configmap is
// resolved against its environment; one that cannot be is noted and the default name used.
func TestMigrateConfigMapDiscovery(t *testing.T) {
	workload := func(kind, ns string, labels map[string]string, args []any, env []any) source {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": kind}}
		u.SetNamespace(ns)
		u.SetName("ctl")
		u.SetLabels(labels)
		c := map[string]any{"name": "controller", "args": args}
		if env != nil {
			c["env"] = env
		}
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{c}}}}
		return source{obj: u}
	}
	ctlLabels := map[string]string{labelName: "ingress-nginx", labelComponent: "controller"}
	tests := []struct {
		name      string
		flag      string
		workloads []source
		want      string
		wantNote  string
	}{
		{"an unresolved variable", "", []source{workload("Deployment", "edge", ctlLabels, []any{"--configmap=$(CM_NS)/x"}, nil)}, nginxConfigMapDefault, `namespace "$(CM_NS)"`},
		{"a name the API refuses", "", []source{workload("Deployment", "edge", ctlLabels, []any{"--configmap=edge/Bad_Name"}, nil)}, nginxConfigMapDefault, "name \"Bad_Name\""},
		{"not the controller (component webhook)", "", []source{workload("Deployment", "edge", map[string]string{labelName: "ingress-nginx", labelComponent: "admission-webhook"}, []any{"--configmap=edge/x"}, nil)}, nginxConfigMapDefault, ""},
		{"no workload", "", nil, nginxConfigMapDefault, ""},
		{"the chart's $(POD_NAMESPACE)", "", []source{workload("Deployment", "edge", ctlLabels, []any{"/nginx-ingress-controller", "--configmap=$(POD_NAMESPACE)/edge-settings"}, nil)}, "edge/edge-settings", ""},
		{"a DaemonSet, argument apart", "", []source{workload("DaemonSet", "edge", ctlLabels, []any{"--configmap", "edge/ds-settings"}, nil)}, "edge/ds-settings", ""},
		{"a variable of the container", "", []source{workload("Deployment", "edge", ctlLabels, []any{"--configmap=$(CM_NS)/x"}, []any{map[string]any{"name": "CM_NS", "value": "platform"}})}, "platform/x", ""},
		{"two controllers disagree", "", []source{
			workload("Deployment", "a", ctlLabels, []any{"--configmap=a/one"}, nil),
			workload("Deployment", "b", ctlLabels, []any{"--configmap=b/two"}, nil)}, "a/one", "names ConfigMap b/two; a/one is read"},
		{"the flag wins", "ops/mine", []source{workload("Deployment", "edge", ctlLabels, []any{"--configmap=edge/x"}, nil)}, "ops/mine", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var srcs []source
			srcs = append(srcs, tc.workloads...)
			name, _, notes := controllerConfigMapName(tc.flag, controllerObjects(srcs))
			if name != tc.want {
				t.Errorf("name %q, want %q", name, tc.want)
			}
			joined := strings.Join(notes, "\n")
			if (tc.wantNote == "") != (joined == "") || !strings.Contains(joined, tc.wantNote) {
				t.Errorf("notes %q, want one with %q", joined, tc.wantNote)
			}
		})
	}
}

// TestMigrateConfigMapFlag: --nginx-configmap takes namespace/name only (a usage error
// otherwise), and reading a ConfigMap that is not there says ingress-nginx's defaults are
// assumed.
func TestMigrateConfigMapFlag(t *testing.T) {
	for _, bad := range []string{"nonamespace", "/name", "ns/", "NS/name", "ns/name/extra"} {
		code, _, stderr := runMigrate(t, "", "migrate", "-f", migrateData+"/configmap/ingresses.yaml", "--nginx-configmap", bad)
		if code == 0 || !strings.Contains(stderr, "nginx-configmap") {
			t.Errorf("--nginx-configmap %q: exit %d, %q", bad, code, stderr)
		}
	}
	code, out, report := runMigrate(t, "", "migrate", "-f", migrateData+"/configmap", "--nginx-configmap", "ops/absent")
	if code != 0 || !strings.Contains(report, "no controller ConfigMap found; ingress-nginx's defaults assumed (looked for ops/absent, --nginx-configmap") {
		t.Errorf("exit %d, report:\n%s", code, report)
	}
	// The defaults: a TLS Ingress gets ssl-redirect, as ingress-nginx redirected it.
	if !strings.Contains(out, `metalgate.io/ssl-redirect: "true"`) {
		t.Errorf("no ssl-redirect in:\n%s", out)
	}
}

// TestMigrateConfigMapOneToOne holds the migrated Ingresses to what the proxy does with them:
// under a ConfigMap with ssl-redirect "false" a TLS Ingress is not redirected (ingress-nginx
// did not either); without a ConfigMap it is; a global force-ssl-redirect redirects even a
// host without TLS, as it did in ingress-nginx.
func TestMigrateConfigMapOneToOne(t *testing.T) {
	ingSrcs, err := readManifestFiles([]string{filepath.Join(migrateData, "configmap", "ingresses.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cm   map[string]string // nil: no ConfigMap
		want map[string]int    // Ingress name → HTTPSRedirect of its routes
	}{
		{"ssl-redirect false", map[string]string{"ssl-redirect": "false"}, map[string]int{"web": 0, "api": 308, "status": 0}},
		{"no ConfigMap", nil, map[string]int{"web": 308, "api": 308, "status": 0}},
		{"force-ssl-redirect", map[string]string{"ssl-redirect": "false", "force-ssl-redirect": "true"}, map[string]int{"web": 308, "api": 308, "status": 308}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srcs := slices.Clone(ingSrcs)
			if tc.cm != nil {
				srcs = append(srcs, configMapSource(t, "ingress-nginx", "ingress-nginx-controller", tc.cm))
			}
			m, err := runMigration(srcs, defaultSettings(), nil)
			if err != nil {
				t.Fatal(err)
			}
			in := proxyingress.Input{Classes: newIngressMigrator(defaultSettings()).classes(), NginxAnnotations: true}
			for _, o := range m.objects {
				var ing networkingv1.Ingress
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.obj.Object, &ing); err != nil {
					t.Fatal(err)
				}
				in.Ingresses = append(in.Ingresses, &ing)
			}
			table, _ := proxyingress.Build(in)
			got := map[string]int{}
			for _, r := range table.Routes() {
				got[r.Source.Name] = r.Options.Policy.HTTPSRedirect
			}
			for name, want := range tc.want {
				if g, ok := got[name]; !ok || g != want {
					t.Errorf("Ingress %s: HTTPSRedirect %d (routed %t), want %d", name, g, ok, want)
				}
			}
		})
	}
}

// TestMigrateConfigMapFromCluster: without -f, migrate finds the controller Deployment by its
// labels, reads the ConfigMap its --configmap names, and reports it as from the files.
func TestMigrateConfigMapFromCluster(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(migrateData, "configmap", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifests(data, "controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		objects []source
		flag    string
		want    string // the ConfigMap read, "" for none
	}{
		{"nothing of ingress-nginx", nil, "", ""},
		{"the Deployment's --configmap", objs, "", "edge/edge-nginx-settings"},
		{"--nginx-configmap", objs, "edge/edge-nginx-settings-old", "edge/edge-nginx-settings-old"},
		{"--nginx-configmap, absent", objs, "edge/absent", ""},
		{"only the ConfigMaps, one labelled", objs[2:], "", "edge/edge-nginx-settings-old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			for _, o := range tc.objects {
				b = b.WithObjects(o.obj.DeepCopy())
			}
			s := defaultSettings()
			s.nginxConfigMap = tc.flag
			srcs, notes := readControllerConfigMap(context.Background(), b.Build(), s)
			if len(notes) > 0 {
				t.Errorf("notes: %q", notes)
			}
			cfg, _, _ := takeControllerConfig(srcs, s)
			got := ""
			if cfg.found {
				got = objectName(cfg.src.obj)
			}
			if got != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMigrateConfigMapProxyFlagsExist keeps migrate's table of proxy flags true to the proxy:
// every flag it may print is one the proxy has, and proxyHasDefaultBackend says whether the
// proxy has --default-backend-service (flip it, and translate custom-http-errors, when it does).
func TestMigrateConfigMapProxyFlagsExist(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "metalgate", "proxy.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range proxyDefaults {
		if !strings.Contains(string(src), `"`+name+`"`) {
			t.Errorf("--%s: not a flag of cmd/metalgate/proxy.go", name)
		}
	}
	if has := strings.Contains(string(src), `"default-backend-service"`); has != proxyHasDefaultBackend {
		t.Errorf("the proxy has --default-backend-service: %t; proxyHasDefaultBackend is %t: flip it (custom-http-errors then translates)", has, proxyHasDefaultBackend)
	}
}

// TestMigrateConfigMapListsAsTheProxyReads: a ConfigMap address list is read with the proxy's
// own list parser (proxy/ingress.ParseAddressList), so the annotation migrate puts on an
// Ingress allows exactly the addresses the ConfigMap listed, and proxy-real-ip-cidr becomes
// --trusted-proxies of the same prefixes, whatever separates the entries. Hostile first: an
// entry that is not an address is never dropped from the list quietly.
func TestMigrateConfigMapListsAsTheProxyReads(t *testing.T) {
	m := newIngressMigrator(defaultSettings())
	for _, tc := range []struct {
		name, value string
		want        []string // the prefixes, nil: the list does not parse
	}{
		{"an entry that is not an address", "10.0.0.0/8, example.com", nil},
		{"commas", "10.0.0.0/8, 192.168.0.0/16", []string{"10.0.0.0/8", "192.168.0.0/16"}},
		{"white space", "10.0.0.0/8 192.168.0.0/16\t10.9.0.1", []string{"10.0.0.0/8", "192.168.0.0/16", "10.9.0.1/32"}},
		{"empty entries, an unmasked CIDR, IPv6", " 198.51.100.7/24 ,,2001:db8::/32 ", []string{"198.51.100.0/24", "2001:db8::/32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, _ := takeControllerConfig([]source{configMapSource(t, "ingress-nginx", "ingress-nginx-controller", map[string]string{
				"whitelist-source-range": tc.value, "use-forwarded-headers": "true", "proxy-real-ip-cidr": tc.value,
			})}, defaultSettings())
			var trusted []string
			for _, f := range cfg.flags {
				if f.name == "trusted-proxies" {
					trusted = strings.Split(f.value, ",")
				}
			}
			if !slices.Equal(trusted, tc.want) {
				t.Errorf("--trusted-proxies %q, want %q", trusted, tc.want)
			}
			if len(cfg.defaults) != 1 {
				t.Fatalf("per-Ingress annotations %+v, want the allow-list", cfg.defaults)
			}
			r := m.migrateIngress(routedIngress(nil), "", "nginx", "spec.ingressClassName")
			ann := map[string]string{}
			cfg.applyDefaults(r, map[string]string{}, ann, true)
			r.out.SetAnnotations(ann)
			routes, _, err := m.checkIngresses([]*ingressResult{r})
			if err != nil {
				t.Fatal(err)
			}
			rs := routes[types.NamespacedName{Namespace: "ns", Name: "in"}]
			if len(rs) == 0 {
				t.Fatalf("no route (annotations %v)", ann)
			}
			var allowed []string
			for _, p := range rs[0].Options.Policy.Allow {
				allowed = append(allowed, p.String())
			}
			refused := rs[0].Options.Policy.Refuse != ""
			switch {
			case tc.want == nil && !refused:
				t.Errorf("allow-list %q served with %q: want every request refused", ann, allowed)
			case tc.want != nil && (refused || !slices.Equal(allowed, tc.want)):
				t.Errorf("allow-list %q: allowed %q (refused %t), want %q", ann, allowed, refused, tc.want)
			}
		})
	}
}
