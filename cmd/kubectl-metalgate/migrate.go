package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// migrateOptions are the flags of kubectl metalgate migrate.
type migrateOptions struct {
	// files are -f arguments: files, directories (their *.yaml, *.yml and *.json, not
	// recursive, as kubectl -f) or "-" for standard input. None: read the cluster.
	files stringList
	// report is where the report goes; "" (the default): standard error.
	report string
	// strict makes a run with any BREAKING item exit exitBreaking (after printing everything).
	strict bool
	// nginxClassSet says --nginx-class was given (it then replaces the default).
	nginxClassSet bool
	migrateSettings
}

// migrateSettings decide the translation.
type migrateSettings struct {
	// namespace receives the MetalLB objects: --metalgate-namespace, default metalgate-system.
	namespace string
	// metallbNamespace is MetalLB's namespace: read from it in the cluster; objects from
	// files in another namespace are moved too, and reported. Default metallb-system.
	metallbNamespace string
	// nginxClasses are the IngressClass names ingress-nginx serves (besides the
	// IngressClasses read whose controller is k8s.io/ingress-nginx). Default nginx.
	nginxClasses stringList
	// ingressClass is the class migrated Ingresses get. Default metalgate.
	ingressClass string
	// rewrite turns the nginx.ingress.kubernetes.io annotations into their metalgate.io
	// forms (the documented ones); false keeps them (the proxy reads them with
	// --nginx-annotations, its default). Default true.
	rewrite bool
	// dropUnsupported leaves out the nginx annotations metalgate does not support; by
	// default they are kept, and the proxy reports each in a Warning event.
	dropUnsupported bool
	// nginxConfigMap is ingress-nginx's controller ConfigMap (namespace/name): --nginx-configmap;
	// "" discovers it (migrate_configmap.go).
	nginxConfigMap string
}

// stringList is a flag that may be given more than once, or as a comma-separated list.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Type names the flag's value in help (pflag.Value).
func (l *stringList) Type() string { return "strings" }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// migrateFlagNames are the flags only migrate takes.
var migrateFlagNames = []string{"f", "filename", "report", "strict", "metallb-namespace", "nginx-class", "ingress-class", "rewrite-annotations", "drop-unsupported", "nginx-configmap"}

// registerMigrateFlags adds migrate's flags to the plugin's flag set.
func registerMigrateFlags(fs *pflag.FlagSet, o *migrateOptions) {
	fs.VarP(&o.files, "filename", "f", "migrate: read manifests from FILE, DIR or - (repeatable); default: the cluster")
	fs.StringVar(&o.report, "report", "", "migrate: write the report to FILE instead of standard error")
	fs.BoolVar(&o.strict, "strict", false, fmt.Sprintf("migrate: exit %d when the report has a BREAKING item", exitBreaking))
	fs.StringVar(&o.metallbNamespace, "metallb-namespace", "metallb-system", "migrate: MetalLB's namespace")
	o.nginxClasses = stringList{"nginx"}
	fs.Func("nginx-class", "migrate: IngressClass names ingress-nginx serves (default nginx)", func(v string) error {
		if !o.nginxClassSet {
			o.nginxClasses, o.nginxClassSet = nil, true
		}
		return o.nginxClasses.Set(v)
	})
	fs.StringVar(&o.ingressClass, "ingress-class", "metalgate", "migrate: the class migrated Ingresses get")
	fs.BoolVar(&o.rewrite, "rewrite-annotations", true, "migrate: rewrite nginx annotations to their metalgate.io forms")
	fs.BoolVar(&o.dropUnsupported, "drop-unsupported", false, "migrate: leave out the nginx annotations metalgate does not support")
	fs.Func("nginx-configmap", "migrate: ingress-nginx's controller ConfigMap, NAMESPACE/NAME (default: the controller's --configmap, else "+nginxConfigMapDefault+")", func(v string) error {
		if _, err := parseNamespacedName(v); err != nil {
			return err
		}
		o.nginxConfigMap = v
		return nil
	})
}

// source is one object read, with where it came from.
type source struct {
	obj    *unstructured.Unstructured
	origin string // a file name, "stdin", or "" for the cluster
}

