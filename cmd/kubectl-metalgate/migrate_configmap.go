package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// nginxConfigMapDefault is the controller ConfigMap of ingress-nginx's Helm chart and static
// manifests: what migrate reads when no controller workload names another.
const nginxConfigMapDefault = "ingress-nginx/ingress-nginx-controller"

// Labels of ingress-nginx's controller workload and ConfigMap (Helm chart and manifests).
const (
	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
)

// proxyHasDefaultBackend says whether metalgate's proxy has --default-backend-service (and
// custom-http-errors). Flip it when the proxy gains them: custom-http-errors then translates
// (TestMigrateConfigMapProxyFlagsExist fails until it is flipped).
const proxyHasDefaultBackend = true

// proxyDefaults are the defaults of the proxy flags migrate may print (cmd/metalgate/proxy.go):
// a flag whose value would be its default is not printed.
var proxyDefaults = map[string]string{
	"default-body-size":            "1m",
	"hsts":                         "true",
	"hsts-max-age":                 "31536000",
	"hsts-include-subdomains":      "true",
	"hsts-preload":                 "false",
	"connect-timeout":              "5s",
	"response-header-timeout":      "60s",
	"upstream-read-timeout":        "60s",
	"client-body-timeout":          "60s",
	"read-header-timeout":          "10s",
	"client-idle-timeout":          "120s",
	"upstream-idle-timeout":        "90s",
	"http2-max-concurrent-streams": "250",
	"allow-underscores-in-headers": "false",
	"trusted-proxies":              "",
	"proxy-protocol-http":          "off",
	"proxy-protocol-https":         "off",
	"proxy-protocol-from":          "",
}

// controllerConfig is what migrate makes of ingress-nginx's controller ConfigMap: proxy flags,
// annotations every migrated Ingress gets unless it sets its own, and a report line per key.
type controllerConfig struct {
	// name is the ConfigMap looked for (namespace/name), how says why that one.
	name, how string
	// found says the ConfigMap was read: src is it, rep its report block.
	found bool
	src   source
	rep   *objectReport
	// flags are the proxy flags to set, in the order of the keys.
	flags []proxyFlag
	// defaults are the per-Ingress annotations the ConfigMap stands for.
	defaults []ingressDefault
	// sslRedirect is ingress-nginx's global ssl-redirect (true unless the ConfigMap says false).
	sslRedirect bool
}

// proxyFlag is one proxy flag to set, and the ConfigMap key it comes from.
type proxyFlag struct{ name, value, key string }

// ingressDefault is a ConfigMap key that becomes an annotation on every migrated Ingress that
// does not set its own (in ingress-nginx an Ingress's annotation overrides the global value).
type ingressDefault struct {
	key   string   // the ConfigMap key
	name  string   // the annotation, without prefix (the nginx and metalgate.io names agree)
	value string   // its value
	own   []string // annotations (without prefix, either prefix) that mean the Ingress sets its own
	// union adds value to the Ingress's own list (block-cidrs) instead of yielding to it.
	union bool
}

// controllerObjects are the ingress-nginx controller workloads (Deployment, DaemonSet) among
// what was read.
func controllerObjects(srcs []source) []source {
	var out []source
	for _, s := range srcs {
		if isControllerWorkload(s.obj) {
			out = append(out, s)
		}
	}
	return out
}

func isControllerWorkload(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	if gvk.Group != "apps" || (gvk.Kind != "Deployment" && gvk.Kind != "DaemonSet") {
		return false
	}
	l := u.GetLabels()
	c, hasComponent := l[labelComponent]
	return l[labelName] == "ingress-nginx" && (!hasComponent || c == "controller")
}

func isControllerConfigMapLabelled(u *unstructured.Unstructured) bool {
	l := u.GetLabels()
	return u.GetKind() == "ConfigMap" && u.GetAPIVersion() == "v1" && l[labelName] == "ingress-nginx" && l[labelComponent] == "controller"
}

// controllerConfigMapName is the ConfigMap migrate reads: --nginx-configmap, else the
// --configmap argument of an ingress-nginx controller workload read, else ingress-nginx's
// default name. notes say what was ambiguous or could not be resolved.
func controllerConfigMapName(flagValue string, workloads []source) (name, how string, notes []string) {
	if flagValue != "" {
		return flagValue, "--nginx-configmap", nil
	}
	sort.SliceStable(workloads, func(i, j int) bool { return objectName(workloads[i].obj) < objectName(workloads[j].obj) })
	for _, w := range workloads {
		v, ok, why := configMapArg(w.obj)
		if why != "" {
			notes = append(notes, fmt.Sprintf("%s %s: %s", w.obj.GetKind(), objectName(w.obj), why))
		}
		if !ok {
			continue
		}
		if name == "" {
			name, how = v, fmt.Sprintf("the --configmap argument of %s %s", w.obj.GetKind(), objectName(w.obj))
		} else if v != name {
			notes = append(notes, fmt.Sprintf("%s %s names ConfigMap %s; %s is read (give --nginx-configmap to choose)", w.obj.GetKind(), objectName(w.obj), v, name))
		}
	}
	if name == "" {
		return nginxConfigMapDefault, "ingress-nginx's default name", notes
	}
	return name, how, notes
}

