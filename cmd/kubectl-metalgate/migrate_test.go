package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	proxyingress "github.com/metalgate/metalgate/proxy/ingress"
)

var update = flag.Bool("update", false, "rewrite the golden files of the migrate tests")

const migrateData = "testdata/migrate"

// noCluster is a connect that fails the test: migrate -f must not need a cluster.
func noCluster(t *testing.T) func(options) (*env, error) {
	return func(options) (*env, error) {
		t.Helper()
		t.Error("migrate -f connected to a cluster")
		return nil, errors.New("no cluster in this test")
	}
}

// runMigrate runs the plugin with args and stdin offline, and returns its exit code, standard
// output and standard error.
func runMigrate(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runStdin(context.Background(), args, strings.NewReader(stdin), &out, &errOut, noCluster(t))
	return code, out.String(), errOut.String()
}

// catalogNeutral replaces, in a report, the texts that come from the proxy's annotation catalog
// (each annotation's difference from ingress-nginx) and the proxy's list of valid values, with
// markers: the golden files then pin what migrate decides, and stay true while the proxy learns
// more values. TestMigrateAnnotationCatalog checks the catalog's texts themselves.
func catalogNeutral(s string) string {
	var changes []proxyingress.AnnotationInfo
	for _, a := range proxyingress.Annotations() {
		if a.Change != "" {
			changes = append(changes, a)
		}
	}
	sort.Slice(changes, func(i, j int) bool { return len(changes[i].Change) > len(changes[j].Change) })
	for _, a := range changes {
		s = strings.ReplaceAll(s, "; "+a.Change+"\n", "; <catalog: what differs>\n")
	}
	return wantValues.ReplaceAllString(s, "(want …); using the default")
}

// wantValues is the list of valid values in the proxy's InvalidAnnotation message.
var wantValues = regexp.MustCompile(`\(want .*\); using the default`)

// golden compares got with testdata/migrate/golden/NAME.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(migrateData, "golden", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); if the change is right, run with -update:\n%s", path, diff)
	}
}

// TestMigrateGolden runs migrate offline over the corpus (MetalLB objects as kubectl get -o
// yaml prints them, ingress-nginx Ingresses of every annotation family, and hostile input) with
// the flags users would give, and compares manifests and report with golden files.
func TestMigrateGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"protections-strict", []string{"-f", migrateData + "/ingress-nginx/protections.yaml", "--strict"}, exitBreaking},
		{"protections-drop-unsupported", []string{"-f", migrateData + "/ingress-nginx/protections.yaml", "--drop-unsupported"}, 0},
		{"metallb", []string{"-f", migrateData + "/metallb"}, 0},
		{"ingress-nginx", []string{"-f", migrateData + "/ingress-nginx"}, 0},
		{"ingress-nginx-keep-annotations", []string{"-f", migrateData + "/ingress-nginx", "--rewrite-annotations=false"}, 0},
		{"ingress-nginx-drop-unsupported", []string{"-f", migrateData + "/ingress-nginx/unsupported.yaml", "--drop-unsupported"}, 0},
		{"hostile", []string{"-f", migrateData + "/hostile"}, 0},
		{"errorpages", []string{"-f", migrateData + "/errorpages"}, 0},
		{"configmap", []string{"-f", migrateData + "/configmap"}, 0},
		{"configmap-keep-annotations", []string{"-f", migrateData + "/configmap", "--rewrite-annotations=false"}, 0},
		{"configmap-absent", []string{"-f", migrateData + "/configmap/ingresses.yaml"}, 0},
		{"configmap-named", []string{"-f", migrateData + "/configmap", "--nginx-configmap", "edge/edge-nginx-settings-old"}, 0},
		{"other-names", []string{"--metalgate-namespace", "lb", "--metallb-namespace", "metallb", "--ingress-class", "edge", "--nginx-class", "internal",
			"-f", migrateData + "/metallb/ipaddresspools.yaml", "-f", migrateData + "/ingress-nginx/policies.yaml"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, report := runMigrate(t, "", append([]string{"migrate"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tc.wantCode, report)
			}
			golden(t, "TestMigrateGolden-"+tc.name, "# stdout\n"+out+"# stderr (the report)\n"+catalogNeutral(report))
		})
	}
}

