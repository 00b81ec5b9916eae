package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// nginxController is the spec.controller of ingress-nginx's IngressClasses. (The API server
// refuses an Ingress that sets both spec.ingressClassName and annotationIngressClass.)
const nginxController = "k8s.io/ingress-nginx"

// ingressMigrator migrates the ingress-nginx Ingresses of one run.
type ingressMigrator struct {
	s *migrateSettings
	// byNginx is ingress.Annotations() by the nginx name of each annotation.
	byNginx map[string]ingress.AnnotationInfo
	// probed caches, per nginx annotation, the problem the proxy reports for it alone
	// (UnsupportedAnnotation or RefusedAnnotation), or a zero Problem.
	probed map[string]table.Problem
	// ctl is ingress-nginx's controller ConfigMap as migrate read it (nil: its defaults).
	ctl *controllerConfig
}

func newIngressMigrator(s *migrateSettings) *ingressMigrator {
	m := &ingressMigrator{s: s, byNginx: map[string]ingress.AnnotationInfo{}, probed: map[string]table.Problem{}}
	for _, a := range ingress.Annotations() {
		if a.Nginx != "" {
			m.byNginx[a.Nginx] = a
		}
	}
	return m
}

// classes returns the proxy's view for Build: one IngressClass, the migrated Ingresses' own.
func (m *ingressMigrator) classes() []*networkingv1.IngressClass {
	return []*networkingv1.IngressClass{{
		ObjectMeta: metav1.ObjectMeta{Name: m.s.ingressClass},
		Spec:       networkingv1.IngressClassSpec{Controller: ingress.ControllerName},
	}}
}

// probe asks the proxy's own parser what it makes of one nginx annotation alone: whether it
// is unsupported or refused (and why, in the words of the Warning event the proxy emits).
func (m *ingressMigrator) probe(key string) table.Problem {
	if p, ok := m.probed[key]; ok {
		return p
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "probe", Name: "probe", Annotations: map[string]string{key: ""}},
		Spec:       networkingv1.IngressSpec{IngressClassName: &m.s.ingressClass},
	}
	_, problems := ingress.Build(ingress.Input{Ingresses: []*networkingv1.Ingress{ing}, Classes: m.classes(), NginxAnnotations: true})
	var out table.Problem
	for _, p := range problems {
		if p.Reason == table.ReasonUnsupportedAnnotation || p.Reason == table.ReasonRefusedAnnotation {
			out = p
		}
	}
	m.probed[key] = out
	return out
}

// nginxClasses are the class names ingress-nginx serves, and the one of them that is the
// cluster's default ("" if none): from --nginx-class and the IngressClasses read.
func nginxClasses(s *migrateSettings, ingressClasses []*unstructured.Unstructured) (map[string]bool, string) {
	names := map[string]bool{}
	for _, c := range s.nginxClasses {
		names[c] = true
	}
	def := ""
	for _, c := range ingressClasses {
		if ctl, _, _ := unstructured.NestedString(c.Object, "spec", "controller"); ctl != nginxController && !names[c.GetName()] {
			continue
		}
		names[c.GetName()] = true
		if c.GetAnnotations()[annotationDefaultClass] == "true" {
			def = c.GetName()
		}
	}
	return names, def
}

// selectIngress decides whether an Ingress is ingress-nginx's: its class and how it was
// found, or why it is not migrated.
func (m *ingressMigrator) selectIngress(u *unstructured.Unstructured, classes map[string]bool, defaultClass string) (class, how, skipped string) {
	if u.GetAPIVersion() != "networking.k8s.io/v1" {
		return "", "", fmt.Sprintf("apiVersion %s was removed in Kubernetes 1.22; read it as networking.k8s.io/v1 (kubectl get -o yaml does) and migrate that", u.GetAPIVersion())
	}
	class, how = u.GetAnnotations()[annotationIngressClass], "annotation "+annotationIngressClass
	if c, ok, _ := unstructured.NestedString(u.Object, "spec", "ingressClassName"); ok && c != "" {
		class, how = c, "spec.ingressClassName"
	}
	switch {
	case class == m.s.ingressClass:
		return "", "", fmt.Sprintf("already of class %s", class)
	case class == "" && defaultClass != "":
		return defaultClass, "the default IngressClass", ""
	case class == "":
		return "", "", "no class, and no ingress-nginx IngressClass read is the default (ingress-nginx serves such an Ingress only then, or with --watch-ingress-without-class): set spec.ingressClassName, or use --nginx-class and -f with its IngressClass"
	case !classes[class]:
		return "", "", fmt.Sprintf("class %s (%s) is not ingress-nginx's (--nginx-class %s, or an IngressClass with controller %s)", class, how, strings.Join(sortedKeys(classes), ","), nginxController)
	}
	return class, how, ""
}