// configMapArg is the namespace/name of a controller container's --configmap argument, with
// $(VAR) references to the container's environment resolved ($(POD_NAMESPACE) is the
// workload's namespace, as the chart sets it); why says what could not be resolved.
func configMapArg(u *unstructured.Unstructured) (string, bool, string) {
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		env := map[string]string{"POD_NAMESPACE": u.GetNamespace()}
		envs, _, _ := unstructured.NestedSlice(cm, "env")
		for _, e := range envs {
			em, _ := e.(map[string]any)
			n, _ := em["name"].(string)
			if v, ok := em["value"].(string); ok && n != "" {
				env[n] = v
			}
		}
		var args []string
		for _, field := range []string{"command", "args"} {
			list, _, _ := unstructured.NestedStringSlice(cm, field)
			args = append(args, list...)
		}
		for i, a := range args {
			v, ok := strings.CutPrefix(a, "--configmap=")
			if !ok && a == "--configmap" && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if !ok {
				continue
			}
			for n, val := range env {
				v = strings.ReplaceAll(v, "$("+n+")", val)
			}
			if _, err := parseNamespacedName(v); err != nil {
				return "", false, fmt.Sprintf("--configmap %q: %v", v, err)
			}
			return v, true, ""
		}
	}
	return "", false, ""
}