// migrateCorpus runs the migration of every file of the corpus directories named.
func migrateCorpus(t *testing.T, s *migrateSettings, dirs ...string) ([]source, *migration) {
	t.Helper()
	var paths []string
	for _, d := range dirs {
		paths = append(paths, filepath.Join(migrateData, d))
	}
	srcs, err := readManifestFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runMigration(srcs, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srcs, m
}

func defaultSettings() *migrateSettings {
	return &migrateSettings{namespace: "metalgate-system", metallbNamespace: "metallb-system", nginxClasses: stringList{"nginx"}, ingressClass: "metalgate", rewrite: true}
}

// leaves lists the paths of the leaf values under v ("spec.a.b", "spec.c[0]"), with the values.
func leaves(path string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			leaves(path+"."+k, e, out)
		}
	case []any:
		for i, e := range x {
			leaves(path+"["+strconv.Itoa(i)+"]", e, out)
		}
	default:
		out[path] = v
	}
}

// TestMigrateNothingSilentlyDropped pins the rule of the report: every spec field of a migrated
// MetalLB object reaches the output unchanged or the report names it (or a field above it);
// every nginx annotation of a migrated Ingress has its own report line; snippets are refused and
// never turn into a metalgate.io annotation; and every object read is either migrated or listed
// as not migrated, with a reason.
func TestMigrateNothingSilentlyDropped(t *testing.T) {
	for _, rewrite := range []bool{true, false} {
		s := defaultSettings()
		s.rewrite = rewrite
		srcs, m := migrateCorpus(t, s, "metallb", "ingress-nginx", "hostile", "configmap")
		outs := map[string]int{}
		for i, o := range m.objects {
			outs[o.obj.GetKind()+" "+o.obj.GetName()+" "+o.obj.GetNamespace()] = i
		}
		skipped := map[string]bool{}
		for _, sk := range m.report.skipped {
			if sk.reason == "" {
				t.Errorf("%s: not migrated, without a reason", sk.object)
			}
			skipped[sk.object] = true
		}
		for _, src := range srcs {
			in := src.obj
			ns := in.GetNamespace()
			if in.GetAPIVersion() != "" && strings.HasPrefix(in.GetAPIVersion(), metallbGroup+"/") {
				ns = s.namespace
			}
			i, ok := outs[in.GetKind()+" "+in.GetName()+" "+ns]
			if !ok {
				if in.GetKind() != "Service" && !skipped[describe(src)] {
					t.Errorf("rewrite=%v: %s is neither migrated nor listed as not migrated", rewrite, describe(src))
				}
				continue
			}
			out, rep := m.objects[i].obj, m.report.objects[i]
			switch {
			case in.GetKind() == "Ingress":
				for k := range in.GetAnnotations() {
					if !strings.HasPrefix(k, proxyingress.PrefixNginx) {
						continue
					}
					if !mentioned(rep, k) {
						t.Errorf("rewrite=%v: %s: annotation %s has no report line", rewrite, describe(src), k)
					}
					if name := strings.TrimPrefix(k, proxyingress.PrefixNginx); strings.HasSuffix(name, "-snippet") {
						if !mentionedAs(rep, k, refused) {
							t.Errorf("%s: snippet %s not reported as refused", describe(src), k)
						}
					}
				}
				for k := range out.GetAnnotations() {
					if strings.HasPrefix(k, proxyingress.PrefixMetalgate) && strings.Contains(k, "snippet") {
						t.Errorf("%s: a snippet became %s", describe(src), k)
					}
				}
			default:
				inLeaves, outLeaves := map[string]any{}, map[string]any{}
				leaves("spec", in.Object["spec"], inLeaves)
				leaves("spec", out.Object["spec"], outLeaves)
				for p, v := range inLeaves {
					if reflect.DeepEqual(outLeaves[p], v) {
						continue
					}
					said := false
					for q := p; q != ""; q = parentPath(q) {
						said = said || mentioned(rep, q) && (q == p || entryFor(rep, q))
					}
					if !said {
						t.Errorf("%s: %s = %v is not in the output and the report does not say why", describe(src), p, v)
					}
				}
			}
		}
	}
}

// parentPath is the path above p ("spec.a[0].b" → "spec.a[0]" → "spec.a" → "spec" → "").
func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i > 0 {
		return p[:i]
	}
	return ""
}