// migrate prints the metalgate manifests for the MetalLB objects and ingress-nginx Ingresses
// read (from -f, else from the cluster) and writes the report.
func migrate(ctx context.Context, e *env, out io.Writer) error {
	o := e.o.migrate
	o.namespace = e.o.metalgateNamespace
	var srcs []source
	var notes []string
	var err error
	if len(o.files) > 0 {
		srcs, err = readManifestFiles(o.files, e.stdin)
	} else {
		srcs, notes, err = readCluster(ctx, e.c, &o.migrateSettings)
	}
	if err != nil {
		return err
	}
	m, err := runMigration(srcs, &o.migrateSettings, notes)
	if err != nil {
		return err
	}
	if err := writeManifests(out, m.objects); err != nil {
		return err
	}
	if err := writeReport(m.report, o.report, e.stderr); err != nil {
		return err
	}
	if n := m.report.breaking(); o.strict && n > 0 {
		return &exitError{code: exitBreaking, err: fmt.Errorf("--strict: %d BREAKING item(s) in the report", n)}
	}
	return nil
}

// exitBreaking is the exit code of migrate --strict when the report has a BREAKING item
// (1 is an error, 2 a usage error).
const exitBreaking = 3

// exitError is an error with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// writeReport writes rep to the file path, or to stderr when path is "".
func writeReport(rep *report, path string, stderr io.Writer) error {
	if path == "" {
		return rep.write(stderr)
	}
	var b bytes.Buffer
	if err := rep.write(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

// migration is the outcome of one run: the objects to print, in order, and the report.
type migration struct {
	objects []output
	report  *report
}

// output is one migrated object and where it came from.
type output struct {
	obj  *unstructured.Unstructured
	from string
}

// kindOrder orders the output: what others refer to first.
var kindOrder = map[string]int{"IPAddressPool": 1, "L2Advertisement": 2, "BFDProfile": 3, "Community": 4, "BGPPeer": 5, "BGPAdvertisement": 6, "Ingress": 7}

// runMigration translates what was read. It is pure: every decision about an object is made
// here and in the steps it calls, from the objects alone.
func runMigration(srcs []source, s *migrateSettings, notes []string) (*migration, error) {
	rep := &report{header: []string{
		fmt.Sprintf("MetalLB objects: apiVersion metallb.io/v1beta1 and v1beta2 → metalgate.io/v1alpha1, namespace %s → %s", s.metallbNamespace, s.namespace),
		fmt.Sprintf("ingress-nginx Ingresses (classes %s): class → %s, %s", s.nginxClasses.String(), s.ingressClass, annotationMode(s)),
	}}
	rep.header = append(rep.header, notes...)
	cfg, srcs, cfgNotes := takeControllerConfig(srcs, s)
	rep.header = append(rep.header, cfgNotes...)
	if cfg.found {
		rep.skipped = append(rep.skipped, skip{describe(cfg.src), "ingress-nginx's controller ConfigMap: translated into proxy flags and Ingress annotations (its block above)"})
	}
	in := sortSources(srcs, rep)
	results := migrateMetalLBSources(in, s, rep)
	ing, err := migrateNginxSources(in, s, cfg, rep)
	if err != nil {
		return nil, err
	}
	if cfg.found || len(ing) > 0 {
		rep.controller = cfg
	}
	return ordered(append(results, ing...), rep), nil
}

// migrated is one migrated object and its report.
type migrated struct {
	out output
	rep *objectReport
}

// sources are the objects read, by what migrates them.
type sources struct {
	metallb, ingresses, services, classes []source
}

// sortSources sorts what was read by kind; what no step migrates is reported as skipped.
func sortSources(srcs []source, rep *report) sources {
	var in sources
	for _, src := range srcs {
		gvk := src.obj.GroupVersionKind()
		switch {
		case gvk.Group == metallbGroup:
			in.metallb = append(in.metallb, src)
		case gvk.Kind == "Ingress" && (gvk.Group == "networking.k8s.io" || gvk.Group == "extensions"):
			in.ingresses = append(in.ingresses, src)
		case gvk.Kind == "IngressClass" && gvk.Group == "networking.k8s.io":
			in.classes = append(in.classes, src)
		case gvk.Kind == "Service" && gvk.Group == "":
			in.services = append(in.services, src)
		default:
			rep.skipped = append(rep.skipped, skip{describe(src), otherKind(src.obj)})
		}
	}
	return in
}

// migrateMetalLBSources migrates the MetalLB objects. Advertisements that name BGPPeers which
// were not migrated say so, and each pool's address sharing is set from the Services read.
func migrateMetalLBSources(in sources, s *migrateSettings, rep *report) []migrated {
	var results []migrated
	var pools []*unstructured.Unstructured
	var poolReports []*objectReport
	droppedPeers := map[string]bool{}
	for _, src := range in.metallb {
		obj, orep, why := migrateMetalLB(src, s)
		if obj == nil {
			rep.skipped = append(rep.skipped, skip{describe(src), why})
			if src.obj.GetKind() == "BGPPeer" {
				droppedPeers[src.obj.GetName()] = true
			}
			continue
		}
		if obj.GetKind() == "IPAddressPool" {
			pools, poolReports = append(pools, obj), append(poolReports, orep)
		}
		results = append(results, migrated{output{obj, orep.from}, orep})
	}
	// An advertisement limited to peers that were not migrated would reach none of them.
	for _, r := range results {
		if r.out.obj.GetKind() != "BGPAdvertisement" {
			continue
		}
		peers, _, _ := unstructured.NestedStringSlice(r.out.obj.Object, "spec", "peers")
		for i, p := range peers {
			if droppedPeers[p] {
				r.rep.add(changed, fmt.Sprintf("spec.peers[%d]", i), "BGPPeer %s is not migrated (see Not migrated): nothing is announced to it", p)
			}
		}
	}
	var svcObjs []*unstructured.Unstructured
	for _, src := range in.services {
		svcObjs = append(svcObjs, src.obj)
		if srep := serviceReport(src.obj, src.origin); srep != nil {
			rep.services = append(rep.services, srep)
		}
	}
	across := sharedAcrossNamespaces(pools, svcObjs)
	for i, p := range pools {
		setAddressSharing(p, poolReports[i], across[p.GetName()], len(in.services) > 0)
	}
	return results
}

// migrateNginxSources moves the Ingresses of ingress-nginx's classes to metalgate's and
// reports what the proxy will say about their annotations as migrated. IngressClasses are
// never migrated: each is reported as skipped, with why.
func migrateNginxSources(in sources, s *migrateSettings, cfg *controllerConfig, rep *report) ([]migrated, error) {
	var classObjs []*unstructured.Unstructured
	for _, c := range in.classes {
		classObjs = append(classObjs, c.obj)
		switch ctl, _, _ := unstructured.NestedString(c.obj.Object, "spec", "controller"); {
		case ctl == nginxController || slices.Contains(s.nginxClasses, c.obj.GetName()):
			rep.skipped = append(rep.skipped, skip{describe(c), "ingress-nginx's IngressClass: its Ingresses move to class " + s.ingressClass + " (metalgate's install creates it)"})
		default:
			rep.skipped = append(rep.skipped, skip{describe(c), fmt.Sprintf("controller %s is not ingress-nginx: left alone, with its Ingresses", ctl)})
		}
	}
	nginx, defaultClass := nginxClasses(s, classObjs)
	im := newIngressMigrator(s)
	im.ctl = cfg
	var ing []*ingressResult
	for _, src := range in.ingresses {
		class, how, why := im.selectIngress(src.obj, nginx, defaultClass)
		if why != "" {
			rep.skipped = append(rep.skipped, skip{describe(src), why})
			continue
		}
		ing = append(ing, im.migrateIngress(src.obj, src.origin, class, how))
	}
	if len(ing) == 0 {
		return nil, nil
	}
	routes, _, err := im.checkIngresses(ing)
	if err != nil {
		return nil, err
	}
	for _, r := range ing {
		im.finishSSLRedirect(r, routes[types.NamespacedName{Namespace: r.out.GetNamespace(), Name: r.out.GetName()}])
	}
	// What the proxy will say about the annotations as migrated.
	_, problems, err := im.checkIngresses(ing)
	if err != nil {
		return nil, err
	}
	var results []migrated
	for _, r := range ing {
		for _, p := range problems[types.NamespacedName{Namespace: r.out.GetNamespace(), Name: r.out.GetName()}] {
			key, detail := problemKey(p.Message)
			if key != "" && (mentionedAs(r.rep, key, unsupported) || mentionedAs(r.rep, key, breaking)) {
				continue // already said, with what migrate did about it
			}
			v := unsupported
			if key != "" && protects(key) {
				v = breaking // an authentication or address list refused: the Ingress is
			}
			r.rep.add(v, joinNonEmpty(" ", key, "("+p.Reason+")"), "%s; the proxy says so in a Warning event", detail)
		}
		results = append(results, migrated{output{r.out, r.rep.from}, r.rep})
	}
	return results, nil
}

// ordered is the migration of results in output order: what others refer to first
// (kindOrder), then by name; the report lists the objects in the same order.
func ordered(results []migrated, rep *report) *migration {
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i].out.obj, results[j].out.obj
		if kindOrder[a.GetKind()] != kindOrder[b.GetKind()] {
			return kindOrder[a.GetKind()] < kindOrder[b.GetKind()]
		}
		return objectName(a) < objectName(b)
	})
	m := &migration{report: rep}
	for _, r := range results {
		m.objects = append(m.objects, r.out)
		rep.objects = append(rep.objects, r.rep)
	}
	return m
}