// parseNamespacedName reads namespace/name, both DNS labels or subdomains as the API wants.
func parseNamespacedName(v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("want namespace/name")
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// takeControllerConfig finds the controller ConfigMap among what was read (by name; else the
// one ConfigMap labelled as ingress-nginx's controller's), translates it, and returns what
// was read without it.
func takeControllerConfig(srcs []source, s *migrateSettings) (*controllerConfig, []source, []string) {
	name, how, notes := controllerConfigMapName(s.nginxConfigMap, controllerObjects(srcs))
	cfg := &controllerConfig{name: name, how: how, sslRedirect: true}
	pick := -1
	var labelled []int
	for i, src := range srcs {
		u := src.obj
		if u.GetKind() != "ConfigMap" || u.GetAPIVersion() != "v1" {
			continue
		}
		if u.GetNamespace()+"/"+u.GetName() == name {
			pick = i
			break
		}
		if isControllerConfigMapLabelled(u) {
			labelled = append(labelled, i)
		}
	}
	if pick < 0 && s.nginxConfigMap == "" && len(labelled) == 1 {
		pick = labelled[0]
		cfg.name, cfg.how = objectName(srcs[pick].obj), "labelled as ingress-nginx's controller's; "+name+" was not read"
	}
	if pick < 0 {
		return cfg, srcs, notes
	}
	cfg.translate(srcs[pick])
	rest := append(srcs[:pick:pick], srcs[pick+1:]...)
	return cfg, rest, notes
}

// controllerObjectReason says why an object of ingress-nginx's controller is not migrated; ""
// when it is none.
func controllerObjectReason(u *unstructured.Unstructured) string {
	switch {
	case isControllerWorkload(u):
		return "ingress-nginx's controller: metalgate's proxy takes its place (its --configmap argument says which controller ConfigMap migrate reads, unless --nginx-configmap is given)"
	case isControllerConfigMapLabelled(u):
		return "labelled as ingress-nginx's controller ConfigMap, but not the one read: give --nginx-configmap NAMESPACE/NAME to read it"
	}
	return ""
}

// readControllerConfigMap reads the controller workloads and ConfigMap from the cluster; what
// cannot be read is noted (ingress-nginx's defaults are then assumed), not an error.
func readControllerConfigMap(ctx context.Context, c client.Reader, s *migrateSettings) ([]source, []string) {
	var out []source
	var notes []string
	if s.nginxConfigMap == "" {
		for _, kind := range []string{"Deployment", "DaemonSet"} {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("apps/v1")
			l.SetKind(kind + "List")
			if err := c.List(ctx, l, client.MatchingLabels{labelName: "ingress-nginx"}); err != nil {
				notes = append(notes, fmt.Sprintf("could not list ingress-nginx's controller %ss: %v", kind, err))
				continue
			}
			for i := range l.Items {
				it := &l.Items[i]
				it.SetAPIVersion("apps/v1")
				it.SetKind(kind)
				if isControllerWorkload(it) {
					out = append(out, source{obj: it})
				}
			}
		}
	}
	name, _, _ := controllerConfigMapName(s.nginxConfigMap, out)
	key, err := parseNamespacedName(name)
	if err != nil {
		return out, append(notes, fmt.Sprintf("controller ConfigMap %q: %v", name, err))
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	switch err := c.Get(ctx, key, cm); {
	case err == nil:
		return append(out, source{obj: cm}), notes
	case apierrors.IsNotFound(err) && s.nginxConfigMap == "":
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind("ConfigMapList")
		if err := c.List(ctx, l, client.MatchingLabels{labelName: "ingress-nginx", labelComponent: "controller"}); err != nil {
			return out, append(notes, fmt.Sprintf("could not list ConfigMaps labelled as ingress-nginx's controller's: %v", err))
		}
		for i := range l.Items {
			it := &l.Items[i]
			it.SetAPIVersion("v1")
			it.SetKind("ConfigMap")
			out = append(out, source{obj: it})
		}
		return out, notes
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return out, notes
	default:
		return out, append(notes, fmt.Sprintf("could not read the controller ConfigMap %s: %v: give it with -f", name, err))
	}
}

// translate reads the ConfigMap's data, key by key.
func (cfg *controllerConfig) translate(src source) {
	cfg.found, cfg.src = true, src
	cfg.rep = &objectReport{
		title: fmt.Sprintf("ConfigMap %s (ingress-nginx's controller ConfigMap: %s)", objectName(src.obj), cfg.how),
		from:  src.origin,
	}
	data, _, _ := unstructured.NestedStringMap(src.obj.Object, "data")
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		cfg.rep.add(same, "data", "empty: ingress-nginx's defaults, which metalgate keeps (see docs/migrate.md)")
	}
	for _, k := range keys {
		cfg.key(k, data[k], data)
	}
}

// flag records a proxy flag to set, unless value is the proxy's default; it returns the line
// the report gives the key.
func (cfg *controllerConfig) flag(key, name, value string) string {
	if proxyDefaults[name] == value {
		return fmt.Sprintf("--%s=%s, the proxy's default: nothing to set", name, value)
	}
	for i, f := range cfg.flags {
		if f.name == name {
			cfg.flags[i].value = value
			return fmt.Sprintf("→ proxy flag --%s=%s (see Proxy flags)", name, value)
		}
	}
	cfg.flags = append(cfg.flags, proxyFlag{name: name, value: value, key: key})
	return fmt.Sprintf("→ proxy flag --%s=%s (see Proxy flags)", name, value)
}

// perIngress records an annotation every migrated Ingress gets unless it sets its own.
func (cfg *controllerConfig) perIngress(d ingressDefault) string {
	if d.name == "" {
		d.name = d.key
	}
	d.own = append(d.own, d.name)
	cfg.defaults = append(cfg.defaults, d)
	if d.union {
		return fmt.Sprintf("→ added to %s on every migrated Ingress (with the Ingress's own list)", d.name)
	}
	return fmt.Sprintf("→ %s: %q on every migrated Ingress that does not set its own", d.name, d.value)
}

// key translates one ConfigMap key; all is the whole data, for keys that act together.
func (cfg *controllerConfig) key(k, v string, all map[string]string) {
	rep := cfg.rep
	t := strings.TrimSpace(v)
	b, boolErr := strconv.ParseBool(t)
	notBool := func() bool {
		if boolErr != nil {
			rep.add(unsupported, k, "%q is not a boolean: ingress-nginx does not read it either; nothing carried over", v)
			return true
		}
		return false
	}
	flagOrDefault := func(name, value string) {
		line := cfg.flag(k, name, value)
		rep.add(same, k, "%s", line)
	}
	switch k {
	case "ssl-redirect":
		if notBool() {
			return
		}
		cfg.sslRedirect = b
		if b {
			rep.add(same, k, "\"true\", ingress-nginx's default: TLS Ingresses get ssl-redirect: \"true\" (metalgate redirects only with the annotation)")
		} else {
			rep.add(same, k, "\"false\": no redirect to HTTPS unless an Ingress asks; migrate adds no ssl-redirect (metalgate's default is no redirect too)")
		}
	case "force-ssl-redirect":
		if notBool() {
			return
		}
		if !b {
			rep.add(same, k, "\"false\", ingress-nginx's default and metalgate's")
			return
		}
		rep.add(same, k, "%s", cfg.perIngress(ingressDefault{key: k, value: "true"}))
	case "proxy-body-size":
		n, err := ingress.ParseSize(t)
		if err != nil {
			rep.add(unsupported, k, "%q: %v: ingress-nginx's nginx would not start with it; nothing carried over (the proxy's default is 1m)", v, err)
			return
		}
		value := strings.ToLower(t)
		if def, _ := ingress.ParseSize(proxyDefaults["default-body-size"]); n == def {
			value = proxyDefaults["default-body-size"]
		}
		flagOrDefault("default-body-size", value)
	case "hsts":
		if notBool() {
			return
		}
		flagOrDefault("hsts", strconv.FormatBool(b))
	case "hsts-include-subdomains", "hsts-preload":
		if notBool() {
			return
		}
		flagOrDefault(k, strconv.FormatBool(b))
	case "hsts-max-age":
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			rep.add(unsupported, k, "%q is not a number of seconds; nothing carried over (the proxy's default is %s)", v, proxyDefaults["hsts-max-age"])
			return
		}
		flagOrDefault("hsts-max-age", strconv.FormatInt(n, 10))
	case "use-forwarded-headers", "enable-real-ip":
		if notBool() {
			return
		}
		if !b {
			rep.add(same, k, "\"false\", ingress-nginx's default: forwarding headers from clients are replaced, as the proxy does without --trusted-proxies")
			return
		}
		cidrs, why := realIPCIDRs(all)
		if why != "" {
			rep.add(breaking, k, "\"true\" with proxy-real-ip-cidr %s: ingress-nginx took X-Forwarded-For from every address; metalgate never trusts everyone: set --trusted-proxies to the load balancer's range, or the proxy sees the load balancer as every client (address lists, rate limits and logs judge its address)", why)
			return
		}
		line := cfg.flag(k, "trusted-proxies", strings.Join(cidrs, ","))
		if k == "enable-real-ip" {
			rep.add(changed, k, "%s: the client address is read from X-Forwarded-For of those addresses, as ingress-nginx did; the forwarding headers they send are also passed on, extended", line)
			return
		}
		full, _ := strconv.ParseBool(strings.TrimSpace(all["compute-full-forwarded-for"]))
		chain := "backends get X-Forwarded-For as sent, extended (as compute-full-forwarded-for did)"
		if !full {
			chain = "backends get X-Forwarded-For as sent, extended, where ingress-nginx (without compute-full-forwarded-for) sent the client's address alone"
		}
		rep.add(changed, k, "%s: the client is the right-most X-Forwarded-For address not among them, as in ingress-nginx; X-Forwarded-Proto, -Host and -Port are kept from those addresses only, where ingress-nginx kept them from anyone; %s", line, chain)
	case "use-proxy-protocol":
		if notBool() {
			return
		}
		if !b {
			rep.add(same, k, "\"false\", ingress-nginx's default and metalgate's")
			return
		}
		cfg.flag(k, "proxy-protocol-http", "required")
		cfg.flag(k, "proxy-protocol-https", "required")
		cidrs, why := realIPCIDRs(all)
		if why != "" {
			rep.add(breaking, k, "\"true\": → --proxy-protocol-http=required and --proxy-protocol-https=required (see Proxy flags); proxy-real-ip-cidr %s, and metalgate takes a PROXY header only from --proxy-protocol-from: set it to the load balancer's range, or every connection is refused", why)
			return
		}
		cfg.flag(k, "proxy-protocol-from", strings.Join(cidrs, ","))
		// ingress-nginx read a PROXY header from anyone and took the client address from it
		// only when the connection came from proxy-real-ip-cidr; the proxy refuses a
		// connection from elsewhere (its header could forge the address).
		rep.add(changed, k, "\"true\": → --proxy-protocol-http=required, --proxy-protocol-https=required, --proxy-protocol-from=%s (see Proxy flags); a connection from outside those addresses is refused, where ingress-nginx served it as from the connection's address", strings.Join(cidrs, ","))
	case "proxy-real-ip-cidr":
		on := func(key string) bool { x, _ := strconv.ParseBool(strings.TrimSpace(all[key])); return x }
		if !on("use-forwarded-headers") && !on("enable-real-ip") && !on("use-proxy-protocol") {
			rep.add(same, k, "no effect without use-forwarded-headers, enable-real-ip or use-proxy-protocol, in ingress-nginx as here")
			return
		}
		if _, why := realIPCIDRs(all); why != "" {
			rep.add(changed, k, "%q: %s (see the line of the setting it serves)", v, why)
			return
		}
		rep.add(same, k, "read with the setting it serves (its line says which flag)")
	case "compute-full-forwarded-for":
		if notBool() {
			return
		}
		if on, _ := strconv.ParseBool(strings.TrimSpace(all["use-forwarded-headers"])); !on {
			rep.add(same, k, "%q: no effect without use-forwarded-headers, in ingress-nginx as here (the proxy replaces a client's X-Forwarded-For)", v)
			return
		}
		if b {
			rep.add(same, k, "\"true\": from --trusted-proxies addresses the proxy extends X-Forwarded-For (appends the address it got the request from), as ingress-nginx did")
			return
		}
		rep.add(changed, k, "\"false\": the proxy extends X-Forwarded-For from --trusted-proxies addresses; ingress-nginx sent the client's address alone; no setting")
	case "forwarded-for-header":
		if strings.EqualFold(t, "X-Forwarded-For") {
			rep.add(same, k, "X-Forwarded-For, ingress-nginx's default: the header the proxy reads from --trusted-proxies")
			return
		}
		rep.add(unsupported, k, "no equivalent: %s=%q (the header ingress-nginx read the client address from): the proxy reads X-Forwarded-For only; have the load balancer send it, or use the PROXY protocol", k, v)
	case "proxy-connect-timeout":
		cfg.seconds(k, v, "connect-timeout")
	case "proxy-read-timeout":
		d, ok := nginxSeconds(t)
		if !ok {
			rep.add(unsupported, k, "%q is not a number of seconds; nothing carried over", v)
			return
		}
		cfg.flag(k, "response-header-timeout", d)
		cfg.flag(k, "upstream-read-timeout", d)
		if d == proxyDefaults["response-header-timeout"] && d == proxyDefaults["upstream-read-timeout"] {
			rep.add(same, k, "--response-header-timeout and --upstream-read-timeout are %s, the proxy's defaults: nothing to set", d)
			return
		}
		rep.add(same, k, "→ proxy flags --response-header-timeout=%s and --upstream-read-timeout=%s (the wait for the response head, and for each read of its body; see Proxy flags)", d, d)
	case "proxy-send-timeout":
		d, ok := nginxSeconds(t)
		if !ok {
			rep.add(unsupported, k, "%q is not a number of seconds; nothing carried over", v)
			return
		}
		rep.add(changed, k, "%s: the proxy has no global setting for it (without one it waits for each write to the backend as long as the request lasts)", cfg.perIngress(ingressDefault{key: k, value: d}))
	case "client-body-timeout":
		cfg.seconds(k, v, "client-body-timeout")
	case "client-header-timeout":
		cfg.seconds(k, v, "read-header-timeout")
	case "keep-alive":
		cfg.seconds(k, v, "client-idle-timeout")
	case "upstream-keepalive-timeout":
		cfg.seconds(k, v, "upstream-idle-timeout")
	case "http2-max-concurrent-streams":
		if n, err := strconv.Atoi(t); err == nil && n > 0 {
			flagOrDefault("http2-max-concurrent-streams", strconv.Itoa(n))
			return
		}
		rep.add(unsupported, k, "%q is not a positive number; nothing carried over", v)
	case "enable-underscores-in-headers":
		if notBool() {
			return
		}
		flagOrDefault("allow-underscores-in-headers", strconv.FormatBool(b))
	case "whitelist-source-range":
		cfg.addressList(k, v, "allowlist-source-range", false, "allowlist-source-range", "whitelist-source-range")
	case "denylist-source-range":
		cfg.addressList(k, v, "denylist-source-range", false)
	case "block-cidrs":
		cfg.addressList(k, v, "denylist-source-range", true)
	case "load-balance":
		alg := map[string]string{"round_robin": "round-robin", "ewma": "ewma"}[t]
		switch alg {
		case "":
			rep.add(unsupported, k, "no equivalent: %s=%q (ingress-nginx's load-balancing algorithm): metalgate has round-robin, least-request, ewma and hash", k, v)
		case "round-robin":
			rep.add(same, k, "round_robin, ingress-nginx's default: metalgate's round-robin, its default too")
		default:
			rep.add(same, k, "%s", cfg.perIngress(ingressDefault{key: k, value: alg, own: []string{"upstream-hash-by", "hash-by", "affinity"}}))
		}
	case "use-http2":
		if notBool() {
			return
		}
		if b {
			rep.add(same, k, "\"true\", ingress-nginx's default: the proxy offers HTTP/2 by ALPN on HTTPS")
			return
		}
		rep.add(unsupported, k, "no equivalent: %s=%q (HTTP/2 off on HTTPS): the proxy always offers h2 and http/1.1 by ALPN", k, v)
	case "ssl-protocols":
		cfg.sslProtocols(k, t)
	case "ssl-ciphers", "ssl-ecdh-curve", "ssl-dh-param", "ssl-session-tickets", "ssl-session-ticket-key", "ssl-session-cache", "ssl-session-cache-size", "ssl-session-timeout", "ssl-buffer-size", "ssl-early-data":
		rep.add(unsupported, k, "no equivalent: %s=%q (nginx's TLS setting): the proxy uses Go's TLS, 1.2 and 1.3 with Go's default cipher suites and curves, session tickets on, no 0-RTT; no setting", k, v)
	case "http-redirect-code":
		if t == "308" {
			rep.add(same, k, "308, ingress-nginx's default: the proxy's redirects to HTTPS are 308")
			return
		}
		rep.add(unsupported, k, "no equivalent: %s=%q (the code of ingress-nginx's redirects to HTTPS): the proxy redirects with 308 (which, like 307, keeps the method and body)", k, v)
	case "limit-req-status-code", "limit-conn-status-code":
		if t == "429" {
			rep.add(same, k, "429: the proxy's answer to a client over a limit too (with Retry-After)")
			return
		}
		rep.add(changed, k, "%q: the proxy answers 429 with Retry-After to a client over limit-rps, limit-rpm or limit-connections; no setting", v)
	case "allow-snippet-annotations":
		if boolErr == nil && !b {
			rep.add(same, k, "\"false\": snippet annotations refused, as metalgate always does")
			return
		}
		rep.add(refused, k, "%q: metalgate refuses every *-snippet annotation whatever this says (configuration text pasted into nginx.conf is where ingress-nginx's remote-code-execution CVEs came from); each Ingress's snippets are listed as refused", v)
	case "main-snippet", "http-snippet", "server-snippet", "location-snippet", "stream-snippet", "global-auth-snippet", "modsecurity-snippet":
		rep.add(refused, k, "nginx configuration text: never translated (snippets are refused); use the metalgate.io annotations (request-headers-set, response-headers-set, …) or proxy flags for what it did")
	case "custom-http-errors":
		if t == "" {
			rep.add(same, k, "empty, ingress-nginx's default: backends' error pages pass as they are")
			return
		}
		if proxyHasDefaultBackend {
			// A per-Ingress custom-http-errors annotation; without a default-backend
			// annotation the proxy asks its own --default-backend-service, as ingress-nginx
			// asked the controller's.
			rep.add(changed, k, "%s; set the proxy's --default-backend-service to the Service ingress-nginx's controller named in its --default-backend-service (without one the answers pass as they are)", cfg.perIngress(ingressDefault{key: k, value: t}))
			return
		}
		rep.add(unsupported, k, "not yet supported: %s=%q (ingress-nginx sent these answers to its default backend's error pages): backends' error pages pass as they are", k, v)
	case "global-auth-url":
		if t == "" {
			rep.add(same, k, "empty: no global authentication")
			return
		}
		rep.add(breaking, k, "%q: every Ingress (unless enable-global-auth: \"false\") was behind this authentication; metalgate has no global one: add auth-url (and auth-signin, auth-response-headers) to each Ingress that needs it, or it is served without", v)
	case "block-user-agents", "block-referers":
		if t == "" {
			rep.add(same, k, "empty: nothing blocked")
			return
		}
		rep.add(breaking, k, "no equivalent: %s=%q (requests with these %s were refused everywhere): metalgate serves them", k, v, map[string]string{"block-user-agents": "User-Agent headers", "block-referers": "Referer headers"}[k])
	case "enable-modsecurity", "enable-owasp-modsecurity-crs":
		if boolErr == nil && !b {
			rep.add(same, k, "\"false\", ingress-nginx's default")
			return
		}
		rep.add(breaking, k, "no equivalent: %s=%q (the ModSecurity web application firewall on every Ingress): metalgate has none", k, v)
	default:
		if what, known := nginxConfigKeys[k]; known {
			rep.add(unsupported, k, "no equivalent: %s=%q (%s)", k, v, what)
			return
		}
		rep.add(unsupported, k, "no equivalent: %s=%q (not a key migrate knows of ingress-nginx's ConfigMap, which ignores unknown keys: check it by hand)", k, v)
	}
}