// entryFor says whether the report has an entry for exactly path.
func entryFor(rep *objectReport, path string) bool {
	for _, e := range rep.entries {
		if e.what == path {
			return true
		}
	}
	return false
}

// TestMigrateAnnotationCatalog takes every annotation of the proxy's catalog that has an nginx
// form, alone on an Ingress of class nginx: migrate moves it to its metalgate.io form with the
// value unchanged (or keeps it, for the nginx-only ones it translates otherwise), and reports it
// one to one, or changed when the catalog names a difference. Snippets are refused.
func TestMigrateAnnotationCatalog(t *testing.T) {
	s := defaultSettings()
	m := newIngressMigrator(s)
	ingress := func(key, value string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ingressClassName": "nginx"}}}
		u.SetAPIVersion("networking.k8s.io/v1")
		u.SetKind("Ingress")
		u.SetNamespace("ns")
		u.SetName("in")
		u.SetAnnotations(map[string]string{key: value})
		return u
	}
	n := 0
	for _, a := range proxyingress.Annotations() {
		if a.Nginx == "" {
			continue
		}
		key := proxyingress.PrefixNginx + a.Nginx
		t.Run(a.Nginx, func(t *testing.T) {
			n++
			value := "v"
			switch a.Nginx {
			case "upstream-hash-by":
				value = "$remote_addr"
			case "limit-burst-multiplier":
				value = "2" // no rate: nothing to compute, kept
			}
			r := m.migrateIngress(ingress(key, value), "", "nginx", "spec.ingressClassName")
			ann := r.out.GetAnnotations()
			if a.Nginx == "ssl-redirect" {
				// Decided with the routes (TestMigrateGolden, tls.yaml); carried until then.
				if r.sslRedirect != value {
					t.Errorf("ssl-redirect carried %q, want %q", r.sslRedirect, value)
				}
				return
			}
			var e *entry
			for i := range r.rep.entries {
				if r.rep.entries[i].what == key {
					e = &r.rep.entries[i]
				}
			}
			if e == nil {
				t.Fatalf("no report line for %s: %+v", key, r.rep.entries)
			}
			switch {
			case a.Name != "":
				if got := ann[proxyingress.PrefixMetalgate+a.Name]; got != value {
					t.Errorf("%s%s = %q, want %q", proxyingress.PrefixMetalgate, a.Name, got, value)
				}
				if _, kept := ann[key]; kept {
					t.Errorf("%s kept next to its metalgate.io form", key)
				}
				if want := verdictOf(a); e.verdict != want {
					t.Errorf("verdict %v, want %v (%s)", e.verdict, want, e.detail)
				}
				if !strings.Contains(e.detail, a.Change) {
					t.Errorf("report line %q does not say what differs: %q", e.detail, a.Change)
				}
			case a.Nginx == "upstream-hash-by":
				if got := ann[proxyingress.AnnotationHashBy]; got != "client-ip" {
					t.Errorf("hash-by = %q, want client-ip", got)
				}
			default:
				if e.verdict >= unsupported {
					t.Errorf("verdict %v (%s)", e.verdict, e.detail)
				}
			}
		})
	}
	if n < 40 {
		t.Errorf("only %d catalog annotations with an nginx form; did the catalog move?", n)
	}
	for _, snip := range []string{"configuration-snippet", "server-snippet", "auth-snippet", "stream-snippet"} {
		r := m.migrateIngress(ingress(proxyingress.PrefixNginx+snip, "return 200;"), "", "nginx", "spec.ingressClassName")
		if !mentionedAs(r.rep, proxyingress.PrefixNginx+snip, refused) {
			t.Errorf("%s not refused: %+v", snip, r.rep.entries)
		}
		for k := range r.out.GetAnnotations() {
			if strings.HasPrefix(k, proxyingress.PrefixMetalgate) {
				t.Errorf("%s became %s", snip, k)
			}
		}
	}
}