// ingressResult is one migrated Ingress on its way: the ssl-redirect decision waits for the
// proxy's view of which routes have TLS.
type ingressResult struct {
	out *unstructured.Unstructured
	rep *objectReport
	// sslRedirect is the nginx ssl-redirect value the Ingress carries into metalgate (its own
	// or the one added for ingress-nginx's default), "" when it carries none.
	sslRedirect string
	// sslAdded says it was added for ingress-nginx's default.
	sslAdded bool
}

// migrateIngress translates one ingress-nginx Ingress: the class, and each nginx annotation.
func (m *ingressMigrator) migrateIngress(u *unstructured.Unstructured, origin, class, how string) *ingressResult {
	res, ann := m.newIngress(u, origin, class)
	orig := u.GetAnnotations()
	var keys []string
	for k := range orig {
		if strings.HasPrefix(k, ingress.PrefixNginx) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	rewroteTarget := false
	for _, k := range keys {
		if m.migrateAnnotation(res, ann, orig, k) {
			rewroteTarget = true
		}
	}
	if rewroteTarget {
		useRegexForRewrite(res.rep, ann)
	}
	rpmBurst(res.rep, ann, orig)
	eff := m.ctl.applyDefaults(res, orig, ann, m.s.rewrite)
	m.defaultSSLRedirect(res, u, eff)
	if res.sslRedirect != "" {
		ann[ingress.PrefixNginx+"ssl-redirect"] = res.sslRedirect
	}
	if len(ann) > 0 {
		res.out.SetAnnotations(ann)
	} else {
		unstructured.RemoveNestedField(res.out.Object, "metadata", "annotations")
	}
	return res
}

// newIngress is u moved to metalgate's class, with its report, and the annotations it
// starts from (without the old class annotation); the report warns when something that
// generates the Ingress (an owner, Helm) may put the old class back.
func (m *ingressMigrator) newIngress(u *unstructured.Unstructured, origin, class string) (*ingressResult, map[string]string) {
	out := newObject("networking.k8s.io/v1", "Ingress", u.GetNamespace(), u)
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	spec["ingressClassName"] = m.s.ingressClass
	out.Object["spec"] = spec
	rep := &objectReport{
		title: fmt.Sprintf("Ingress %s (class %s → %s)", objectName(u), class, m.s.ingressClass),
		from:  origin,
	}
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if _, ok := ann[annotationIngressClass]; ok {
		delete(ann, annotationIngressClass)
		rep.add(same, annotationIngressClass, "replaced by spec.ingressClassName: %s", m.s.ingressClass)
	}
	if refs := u.GetOwnerReferences(); len(refs) > 0 {
		rep.add(changed, "metadata.ownerReferences", "%s %s owns this Ingress and may put its class back: migrate what generates it too", refs[0].Kind, refs[0].Name)
	}
	if u.GetLabels()["app.kubernetes.io/managed-by"] == "Helm" {
		rep.add(changed, "metadata.labels", "managed by Helm: the next helm upgrade puts the old class and annotations back unless the chart's values change too")
	}
	return &ingressResult{out: out, rep: rep}, ann
}

// migrateAnnotation decides the fate of the nginx annotation k of orig in ann (the
// migrated annotations) and reports it. It returns whether it rewrote rewrite-target to the
// metalgate.io form.
func (m *ingressMigrator) migrateAnnotation(res *ingressResult, ann, orig map[string]string, k string) (rewroteTarget bool) {
	s, rep := m.s, res.rep
	name, v := strings.TrimPrefix(k, ingress.PrefixNginx), orig[k]
	if what := unenforcedProtection(name, v); what != "" {
		fate := "kept"
		if s.dropUnsupported {
			fate = "kept even with --drop-unsupported: without it the proxy would serve the Ingress unprotected"
		}
		rep.add(breaking, k, "asks for %s, which metalgate does not support: the proxy refuses every request to this Ingress (403, with a Warning event) until it is removed; %s", what, fate)
		return false
	}
	if name == "satisfy" && strings.EqualFold(strings.TrimSpace(v), "any") {
		fate := "kept: the proxy reports it in a Warning event"
		if s.dropUnsupported {
			delete(ann, k)
			fate = "left out (--drop-unsupported)"
		}
		rep.add(breaking, k, "%q: ingress-nginx let in a client that passed the address list or the authentication; metalgate asks for both, so a client that passes only one is refused; %s", v, fate)
		return false
	}
	if p := m.probe(k); p.Reason != "" {
		verdict, fate := unsupported, "kept: the proxy reports it in a Warning event ("+p.Reason+")"
		if p.Reason == table.ReasonRefusedAnnotation {
			verdict = refused
		}
		if s.dropUnsupported {
			delete(ann, k)
			fate = "left out (--drop-unsupported)"
		}
		rep.add(verdict, k, "%s; %s", strings.TrimPrefix(p.Message, "annotation "+k+" "), fate)
		return false
	}
	if name == "ssl-redirect" {
		if _, mine := orig[ingress.AnnotationSSLRedirect]; mine {
			m.shadowed(rep, ann, k, ingress.AnnotationSSLRedirect, v, orig)
		} else {
			res.sslRedirect = v // decided in finishSSLRedirect
		}
		return false
	}
	// Shadowed, in either mode: the proxy reads the metalgate.io form first (and
	// allowlist-source-range before whitelist-source-range, as ingress-nginx does).
	if target := m.metalgateForm(name); target != "" {
		if _, mine := orig[target]; mine {
			m.shadowed(rep, ann, k, target, v, orig)
			return false
		}
	}
	allow := ingress.PrefixNginx + "allowlist-source-range"
	if _, both := orig[allow]; both && name == "whitelist-source-range" {
		delete(ann, k)
		rep.add(same, k, "left out: %s is set too, and wins in ingress-nginx as in metalgate", allow)
		return false
	}
	if !s.rewrite {
		info := m.byNginx[name]
		rep.add(verdictOf(info), k, "%s", joinNonEmpty("; ", "kept as it is: the proxy reads it (--nginx-annotations, on by default)", info.Change))
		return false
	}
	switch info, known := m.byNginx[name]; {
	case known && info.Name != "":
		target := ingress.PrefixMetalgate + info.Name
		if _, mine := orig[target]; mine {
			m.shadowed(rep, ann, k, target, v, orig)
			return false
		}
		delete(ann, k)
		ann[target] = v
		rep.add(verdictOf(info), k, "%s", joinNonEmpty("; ", "→ "+target, info.Change))
		return name == "rewrite-target"
	case name == "whitelist-source-range":
		m.rename(rep, ann, orig, k, v, "allowlist-source-range", "ingress-nginx's older name of allowlist-source-range")
	case name == "upstream-hash-by":
		m.hashBy(rep, ann, orig, k, v)
	case name == "limit-burst-multiplier":
		m.burst(rep, ann, orig, k, v)
	default:
		rep.add(same, k, "kept: it has no metalgate.io form; the proxy reads it (--nginx-annotations, on by default)")
	}
	return false
}

// useRegexForRewrite sets the metalgate.io use-regex after rewrite-target was rewritten to
// the metalgate.io form: ingress-nginx's rewrite-target makes the Ingress's paths regular
// expressions (the proxy reads its nginx form so); the metalgate.io form does that only with
// use-regex.
func useRegexForRewrite(rep *objectReport, ann map[string]string) {
	if t := ann[ingress.PrefixMetalgate+"rewrite-target"]; strings.HasPrefix(t, "/") && ann[ingress.PrefixMetalgate+"use-regex"] != "true" {
		before, had := ann[ingress.PrefixMetalgate+"use-regex"]
		ann[ingress.PrefixMetalgate+"use-regex"] = "true"
		if had {
			rep.add(changed, ingress.PrefixMetalgate+"use-regex", "%q → \"true\": ingress-nginx treats the paths as regular expressions whenever rewrite-target is set, whatever use-regex says", before)
		} else {
			rep.add(same, ingress.PrefixMetalgate+"use-regex", "\"true\" added: ingress-nginx treats the paths as regular expressions whenever rewrite-target is set")
		}
	}
}

// defaultSSLRedirect carries ingress-nginx's default into the migrated Ingress: it redirects
// plain HTTP to HTTPS for the hosts with TLS unless told not to; metalgate only with the
// annotation. The nginx form of ssl-redirect has ingress-nginx's meaning (only hosts with
// TLS), so it keeps the behaviour exactly.
// The controller ConfigMap's ssl-redirect: "false" turns that default off (and force-ssl-redirect
// from it counts as the Ingress's own).
func (m *ingressMigrator) defaultSSLRedirect(res *ingressResult, u *unstructured.Unstructured, orig map[string]string) {
	_, mine := orig[ingress.AnnotationSSLRedirect]
	_, nginxSet := orig[ingress.PrefixNginx+"ssl-redirect"]
	tls, _, _ := unstructured.NestedSlice(u.Object, "spec", "tls")
	if !mine && !nginxSet && len(tls) > 0 && !forceSSL(orig) {
		if m.ctl != nil && !m.ctl.sslRedirect {
			m.ctl.noRedirectLine(res)
			return
		}
		res.sslRedirect, res.sslAdded = "true", true
	}
}

// unenforcedProtection says what the nginx annotation name, with value v, protects when the
// proxy does not enforce it (ingress.Protections, Supported false, v not inert); "" otherwise.
func unenforcedProtection(name, v string) string {
	for _, p := range ingress.Protections() {
		if p.Nginx == name && !p.Supported && !slices.Contains(p.Inert, strings.ToLower(strings.TrimSpace(v))) {
			return p.Protects
		}
	}
	return ""
}

// protects says whether annotation key (either prefix) is one of ingress.Protections.
func protects(key string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(key, ingress.PrefixNginx), ingress.PrefixMetalgate)
	return slices.ContainsFunc(ingress.Protections(), func(p ingress.Protection) bool { return p.Nginx == name })
}