// seconds translates a key of whole seconds (ingress-nginx's unit) into a duration flag.
func (cfg *controllerConfig) seconds(k, v, flagName string) {
	d, ok := nginxSeconds(strings.TrimSpace(v))
	if !ok {
		cfg.rep.add(unsupported, k, "%q is not a number of seconds; nothing carried over (the proxy's --%s is %s)", v, flagName, proxyDefaults[flagName])
		return
	}
	cfg.rep.add(same, k, "%s", cfg.flag(k, flagName, d))
}

// addressList makes a global address list a per-Ingress annotation.
func (cfg *controllerConfig) addressList(k, v, name string, union bool, own ...string) {
	cidrs := ingress.SplitList(v)
	if len(cidrs) == 0 {
		cfg.rep.add(same, k, "empty: no list, ingress-nginx's default")
		return
	}
	line := cfg.perIngress(ingressDefault{key: k, name: name, value: strings.Join(cidrs, ","), own: own, union: union})
	if union {
		line += ": ingress-nginx refused these addresses on every Ingress without an address list of its own"
	}
	cfg.rep.add(same, k, "%s", line)
}

// sslProtocols compares ssl-protocols with what the proxy serves (TLS 1.2 and 1.3).
func (cfg *controllerConfig) sslProtocols(k, v string) {
	var old, has12, has13 bool
	for _, p := range strings.Fields(v) {
		switch p {
		case "TLSv1.2":
			has12 = true
		case "TLSv1.3":
			has13 = true
		default:
			old = true
		}
	}
	switch {
	case has12 && has13 && !old:
		cfg.rep.add(same, k, "%q: the proxy serves TLS 1.2 and 1.3 too", v)
	case old:
		cfg.rep.add(changed, k, "%q: the proxy serves TLS 1.2 and 1.3 only: clients of older versions fail the handshake; no setting", v)
	default:
		cfg.rep.add(changed, k, "%q: the proxy serves TLS 1.2 and 1.3; no setting", v)
	}
}