// TestMigrateInputs covers -f: a file, a directory, repeated -f, standard input, JSON and
// Lists; and bad input, which fails with the file, the document and the reason.
func TestMigrateInputs(t *testing.T) {
	pool := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [192.0.2.0/24]}\n"
	poolJSON := `{"apiVersion":"metallb.io/v1beta1","kind":"L2Advertisement","metadata":{"name":"l2","namespace":"metallb-system"}}`
	list := `{"apiVersion":"v1","kind":"List","items":[` + poolJSON + `]}`
	// A "billion laughs" document: nine levels of nine aliases each.
	laughs := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for i := 1; i <= 9; i++ {
		ref := "*a" + strconv.Itoa(i-1)
		laughs += "a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [" + strings.Repeat(ref+", ", 8) + ref + "]\n"
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"a.yaml": pool, "b.json": list, "notes.txt": "not read", "c.yml": "# only a comment\n---\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		stdin     string
		args      []string
		wantCode  int
		wantKinds []string // of the objects printed
		wantErr   string
	}{
		{name: "stdin", stdin: pool, args: []string{"-f", "-"}, wantKinds: []string{"IPAddressPool"}},
		{name: "stdin JSON List", stdin: list, args: []string{"-f", "-"}, wantKinds: []string{"L2Advertisement"}},
		{name: "directory", args: []string{"-f", dir}, wantKinds: []string{"IPAddressPool", "L2Advertisement"}},
		{name: "file and stdin", stdin: poolJSON, args: []string{"--filename", filepath.Join(dir, "a.yaml"), "-f", "-"}, wantKinds: []string{"IPAddressPool", "L2Advertisement"}},
		{name: "empty", stdin: "", args: []string{"-f", "-"}},
		{name: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, wantCode: 1, wantErr: "nope.yaml: no such file or directory"},
		{name: "bad YAML", stdin: pool + "---\nkind: [\n", args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 2: "},
		{name: "not an object", stdin: "- a\n- b\n", args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 1: "},
		{name: "no kind", stdin: "apiVersion: v1\nmetadata: {name: x}\n", args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 1: Object 'Kind' is missing"},
		{name: "bad JSON", stdin: `{"apiVersion": "v1", "kind": `, args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 1: "},
		{name: "scalar", stdin: "hello\n", args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 1: "},
		{name: "billion laughs", stdin: laughs, args: []string{"-f", "-"}, wantCode: 1, wantErr: "stdin: document 1: yaml: document contains excessive aliasing"},
		{name: "Ingress of the wrong shape", stdin: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x, namespace: shop}\nspec: {ingressClassName: nginx, rules: everything}\n",
			args: []string{"-f", "-"}, wantCode: 1, wantErr: "convert Ingress shop/x: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMigrate(t, tc.stdin, append([]string{"migrate"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut)
			}
			if tc.wantErr != "" {
				if !strings.Contains(errOut, tc.wantErr) {
					t.Errorf("stderr %q, want it to contain %q", errOut, tc.wantErr)
				}
				if out != "" {
					t.Errorf("printed manifests on error:\n%s", out)
				}
				return
			}
			var kinds []string
			for _, line := range strings.Split(out, "\n") {
				if k, ok := strings.CutPrefix(line, "kind: "); ok {
					kinds = append(kinds, k)
				}
			}
			sort.Strings(kinds)
			if diff := cmp.Diff(tc.wantKinds, kinds); diff != "" {
				t.Errorf("kinds printed (-want +got):\n%s\n%s", diff, out)
			}
			if !strings.HasPrefix(errOut, "kubectl metalgate migrate report\n") || !strings.Contains(errOut, "\nSummary: ") {
				t.Errorf("report on stderr:\n%s", errOut)
			}
		})
	}

	t.Run("--report FILE", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.txt")
		code, out, errOut := runMigrate(t, pool, "migrate", "-f", "-", "--report", path)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "IPAddressPool metalgate-system/p (from metallb.io/v1beta1 metallb-system/p, stdin)") {
			t.Errorf("report file:\n%s", b)
		}
		if !strings.Contains(out, "kind: IPAddressPool") {
			t.Errorf("stdout:\n%s", out)
		}
	})
}