// finishSSLRedirect settles the ssl-redirect of a migrated Ingress once the proxy's table
// says which of its routes have TLS: with --rewrite-annotations the metalgate.io form replaces
// the nginx one when it means the same (no route without TLS), else the nginx form stays.
func (m *ingressMigrator) finishSSLRedirect(res *ingressResult, routes []*table.Route) {
	if res.sslRedirect == "" {
		return
	}
	key := ingress.PrefixNginx + "ssl-redirect"
	on, err := strconv.ParseBool(strings.TrimSpace(res.sslRedirect))
	allTLS := len(routes) > 0
	for _, r := range routes {
		allTLS = allTLS && r.TLS
	}
	ann := res.out.GetAnnotations()
	form := key
	if m.s.rewrite && (err != nil || !on || allTLS) {
		delete(ann, key)
		ann[ingress.AnnotationSSLRedirect] = res.sslRedirect
		form = ingress.AnnotationSSLRedirect
		res.out.SetAnnotations(ann)
	}
	why := ""
	if form == key && m.s.rewrite {
		why = fmt.Sprintf(" (not %s: it would also redirect the Ingress's routes without TLS)", ingress.AnnotationSSLRedirect)
	}
	if res.sslAdded {
		res.rep.add(changed, "spec.tls", "ingress-nginx redirects plain HTTP to HTTPS for hosts with TLS by default, metalgate only with the annotation: added %s: \"true\" to keep that%s", form, why)
		return
	}
	if form == key {
		res.rep.add(same, key, "kept%s; like ingress-nginx it redirects only hosts with TLS", why)
		return
	}
	res.rep.add(same, key, "→ %s (every route of the Ingress has TLS, so the two forms mean the same)", form)
}