// otherKind says why an object that is neither MetalLB's nor an Ingress is not migrated,
// naming the two kinds MetalLB users most often have beside its CRDs.
func otherKind(u *unstructured.Unstructured) string {
	if why := controllerObjectReason(u); why != "" {
		return why
	}
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "ConfigMap" && u.Object["data"] != nil && strings.HasPrefix(u.GetNamespace(), "metallb"):
		if _, ok, _ := unstructured.NestedString(u.Object, "data", "config"); ok {
			return "MetalLB's configuration before 0.13 (ConfigMap): convert it to MetalLB's CRDs with MetalLB's configmaptocrs tool first, then migrate those"
		}
	case strings.HasSuffix(gvk.Group, ".metallb.io"):
		return fmt.Sprintf("%s is frr-k8s's or the MetalLB operator's (%s): metalgate's speaker embeds its own BGP; write its peers as BGPPeers", gvk.Kind, gvk.Group)
	}
	return "not a MetalLB object, an Ingress, an IngressClass or a Service"
}

// problemKey splits a proxy problem message "annotation KEY=… is invalid (…)", or "KEY: …"
// (what the build says of an auth-url, auth-type or auth-secret), into the annotation's key and
// the rest; ("", message) when it names none.
func problemKey(msg string) (key, detail string) {
	if strings.HasPrefix(msg, ingress.PrefixMetalgate) || strings.HasPrefix(msg, ingress.PrefixNginx) {
		if k, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(k, " =") {
			return k, rest
		}
	}
	rest, ok := strings.CutPrefix(msg, "annotation ")
	if !ok {
		return "", msg
	}
	end := strings.IndexAny(rest, "= ")
	if end <= 0 {
		return "", msg
	}
	return rest[:end], strings.TrimSpace(strings.TrimPrefix(rest[end:], "="))
}