// TestMigrateFlags: migrate's flags given to another command are refused by name (not
// silently ignored), as are extra arguments.
func TestMigrateFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"-f to pools", []string{"pools", "-f", "x.yaml"}, 2, "flag -f/--filename is only for migrate"},
		{"--report before check", []string{"--report", "r.txt", "check"}, 2, "flag --report is only for migrate"},
		{"--ingress-class to allocations", []string{"allocations", "--ingress-class", "edge"}, 2, "flag --ingress-class is only for migrate"},
		{"--drop-unsupported to backends", []string{"backends", "ns/in", "--drop-unsupported"}, 2, "flag --drop-unsupported is only for migrate"},
		{"an argument to migrate", []string{"migrate", "-f", "-", "extra"}, 2, `unexpected argument "extra"`},
		{"an unknown flag", []string{"migrate", "--from-nginx"}, 2, "unknown flag: --from-nginx"},
		{"-f without a value", []string{"migrate", "-f"}, 2, "flag needs an argument: 'f' in -f"},
		{"flags after the command", []string{"migrate", "-f", "-", "--metalgate-namespace", "lb"}, 0, ""},
		{"-n, once where MetalLB's objects went", []string{"migrate", "-f", "-", "-n", "lb"}, 2, "flag -n/--namespace: migrate reads no objects of one namespace; metalgate's own namespace is --metalgate-namespace"},
		{"--strict with a BREAKING item", []string{"migrate", "--strict", "-f", migrateData + "/ingress-nginx/protections.yaml"}, exitBreaking, "--strict: 9 BREAKING item(s)"},
		{"--strict without", []string{"migrate", "--strict", "-f", migrateData + "/ingress-nginx/paths.yaml"}, 0, ""},
		{"no --strict: BREAKING reported, exit 0", []string{"migrate", "-f", migrateData + "/ingress-nginx/protections.yaml"}, 0, "\nBREAKING: 9 item(s)"},
		{"--strict to check", []string{"check", "--strict"}, 2, "flag --strict is only for migrate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runMigrate(t, "", tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tc.wantErr)
			}
		})
	}
}