// forceSSL says whether force-ssl-redirect (either form; the metalgate.io one wins) is true.
func forceSSL(ann map[string]string) bool {
	v, ok := ann[ingress.PrefixMetalgate+"force-ssl-redirect"]
	if !ok {
		v = ann[ingress.PrefixNginx+"force-ssl-redirect"]
	}
	b, _ := strconv.ParseBool(strings.TrimSpace(v))
	return b
}

// metalgateForm is the metalgate.io annotation that stands for nginx annotation name (without
// prefix), "" when there is none.
func (m *ingressMigrator) metalgateForm(name string) string {
	switch name {
	case "whitelist-source-range":
		return ingress.PrefixMetalgate + "allowlist-source-range"
	case "upstream-hash-by":
		return ingress.AnnotationHashBy
	case "limit-burst-multiplier":
		return ingress.PrefixMetalgate + "limit-burst"
	}
	if info, ok := m.byNginx[name]; ok && info.Name != "" {
		return ingress.PrefixMetalgate + info.Name
	}
	return ""
}

// shadowed drops nginx annotation k, which the proxy would not read because the Ingress
// has its metalgate.io form (ingress-nginx did read it).
func (m *ingressMigrator) shadowed(rep *objectReport, ann map[string]string, k, target, v string, orig map[string]string) {
	delete(ann, k)
	if strings.TrimSpace(orig[target]) == strings.TrimSpace(v) {
		rep.add(same, k, "left out: %s says the same", target)
		return
	}
	rep.add(changed, k, "left out: ingress-nginx read %q here, metalgate reads %s: %q", v, target, orig[target])
}