// mentionedAs says whether the report has an entry for what with verdict v.
func mentionedAs(rep *objectReport, what string, v verdict) bool {
	for _, e := range rep.entries {
		if e.what == what && e.verdict == v {
			return true
		}
	}
	return false
}

func annotationMode(s *migrateSettings) string {
	if s.rewrite {
		return "nginx.ingress.kubernetes.io annotations → metalgate.io (--rewrite-annotations)"
	}
	return "nginx.ingress.kubernetes.io annotations kept (--rewrite-annotations=false: the proxy reads them with --nginx-annotations)"
}

// describe names an object read for the report: "Kind namespace/name (origin)".
func describe(src source) string {
	return joinNonEmpty(" ", src.obj.GetKind(), objectName(src.obj), parenthesize(src.origin))
}

func parenthesize(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// writeManifests prints the objects as one multi-document YAML stream, each after a comment
// saying where it came from.
func writeManifests(w io.Writer, objs []output) error {
	var b bytes.Buffer
	b.WriteString("# metalgate manifests from kubectl metalgate migrate; the report says what changed and what did not map.\n")
	for _, o := range objs {
		y, err := yaml.Marshal(o.obj.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.obj.GetKind(), objectName(o.obj), err)
		}
		b.WriteString("---\n")
		if o.from != "" {
			fmt.Fprintf(&b, "# from %s\n", o.from)
		}
		b.Write(y)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// readManifestFiles reads every object of the files, directories and standard input ("-")
// named: multi-document YAML or JSON, Lists expanded.
func readManifestFiles(paths []string, stdin io.Reader) ([]source, error) {
	var out []source
	for _, p := range paths {
		var files []string
		switch fi, err := os.Stat(p); {
		case p == "-":
			files = []string{p}
		case err != nil:
			return nil, fmt.Errorf("-f %s: %w", p, err)
		case fi.IsDir():
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", p, err)
			}
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		default:
			files = []string{p}
		}
		for _, f := range files {
			var data []byte
			var err error
			origin := f
			if f == "-" {
				origin = "stdin"
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", f, err)
			}
			objs, err := decodeManifests(data, origin)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// decodeManifests splits a YAML or JSON stream into objects; Lists give their items.
func decodeManifests(data []byte, origin string) ([]source, error) {
	var out []source
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", origin, doc, err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", origin, doc, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue // empty, or only comments
		}
		obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, js)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", origin, doc, err)
		}
		switch o := obj.(type) {
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				out = append(out, source{obj: &o.Items[i], origin: origin})
			}
		case *unstructured.Unstructured:
			out = append(out, source{obj: o, origin: origin})
		default:
			return nil, fmt.Errorf("%s: document %d: not an object (%T)", origin, doc, obj)
		}
	}
}