// realIPCIDRs are the proxy-real-ip-cidr prefixes, or why they cannot become
// --trusted-proxies: unset (ingress-nginx's default 0.0.0.0/0), everyone, or invalid.
func realIPCIDRs(all map[string]string) ([]string, string) {
	v, ok := all["proxy-real-ip-cidr"]
	if !ok || strings.TrimSpace(v) == "" {
		return nil, "unset (ingress-nginx's default 0.0.0.0/0, everyone)"
	}
	prefixes, err := ingress.ParseAddressList(v)
	if err != nil {
		return nil, fmt.Sprintf("%q: %v", v, err)
	}
	var out []string
	for _, p := range prefixes {
		if p.Bits() == 0 {
			return nil, fmt.Sprintf("%q trusts everyone (%s)", v, p)
		}
		out = append(out, p.String())
	}
	if len(out) == 0 {
		return nil, "unset (ingress-nginx's default 0.0.0.0/0, everyone)"
	}
	return out, ""
}

// nginxSeconds is whole seconds (ingress-nginx's ConfigMap timeouts) as a Go duration.
func nginxSeconds(s string) (string, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return "", false
	}
	return strconv.Itoa(n) + "s", true
}

// applyDefaults gives a migrated Ingress the annotations the ConfigMap stands for (the
// nginx or metalgate.io form, as the others), unless it sets its own; it returns the Ingress's
// nginx annotations as ingress-nginx saw them with those defaults, for the ssl-redirect rule.
func (cfg *controllerConfig) applyDefaults(res *ingressResult, orig, ann map[string]string, rewrite bool) map[string]string {
	if cfg == nil || len(cfg.defaults) == 0 {
		return orig
	}
	eff := make(map[string]string, len(orig))
	for k, v := range orig {
		eff[k] = v
	}
	ownKey := func(names []string) string {
		for _, n := range names {
			for _, p := range []string{ingress.PrefixMetalgate, ingress.PrefixNginx} {
				if _, ok := ann[p+n]; ok {
					return p + n
				}
			}
		}
		return ""
	}
	// The lists that yield to the Ingress's own first: block-cidrs looks at the result.
	ordered := slices.Clone(cfg.defaults)
	sort.SliceStable(ordered, func(i, j int) bool { return !ordered[i].union && ordered[j].union })
	for _, d := range ordered {
		target := ingress.PrefixNginx + d.name
		if rewrite {
			target = ingress.PrefixMetalgate + d.name
		}
		what := "ConfigMap " + d.key
		switch own := ownKey(d.own); {
		case d.union && ownKey(addressLists) != "":
			// nginx's access rules are not inherited where a location has its own: ingress-nginx
			// did not apply block-cidrs to an Ingress with an address list.
			if own == "" {
				own = target
			}
			merged := unionList(ann[own], d.value)
			ann[own] = merged
			eff[ingress.PrefixNginx+d.name] = merged
			res.rep.add(changed, what, "%s: %q: ingress-nginx did not refuse %s here (the Ingress has an address list, and nginx's access rules replace the global ones then); metalgate refuses them on every Ingress", own, merged, d.value)
		case d.union:
			ann[target] = d.value
			eff[ingress.PrefixNginx+d.name] = d.value
			res.rep.add(same, what, "→ %s: %q (ingress-nginx refused those addresses on every Ingress without an address list of its own)", target, d.value)
		case own != "":
			res.rep.add(same, what, "not applied: the Ingress sets %s, which wins over the ConfigMap in ingress-nginx as in metalgate", own)
		default:
			ann[target] = d.value
			eff[ingress.PrefixNginx+d.name] = d.value
			res.rep.add(same, what, "→ %s: %q (the ConfigMap's value for every Ingress without its own)", target, d.value)
		}
	}
	return eff
}