// rename moves nginx annotation k to metalgate.io/name unless the Ingress has that, which the
// proxy reads first.
func (m *ingressMigrator) rename(rep *objectReport, ann, orig map[string]string, k, v, name, why string) {
	target := ingress.PrefixMetalgate + name
	if _, mine := orig[target]; mine {
		m.shadowed(rep, ann, k, target, v, orig)
		return
	}
	delete(ann, k)
	ann[target] = v
	rep.add(same, k, "→ %s (%s)", target, why)
}

// hashBy translates upstream-hash-by (an nginx variable) into metalgate.io/hash-by, as the
// proxy's parser reads it; a variable that names no request part stays (the proxy reports it).
func (m *ingressMigrator) hashBy(rep *objectReport, ann, orig map[string]string, k, v string) {
	target := ingress.AnnotationHashBy
	if _, mine := orig[target]; mine {
		m.shadowed(rep, ann, k, target, v, orig)
		return
	}
	t := strings.TrimSpace(v)
	var to string
	switch {
	case t == "$remote_addr" || t == "$binary_remote_addr":
		to = "client-ip"
	case strings.HasPrefix(t, "$http_") && len(t) > 6:
		to = "header:" + strings.ReplaceAll(t[6:], "_", "-")
	case strings.HasPrefix(t, "$cookie_") && len(t) > 8:
		to = "cookie:" + t[8:]
	default:
		rep.add(unsupported, k, "%q: only $remote_addr, $http_NAME and $cookie_NAME have an equivalent; kept: the proxy reports it in an InvalidAnnotation Warning event", v)
		return
	}
	delete(ann, k)
	ann[target] = to
	rep.add(same, k, "%q → %s: %q", v, target, to)
}

// burst turns limit-burst-multiplier into metalgate.io/limit-burst: the rate times the
// multiplier, rounded up, as the proxy computes it.
func (m *ingressMigrator) burst(rep *objectReport, ann, orig map[string]string, k, v string) {
	target := ingress.PrefixMetalgate + "limit-burst"
	if _, mine := orig[target]; mine {
		m.shadowed(rep, ann, k, target, v, orig)
		return
	}
	rate, unit := limitRate(orig)
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if rate <= 0 || err != nil || n < 1 {
		rep.add(same, k, "kept: without a valid rate and multiplier there is no burst to compute; the proxy reads it (--nginx-annotations)")
		return
	}
	burst := strconv.Itoa(int(math.Ceil(rate * float64(n))))
	delete(ann, k)
	ann[target] = burst
	rep.add(same, k, "%q → %s: %q (the rate %s times the multiplier, as ingress-nginx's burst; change it with the rate)", v, target, burst, unit)
}

// limitRate is the rate ingress-nginx's limit-burst-multiplier multiplies, and its unit:
// limit-rps (either form) when set, else limit-rpm. ingress-nginx's burst is the multiplier
// times the limit in the limit's own unit (internal/ingress/annotations/ratelimit:
// Burst: rpm * burstMultiplier for limit-rpm), where the proxy multiplies the rate a second.
func limitRate(orig map[string]string) (float64, string) {
	rate := func(name string) (float64, bool) {
		s, ok := orig[ingress.PrefixMetalgate+name]
		if !ok {
			s, ok = orig[ingress.PrefixNginx+name]
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, ok
		}
		return f, ok
	}
	if rps, set := rate("limit-rps"); set {
		return rps, "a second" // a bad limit-rps does not fall back to limit-rpm, in the proxy either
	}
	rpm, _ := rate("limit-rpm")
	return rpm, "a minute"
}