// TestMigrateAgainstAPIServer runs migrate against a real kube-apiserver that holds MetalLB
// objects (under minimal stand-ins for MetalLB's CRDs in testdata/migrate/crds: MetalLB's own
// are not available offline), Services with MetalLB annotations and the status MetalLB gave
// them, and ingress-nginx IngressClasses and Ingresses. It checks that reading the cluster gives
// the same manifests as reading the files, and that the API server, with metalgate's CRDs,
// accepts every manifest migrate printed under strict field validation: the metalgate objects
// created, each Ingress replacing its ingress-nginx original.
func TestMigrateAgainstAPIServer(t *testing.T) {
	kubeconfig, e := apiServer(t, filepath.Join(migrateData, "crds"))
	c := e.c.(client.Client)
	ctx := context.Background()
	strict := client.FieldValidation(metav1.FieldValidationStrict)

	// What the cluster holds: the corpus, as created by MetalLB's and ingress-nginx's users.
	// Left out: the BGPPeer written as metallb.io/v1beta1 (only MetalLB's conversion webhook
	// serves it as v1beta2, which these CRDs lack) and what the API server refuses itself.
	srcs, err := readManifestFiles([]string{filepath.Join(migrateData, "metallb"), filepath.Join(migrateData, "ingress-nginx")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{}
	var created []source
	for _, src := range srcs {
		u := src.obj
		switch {
		case u.GetKind() == "BGPPeer" && u.GetAPIVersion() == "metallb.io/v1beta1",
			u.GetKind() == "ServiceL2Status", u.GetKind() == "ConfigMap":
			continue
		}
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		obj := u.DeepCopy()
		status, hasStatus := obj.Object["status"]
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation"} {
			unstructured.RemoveNestedField(obj.Object, "metadata", f)
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", describe(src), err)
		}
		if hasStatus && obj.GetKind() == "Service" {
			obj.Object["status"] = status // what MetalLB's controller wrote
			if err := c.Status().Update(ctx, obj); err != nil {
				t.Fatalf("status of %s: %v", describe(src), err)
			}
		}
		if u.GroupVersionKind().Group == metallbGroup && u.GetNamespace() != "metallb-system" {
			continue // in the cluster, migrate reads MetalLB's namespace only, as MetalLB does
		}
		created = append(created, source{obj: u})
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metalgate-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := runStdin(ctx, []string{"migrate", "--kubeconfig", kubeconfig}, strings.NewReader(""), &out, &errOut, newEnv); code != 0 {
		t.Fatalf("migrate from the cluster: exit %d\n%s", code, errOut.String())
	}
	fromCluster, err := decodeManifests(out.Bytes(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	fromFiles, err := runMigration(created, defaultSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []map[string]any
	for _, o := range fromFiles.objects {
		want = append(want, o.obj.Object)
	}
	for _, s := range fromCluster {
		got = append(got, s.obj.Object)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("migrate from the cluster differs from migrate of the same files (-files +cluster):\n%s", diff)
	}
	for _, line := range []string{
		"IPAddressPool metalgate-system/production (from metallb.io/v1beta1 metallb-system/production)",
		"changed      spec.addressSharing: set to AcrossNamespaces, MetalLB's rule, because team-a/dns-tcp and team-b/dns-udp share 192.168.10.53",
		"Ingress ops/admin (class internal → metalgate)",
		"IngressClass nginx: ingress-nginx's IngressClass",
	} {
		if !strings.Contains(errOut.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, errOut.String())
		}
	}

	// The API server with metalgate's CRDs takes every manifest printed, as written.
	if len(fromCluster) < 20 {
		t.Fatalf("only %d manifests printed", len(fromCluster))
	}
	for _, s := range fromCluster {
		obj := s.obj
		err := c.Create(ctx, obj.DeepCopy(), strict)
		if apierrors.IsAlreadyExists(err) && obj.GetKind() == "Ingress" {
			old := &unstructured.Unstructured{}
			old.SetGroupVersionKind(obj.GroupVersionKind())
			if err = c.Get(ctx, client.ObjectKeyFromObject(obj), old); err == nil {
				repl := obj.DeepCopy()
				repl.SetResourceVersion(old.GetResourceVersion())
				err = c.Update(ctx, repl, strict)
			}
		}
		if err != nil {
			t.Errorf("%s %s: the API server refuses migrate's manifest: %v", obj.GetKind(), objectName(obj), err)
		}
	}

	// Hostile input: what the report says the API server refuses, it refuses; the rest of it
	// is taken (server-side dry run).
	_, hostile := migrateCorpus(t, defaultSettings(), "hostile")
	refusedN := 0
	for i, o := range hostile.objects {
		wantRefused := false
		for _, e := range hostile.report.objects[i].entries {
			wantRefused = wantRefused || strings.Contains(e.detail, "the API server refuses the object")
		}
		obj := o.obj.DeepCopy()
		obj.SetName("hostile-" + obj.GetName())
		err := c.Create(ctx, obj, strict, client.DryRunAll)
		switch {
		case wantRefused && err == nil:
			t.Errorf("%s %s: the report says the API server refuses it; it took it", obj.GetKind(), objectName(obj))
		case wantRefused:
			refusedN++
			t.Logf("%s %s refused, as the report says: %v", obj.GetKind(), objectName(obj), err)
		case err != nil:
			t.Errorf("%s %s: the API server refuses migrate's manifest: %v", obj.GetKind(), objectName(obj), err)
		}
	}
	if refusedN < 2 {
		t.Errorf("only %d hostile objects the report says are refused; the corpus has more", refusedN)
	}
}

// TestMigrateBurst: limit-burst-multiplier becomes metalgate.io/limit-burst only when the
// proxy would compute a burst from it (the rate it reads times the multiplier, rounded up);
// otherwise it is kept for the proxy to read or report.
func TestMigrateBurst(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		wantBurst string // "" : the multiplier is kept, no metalgate.io/limit-burst
	}{
		{"rps", map[string]string{"limit-rps": "10", "limit-burst-multiplier": "3"}, "30"},
		{"fractional rps rounds up", map[string]string{"limit-rps": "0.5", "limit-burst-multiplier": "3"}, "2"},
		// ingress-nginx's burst for limit-rpm is the multiplier times the rate a minute
		// (internal/ingress/annotations/ratelimit: Burst: rpm * burstMultiplier).
		{"rpm", map[string]string{"limit-rpm": "120", "limit-burst-multiplier": "5"}, "600"},
		{"rpm alone: ingress-nginx's default multiplier", map[string]string{"limit-rpm": "60"}, "300"},
		{"rpm with its own burst", map[string]string{"limit-rpm": "60", "metalgate.io/limit-burst": "7"}, "7"},
		{"rpm with a zero multiplier", map[string]string{"limit-rpm": "60", "limit-burst-multiplier": "0"}, ""},
		{"rps and rpm: the proxy enforces rps, with its own default burst", map[string]string{"limit-rps": "10", "limit-rpm": "60"}, ""},
		{"metalgate.io rate wins", map[string]string{"metalgate.io/limit-rps": "2", "limit-rps": "100", "limit-burst-multiplier": "3"}, "6"},
		{"NaN rate", map[string]string{"limit-rps": "NaN", "limit-burst-multiplier": "3"}, ""},
		{"infinite rate", map[string]string{"limit-rps": "+Inf", "limit-burst-multiplier": "3"}, ""},
		{"negative rate", map[string]string{"limit-rps": "-1", "limit-burst-multiplier": "3"}, ""},
		{"bad rps does not fall back to rpm", map[string]string{"limit-rps": "fast", "limit-rpm": "120", "limit-burst-multiplier": "3"}, ""},
		{"zero multiplier", map[string]string{"limit-rps": "10", "limit-burst-multiplier": "0"}, ""},
		{"no rate", map[string]string{"limit-burst-multiplier": "3"}, ""},
	}
	m := newIngressMigrator(defaultSettings())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			for k, v := range tc.ann {
				if !strings.Contains(k, "/") {
					k = proxyingress.PrefixNginx + k
				}
				ann[k] = v
			}
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ingressClassName": "nginx"}}}
			u.SetAPIVersion("networking.k8s.io/v1")
			u.SetKind("Ingress")
			u.SetNamespace("ns")
			u.SetName("in")
			u.SetAnnotations(ann)
			got := m.migrateIngress(u, "", "nginx", "spec.ingressClassName").out.GetAnnotations()
			if b := got[proxyingress.PrefixMetalgate+"limit-burst"]; b != tc.wantBurst {
				t.Errorf("metalgate.io/limit-burst = %q, want %q (annotations %v)", b, tc.wantBurst, got)
			}
			_, kept := got[proxyingress.PrefixNginx+"limit-burst-multiplier"]
			if _, had := tc.ann["limit-burst-multiplier"]; had && kept != (tc.wantBurst == "") {
				t.Errorf("limit-burst-multiplier kept = %v, want %v", kept, tc.wantBurst == "")
			}
		})
	}
}