// readCluster reads what migrate translates from the cluster: MetalLB's objects in its
// namespace, and every Ingress, IngressClass and Service. Kinds whose CRD is not installed
// are noted, not errors.
func readCluster(ctx context.Context, c client.Reader, s *migrateSettings) ([]source, []string, error) {
	list := func(apiVersion, kind string, opts ...client.ListOption) ([]source, error) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind + "List")
		if err := c.List(ctx, l, opts...); err != nil {
			return nil, err
		}
		out := make([]source, 0, len(l.Items))
		for i := range l.Items {
			it := &l.Items[i]
			it.SetAPIVersion(apiVersion)
			it.SetKind(kind)
			out = append(out, source{obj: it})
		}
		return out, nil
	}
	var out []source
	var missing []string
	kinds := make([]string, 0, len(metallbSpecs))
	for k := range metallbSpecs {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		found := false
		for _, v := range metallbAPIVersions(kind) {
			objs, err := list(v, kind, client.InNamespace(s.metallbNamespace))
			if meta.IsNoMatchError(err) {
				continue // this version is not served; MetalLB converts between those that are
			}
			if err != nil {
				return nil, nil, fmt.Errorf("list %s %s in %s: %w", v, kind, s.metallbNamespace, err)
			}
			out, found = append(out, objs...), true
			break
		}
		if !found {
			missing = append(missing, kind)
		}
	}
	var notes []string
	switch {
	case len(missing) == len(kinds):
		notes = append(notes, "MetalLB's CRDs (metallb.io) are not installed in the cluster: no MetalLB objects read")
	case len(missing) > 0:
		notes = append(notes, fmt.Sprintf("not in the cluster (no CRD): metallb.io %s", strings.Join(missing, ", ")))
	}
	for _, k := range []struct{ apiVersion, kind string }{{"networking.k8s.io/v1", "IngressClass"}, {"networking.k8s.io/v1", "Ingress"}, {"v1", "Service"}} {
		objs, err := list(k.apiVersion, k.kind)
		if err != nil {
			return nil, nil, fmt.Errorf("list %ss: %w", k.kind, err)
		}
		out = append(out, objs...)
	}
	ctl, ctlNotes := readControllerConfigMap(ctx, c, s)
	return append(out, ctl...), append(notes, ctlNotes...), nil
}