// addressLists are the annotations (without prefix) of an Ingress's address lists.
var addressLists = []string{"allowlist-source-range", "whitelist-source-range", "denylist-source-range"}

// unionList joins two comma-separated lists, without repeats, in order.
func unionList(a, b string) string {
	var out []string
	for _, part := range []string{a, b} {
		for _, s := range ingress.SplitList(part) {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return strings.Join(out, ",")
}

// noRedirectLine reports, on a TLS Ingress that gets no ssl-redirect because the ConfigMap
// turned ingress-nginx's default off, that nothing changes.
func (cfg *controllerConfig) noRedirectLine(res *ingressResult) {
	res.rep.add(same, "spec.tls", "no redirect to HTTPS: the controller ConfigMap says ssl-redirect: \"false\", and metalgate redirects only when an Ingress asks")
}

// writeControllerConfig prints the controller ConfigMap's block and the proxy flags it asks
// for, or says none was found.
func writeControllerConfig(b *strings.Builder, cfg *controllerConfig) {
	if cfg == nil {
		return
	}
	if !cfg.found {
		fmt.Fprintf(b, "\nno controller ConfigMap found; ingress-nginx's defaults assumed (looked for %s, %s; --nginx-configmap or -f with it to read another)\n", cfg.name, cfg.how)
		return
	}
	fmt.Fprintf(b, "\n%s", cfg.rep.title)
	if cfg.rep.from != "" {
		fmt.Fprintf(b, " (from %s)", cfg.rep.from)
	}
	b.WriteString("\n")
	for _, e := range cfg.rep.entries {
		fmt.Fprintf(b, "  %-12s %s: %s\n", e.verdict, e.what, e.detail)
	}
	if len(cfg.flags) == 0 {
		b.WriteString("\nProxy flags: none to set (the ConfigMap's values are the proxy's defaults)\n")
		return
	}
	b.WriteString("\nProxy flags (paste into the Helm chart's proxy.extraArgs, or the proxy's args)\n")
	for _, f := range cfg.flags {
		fmt.Fprintf(b, "  --%s=%s\n", f.name, f.value)
	}
}

// nginxConfigKeys are ingress-nginx ConfigMap keys metalgate has no equivalent of, with what
// each did (the keys with one are translated in controllerConfig.key).
var nginxConfigKeys = map[string]string{
	"add-headers":                                  "response headers from a ConfigMap on every response: use metalgate.io/response-headers-set on the Ingresses",
	"proxy-set-headers":                            "request headers from a ConfigMap on every request: use metalgate.io/request-headers-set on the Ingresses",
	"allow-backend-server-header":                  "backends' Server header passed on: the proxy sets --server-header",
	"annotation-value-word-blocklist":              "words refused in annotation values: the proxy parses every annotation and refuses snippets",
	"annotations-risk-level":                       "the riskiest annotations accepted: the proxy refuses snippets and reports what it does not support",
	"allow-cross-namespace-resources":              "annotations naming other namespaces' objects: the proxy allows another namespace's auth-url Service with a ReferenceGrant only",
	"hide-headers":                                 "response headers hidden from clients: use metalgate.io/response-headers-remove",
	"access-log-params":                            "nginx access_log parameters",
	"access-log-path":                              "the access log's file: the proxy logs to standard output (--access-log)",
	"http-access-log-path":                         "the access log's file",
	"stream-access-log-path":                       "the TCP/UDP access log's file",
	"enable-access-log-for-default-backend":        "access log of the default backend",
	"error-log-path":                               "nginx's error log file",
	"error-log-level":                              "nginx's error log level",
	"disable-access-log":                           "no access log: the proxy's --access-log=false",
	"log-format-upstream":                          "the access log's format: the proxy writes JSON lines (--access-log-fields)",
	"log-format-stream":                            "the TCP/UDP access log's format",
	"log-format-escape-json":                       "JSON escaping in the access log",
	"log-format-escape-none":                       "no escaping in the access log",
	"skip-access-log-urls":                         "paths left out of the access log",
	"enable-syslog":                                "logs to syslog",
	"syslog-host":                                  "the syslog server",
	"syslog-port":                                  "the syslog server's port",
	"client-header-buffer-size":                    "nginx's buffer for request headers",
	"client-body-buffer-size":                      "nginx's buffer for request bodies",
	"large-client-header-buffers":                  "the largest request header line and block: the proxy's --max-header-bytes bounds the whole block",
	"http2-max-field-size":                         "the largest HTTP/2 header field",
	"http2-max-header-size":                        "the largest HTTP/2 header block",
	"http2-max-requests":                           "requests per HTTP/2 connection",
	"keep-alive-requests":                          "requests per client keep-alive connection",
	"disable-ipv6":                                 "no IPv6 listener",
	"disable-ipv6-dns":                             "no IPv6 in nginx's resolver",
	"enable-ocsp":                                  "OCSP stapling",
	"ignore-invalid-headers":                       "request headers with invalid names dropped: the proxy refuses them (Go's HTTP server)",
	"retry-non-idempotent":                         "retries of POST, PATCH and LOCK: the proxy retries only idempotent requests without a body (--retries)",
	"enable-multi-accept":                          "nginx's multi_accept",
	"max-worker-connections":                       "connections per nginx worker: the proxy's --max-connections counts per listener",
	"max-worker-open-files":                        "open files per nginx worker",
	"map-hash-bucket-size":                         "nginx hash table sizing",
	"server-name-hash-max-size":                    "nginx hash table sizing",
	"server-name-hash-bucket-size":                 "nginx hash table sizing",
	"proxy-headers-hash-max-size":                  "nginx hash table sizing",
	"proxy-headers-hash-bucket-size":               "nginx hash table sizing",
	"variables-hash-bucket-size":                   "nginx hash table sizing",
	"variables-hash-max-size":                      "nginx hash table sizing",
	"nginx-status-ipv4-whitelist":                  "who may read nginx's status page: the proxy's /metrics is for loopback or a bearer token",
	"nginx-status-ipv6-whitelist":                  "who may read nginx's status page",
	"plugins":                                      "ingress-nginx's Lua plugins",
	"reuse-port":                                   "SO_REUSEPORT per nginx worker",
	"server-tokens":                                "nginx's version in the Server header: the proxy sends --server-header (metalgate)",
	"proxy-protocol-header-timeout":                "the wait for a PROXY header",
	"use-gzip":                                     "gzip compression of responses: the proxy passes responses as the backend sent them",
	"gzip-level":                                   "gzip compression level",
	"gzip-min-length":                              "gzip's smallest response",
	"gzip-types":                                   "gzip's MIME types",
	"gzip-disable":                                 "user agents without gzip",
	"enable-brotli":                                "brotli compression of responses",
	"brotli-level":                                 "brotli compression level",
	"brotli-min-length":                            "brotli's smallest response",
	"brotli-types":                                 "brotli's MIME types",
	"use-geoip":                                    "GeoIP variables",
	"use-geoip2":                                   "GeoIP2 variables",
	"worker-processes":                             "nginx worker processes: the proxy is one Go process using every CPU",
	"worker-cpu-affinity":                          "nginx workers' CPU binding",
	"worker-shutdown-timeout":                      "how long nginx workers finish requests on reload: the proxy swaps its table without dropping connections; on SIGTERM --shutdown-timeout",
	"upstream-keepalive-connections":               "idle upstream connections kept per nginx worker: the proxy's --upstream-keepalive counts per endpoint",
	"upstream-keepalive-time":                      "the longest life of an upstream keep-alive connection",
	"upstream-keepalive-requests":                  "requests per upstream keep-alive connection",
	"limit-conn-zone-variable":                     "the key of limit-connections: the proxy keys by client address (--rate-limit-ipv6-prefix for IPv6)",
	"proxy-stream-timeout":                         "TCP/UDP proxying (tcp-services): not served by metalgate's proxy",
	"proxy-stream-next-upstream":                   "TCP/UDP proxying",
	"proxy-stream-next-upstream-timeout":           "TCP/UDP proxying",
	"proxy-stream-next-upstream-tries":             "TCP/UDP proxying",
	"proxy-stream-responses":                       "UDP proxying",
	"bind-address":                                 "the addresses nginx listens on: the proxy's --http-bind-address and --https-bind-address",
	"proxy-add-original-uri-header":                "X-Original-Uri to backends",
	"generate-request-id":                          "X-Request-ID generated: the proxy always sends X-Request-Id (kept from the client when short and printable)",
	"enable-opentracing":                           "OpenTracing: the proxy exports OpenTelemetry spans with --otlp-endpoint",
	"enable-opentelemetry":                         "OpenTelemetry: the proxy exports spans with --otlp-endpoint and --otlp-sample-ratio",
	"otlp-collector-host":                          "the OpenTelemetry collector: the proxy's --otlp-endpoint",
	"otlp-collector-port":                          "the OpenTelemetry collector's port: the proxy's --otlp-endpoint",
	"otel-sampler-ratio":                           "the trace sampling ratio: the proxy's --otlp-sample-ratio",
	"proxy-buffers-number":                         "nginx's response buffers: the proxy streams responses",
	"proxy-buffer-size":                            "nginx's buffer for response headers: the proxy's --max-response-header-bytes bounds them",
	"proxy-buffering":                              "response buffering: the proxy streams responses",
	"proxy-request-buffering":                      "request body buffering: the proxy streams request bodies",
	"proxy-max-temp-file-size":                     "response buffering to disk",
	"proxy-cookie-path":                            "Set-Cookie path rewriting",
	"proxy-cookie-domain":                          "Set-Cookie domain rewriting",
	"proxy-next-upstream":                          "when a request goes to the next endpoint: the proxy retries connection failures of idempotent requests without a body (--retries)",
	"proxy-next-upstream-timeout":                  "the time retries may take",
	"proxy-next-upstream-tries":                    "how many endpoints a request may try: the proxy's --retries",
	"proxy-redirect-from":                          "Location header rewriting",
	"proxy-redirect-to":                            "Location header rewriting",
	"proxy-http-version":                           "the HTTP version to backends: the proxy speaks HTTP/1.1, or what backend-protocol says",
	"limit-rate":                                   "bandwidth limit per response",
	"limit-rate-after":                             "bytes before the bandwidth limit",
	"lua-shared-dicts":                             "Lua shared memory sizes",
	"no-tls-redirect-locations":                    "paths never redirected to HTTPS",
	"no-auth-locations":                            "paths never sent to global-auth-url",
	"global-auth-method":                           "the method of global-auth-url",
	"global-auth-signin":                           "the sign-in page of global-auth-url",
	"global-auth-signin-redirect-param":            "the redirect parameter of global-auth-signin",
	"global-auth-response-headers":                 "headers copied from global-auth-url's answer",
	"global-auth-request-redirect":                 "X-Auth-Request-Redirect of global-auth-url",
	"global-auth-cache-key":                        "caching of global-auth-url's answers",
	"global-auth-cache-duration":                   "caching of global-auth-url's answers",
	"global-auth-always-set-cookie":                "cookies of global-auth-url's answers",
	"global-rate-limit-memcached-host":             "memcached of global-rate-limit: metalgate's rate limits count per proxy replica",
	"global-rate-limit-memcached-port":             "memcached of global-rate-limit",
	"global-rate-limit-memcached-connect-timeout":  "memcached of global-rate-limit",
	"global-rate-limit-memcached-max-idle-timeout": "memcached of global-rate-limit",
	"global-rate-limit-memcached-pool-size":        "memcached of global-rate-limit",
	"global-rate-limit-status-code":                "the status of global-rate-limit",
	"proxy-ssl-location-only":                      "where proxy-ssl-* apply in nginx.conf",
	"default-type":                                 "the default Content-Type of responses",
	"service-upstream":                             "the Service's ClusterIP instead of its endpoints: the proxy balances over endpoints",
	"ssl-reject-handshake":                         "TLS refused for unknown hosts: the proxy answers them with its default certificate",
	"debug-connections":                            "nginx debug logging for some clients",
	"strict-validate-path-type":                    "strict paths for Exact and Prefix: the proxy matches paths as the Ingress API defines them",
	"enable-aio-write":                             "nginx's aio_write",
	"enable-auth-access-log":                       "access log of auth subrequests",
	"disable-proxy-intercept-errors":               "custom-http-errors on backends' own errors",
	"preserve-trailing-slash":                      "trailing slashes kept on redirects",
}