// rpmBurst keeps ingress-nginx's burst of an Ingress limited by limit-rpm alone: 5 (or
// limit-burst-multiplier) times the rate a minute, where the proxy's default is 5 times the
// rate a second (limit-rpm "60": 300 requests at once in ingress-nginx, 5 in the proxy). It
// writes metalgate.io/limit-burst unless the Ingress, or burst, set it.
func rpmBurst(rep *objectReport, ann, orig map[string]string) {
	target := ingress.PrefixMetalgate + "limit-burst"
	if _, set := ann[target]; set {
		return
	}
	if _, set := orig[target]; set {
		return
	}
	rate, unit := limitRate(orig)
	if unit != "a minute" || rate <= 0 {
		return
	}
	n := 5 // ingress-nginx's default limit-burst-multiplier
	if v, ok := orig[ingress.PrefixNginx+"limit-burst-multiplier"]; ok {
		m, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || m < 1 {
			return // kept, and reported as the proxy reads it
		}
		n = m
	}
	burst := strconv.Itoa(int(math.Ceil(rate * float64(n))))
	ann[target] = burst
	rep.add(same, target, "%q added: ingress-nginx's burst for limit-rpm is %d times the rate a minute; the proxy's default is 5 times the rate a second", burst, n)
}

// verdictOf is how an annotation of the catalog maps: one to one, or with the change the
// catalog names.
func verdictOf(info ingress.AnnotationInfo) verdict {
	if info.Change != "" {
		return changed
	}
	return same
}

// checkIngresses builds the proxy's table from the migrated Ingresses, as the proxy would
// (nginx annotations on), and returns each Ingress's routes and annotation problems. Secrets
// are not read: an auth-secret of the Ingress's own namespace is assumed to exist and hold a
// valid htpasswd, an auth-tls-secret a valid ca.crt, so only problems of the annotations themselves are reported.
func (m *ingressMigrator) checkIngresses(results []*ingressResult) (map[types.NamespacedName][]*table.Route, map[types.NamespacedName][]table.Problem, error) {
	in := ingress.Input{Classes: m.classes(), NginxAnnotations: true}
	for _, r := range results {
		var ing networkingv1.Ingress
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.out.Object, &ing); err != nil {
			return nil, nil, fmt.Errorf("convert Ingress %s: %w", objectName(r.out), err)
		}
		in.Ingresses = append(in.Ingresses, &ing)
		in.Secrets = append(in.Secrets, stubAuthSecret(&ing)...)
		in.Secrets = append(in.Secrets, stubClientCASecret(&ing)...)
	}
	t, problems := ingress.Build(in)
	routes := map[types.NamespacedName][]*table.Route{}
	for _, r := range t.Routes() {
		routes[r.Source.NamespacedName] = append(routes[r.Source.NamespacedName], r)
	}
	for _, r := range t.Defaults() {
		routes[r.Source.NamespacedName] = append(routes[r.Source.NamespacedName], r)
	}
	byIngress := map[types.NamespacedName][]table.Problem{}
	for _, p := range problems {
		if p.Reason == table.ReasonInvalidAnnotation {
			byIngress[p.Object.NamespacedName] = append(byIngress[p.Object.NamespacedName], p)
		}
	}
	return routes, byIngress, nil
}

// stubHtpasswd is a valid htpasswd line ({SHA} of the empty password) for stubAuthSecret.
const stubHtpasswd = "migrate:{SHA}2jmj7l5rSw0yVb/vlWAYkK/YBwk="

// stubAuthSecret stands in for the basic-auth Secret an Ingress names in its own namespace.
func stubAuthSecret(ing *networkingv1.Ingress) []*corev1.Secret {
	get := func(name string) string {
		if v, ok := ing.Annotations[ingress.PrefixMetalgate+name]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(ing.Annotations[ingress.PrefixNginx+name])
	}
	name := get("auth-secret")
	if ns, n, ok := strings.Cut(name, "/"); ok {
		if ns != ing.Namespace {
			return nil // the proxy refuses it: let it say so
		}
		name = n
	}
	if name == "" {
		return nil
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ing.Namespace, Name: name}}
	if get("auth-secret-type") == "auth-map" {
		user, hash, _ := strings.Cut(stubHtpasswd, ":")
		sec.Data = map[string][]byte{user: []byte(hash)}
	} else {
		sec.Data = map[string][]byte{"auth": []byte(stubHtpasswd)}
	}
	return []*corev1.Secret{sec}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