// TestMigrateRateLimitOnTheProxy: the rate limit the proxy builds from a migrated Ingress has
// ingress-nginx's burst (the multiplier, 5 unless limit-burst-multiplier, times the limit in
// its own unit: limit-rpm "60" let 300 requests through at once, where the proxy's own default
// would be 5).
func TestMigrateRateLimitOnTheProxy(t *testing.T) {
	for _, rewrite := range []bool{true, false} {
		s := defaultSettings()
		s.rewrite = rewrite
		m := newIngressMigrator(s)
		for _, tc := range []struct {
			name      string
			ann       map[string]string // nginx annotations, without the prefix
			wantBurst int
		}{
			{"rpm alone", map[string]string{"limit-rpm": "60"}, 300},
			{"rpm with a multiplier", map[string]string{"limit-rpm": "120", "limit-burst-multiplier": "3"}, 360},
			{"rps", map[string]string{"limit-rps": "10"}, 50},
			{"rps and rpm: the proxy enforces rps", map[string]string{"limit-rps": "10", "limit-rpm": "60"}, 50},
		} {
			t.Run(fmt.Sprintf("%s rewrite=%t", tc.name, rewrite), func(t *testing.T) {
				ann := map[string]string{}
				for k, v := range tc.ann {
					ann[proxyingress.PrefixNginx+k] = v
				}
				r := m.migrateIngress(routedIngress(ann), "", "nginx", "spec.ingressClassName")
				routes, _, err := m.checkIngresses([]*ingressResult{r})
				if err != nil {
					t.Fatal(err)
				}
				rs := routes[types.NamespacedName{Namespace: "ns", Name: "in"}]
				if len(rs) == 0 || rs[0].Options.Policy.RateLimit == nil {
					t.Fatalf("no rate-limited route (annotations %v)", r.out.GetAnnotations())
				}
				if got := rs[0].Options.Policy.RateLimit.Burst; got != tc.wantBurst {
					t.Errorf("burst %d, want ingress-nginx's %d (annotations %v)", got, tc.wantBurst, r.out.GetAnnotations())
				}
			})
		}
	}
}
