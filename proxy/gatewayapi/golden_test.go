package gatewayapi

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/proxy/table"
)

// update rewrites testdata/*.out.yaml from what Translate makes of testdata/*.in.yaml.
var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml (go test ./proxy/gatewayapi -run TestTranslateGolden -update)")

// TestTranslateGolden translates each testdata/NAME.in.yaml (a Gateway, its routes,
// ReferenceGrants, Namespaces, Services, EndpointSlices, Secrets) and compares a summary of
// the table and every status the translation decides with testdata/NAME.out.yaml. A change of
// behaviour shows as a diff of these files, reviewed with the code.
func TestTranslateGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 6 {
		t.Fatalf("%d golden cases, want at least 6", len(ins))
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			input, err := decodeInput(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			got, err := yaml.Marshal(summarize(Translate(input)))
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSuffix(in, ".in.yaml") + ".out.yaml"
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", out, diff)
			}
		})
	}
}

// decodeInput reads the objects of a golden case. Slices and Services are trusted as written
// (AllowUnmanagedSlices), as a test's own objects are.
func decodeInput(r io.Reader) (Input, error) {
	in := Input{AllowUnmanagedSlices: true}
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gatewayv1.Install, gatewayv1beta1.Install} {
		if err := add(sch); err != nil {
			return in, err
		}
	}
	dec := serializer.NewCodecFactory(sch).UniversalDeserializer()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return in, nil
		}
		if err != nil {
			return in, fmt.Errorf("read document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return in, fmt.Errorf("decode document %d: %w", i, err)
		}
		switch o := obj.(type) {
		case *gatewayv1.Gateway:
			if in.Gateway != nil {
				return in, fmt.Errorf("document %d: a second Gateway (a table serves one)", i)
			}
			in.Gateway = o
		case *gatewayv1.HTTPRoute:
			in.HTTPRoutes = append(in.HTTPRoutes, o)
		case *gatewayv1.GRPCRoute:
			in.GRPCRoutes = append(in.GRPCRoutes, o)
		case *gatewayv1.TLSRoute:
			in.TLSRoutes = append(in.TLSRoutes, o)
		case *gatewayv1beta1.ReferenceGrant:
			in.ReferenceGrants = append(in.ReferenceGrants, o)
		case *corev1.Namespace:
			in.Namespaces = append(in.Namespaces, o)
		case *corev1.Service:
			in.Services = append(in.Services, o)
		case *discoveryv1.EndpointSlice:
			in.Slices = append(in.Slices, o)
		case *corev1.Secret:
			in.Secrets = append(in.Secrets, o)
		case *corev1.ConfigMap:
			in.ConfigMaps = append(in.ConfigMaps, o)
		default:
			return in, fmt.Errorf("document %d: kind %s is not read by Translate", i, gvk.Kind)
		}
	}
}

// golden is what a golden file holds: the table as lines, then every status.
type golden struct {
	Routes              []string          `json:"routes"`
	Backends            []string          `json:"backends"`
	Listeners           []goldenListener  `json:"listeners"`
	CertificateProblems map[string]string `json:"certificateProblems,omitempty"`
	// ClientCertificates is each port's client-certificate validation; FrontendProblems
	// each HTTPS listener's problem with it (frontend.go).
	ClientCertificates map[int32]string    `json:"clientCertificates,omitempty"`
	FrontendProblems   map[string]string   `json:"frontendProblems,omitempty"`
	RouteStatus        []goldenRoute       `json:"routeStatus"`
	Problems           []string            `json:"problems,omitempty"`
	AttachedRoutes     map[string]int32    `json:"attachedRoutes"`
	SupportedKinds     map[string][]string `json:"supportedKinds,omitempty"`
}

type goldenListener struct {
	Name       string   `json:"name"`
	Conditions []string `json:"conditions"`
}

type goldenRoute struct {
	Route   string         `json:"route"`
	Parents []goldenParent `json:"parents"`
}

type goldenParent struct {
	ParentRef  string   `json:"parentRef"`
	Conditions []string `json:"conditions"`
}

// summarize turns a Result into lines a reviewer reads: a route is "port/listener: host
// path-type path [match] <- source -> backends [policy]", a backend "key endpoints", a condition
// "Type=Status Reason: message".
func summarize(r Result) golden {
	g := golden{Routes: []string{}, Backends: []string{}, Listeners: []goldenListener{}, RouteStatus: []goldenRoute{}}
	for _, lr := range r.Table.ListenerRoutes() {
		g.Routes = append(g.Routes, fmt.Sprintf("%d/%s: %s", lr.Port, lr.Listener, routeLine(lr.Route)))
	}
	for _, be := range r.Table.Backends {
		line := be.Key + " " + fmt.Sprint(be.Endpoints)
		if be.Unresolved {
			line += " (unresolved: 500)"
		}
		g.Backends = append(g.Backends, line)
	}
	for _, l := range r.Listeners {
		gl := goldenListener{Name: string(l.Name), Conditions: conditionLines(l.Conditions)}
		g.Listeners = append(g.Listeners, gl)
		for _, k := range l.SupportedKinds {
			if g.SupportedKinds == nil {
				g.SupportedKinds = map[string][]string{}
			}
			g.SupportedKinds[string(l.Name)] = append(g.SupportedKinds[string(l.Name)], string(k.Kind))
		}
	}
	if st := r.Status; st != nil {
		g.AttachedRoutes = st.AttachedRoutes
		if len(st.CertificateProblems) > 0 {
			g.CertificateProblems = st.CertificateProblems
		}
		summarizeFrontend(&g, r.Table, st)
		for _, rs := range st.Routes {
			gr := goldenRoute{Route: rs.Kind + " " + rs.Route.String()}
			for _, p := range rs.Parents {
				gr.Parents = append(gr.Parents, goldenParent{ParentRef: parentRefLine(p.ParentRef), Conditions: conditionLines(p.Conditions)})
			}
			g.RouteStatus = append(g.RouteStatus, gr)
		}
	}
	for _, p := range r.Problems {
		g.Problems = append(g.Problems, p.Object.String()+" "+p.Reason+": "+p.Message)
	}
	sort.Strings(g.Problems)
	return g
}

func routeLine(r *table.Route) string {
	host := r.Host
	if host == "" {
		host = "*"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", host, r.PathType, r.Path)
	if m := r.Match; m != nil {
		if m.Method != "" {
			fmt.Fprintf(&b, " method=%s", m.Method)
		}
		for _, h := range m.Headers {
			fmt.Fprintf(&b, " header:%s=%s", h.Name, valueMatch(h))
		}
		for _, q := range m.Query {
			fmt.Fprintf(&b, " query:%s=%s", q.Name, valueMatch(q))
		}
	}
	fmt.Fprintf(&b, " <- %s ->", r.Source)
	switch {
	case len(r.Split) > 0:
		for _, w := range r.Split {
			fmt.Fprintf(&b, " %s:%d", w.Backend.Key, w.Weight)
		}
	case r.Canary != nil:
		fmt.Fprintf(&b, " %s:%d %s:%d", r.Backend.Key, r.Canary.WeightTotal-r.Canary.Weight, r.Canary.Backend.Key, r.Canary.Weight)
	case r.Backend != nil:
		fmt.Fprintf(&b, " %s", r.Backend.Key)
	}
	p := r.Options.Policy
	for _, e := range []struct {
		what string
		h    table.HeaderEdits
	}{{"request", p.RequestHeaders}, {"response", p.ResponseHeaders}} {
		if !e.h.Empty() {
			fmt.Fprintf(&b, " %sHeaders(set=%v add=%v remove=%v)", e.what, e.h.Set, e.h.Add, e.h.Remove)
		}
	}
	if rr := p.RequestRedirect; rr != nil {
		fmt.Fprintf(&b, " redirect(scheme=%s host=%s port=%d fullPath=%s prefixPath=%s code=%d)",
			rr.Scheme, rr.Host, rr.Port, deref(rr.FullPath), deref(rr.PrefixPath), rr.Code)
	}
	if rw := p.Rewrite; rw != nil {
		fmt.Fprintf(&b, " rewrite=%+v", *rw)
	}
	if p.RequestTimeout > 0 {
		fmt.Fprintf(&b, " timeout=%s", p.RequestTimeout)
	}
	if c := p.CORS; c != nil && c.Gateway != nil {
		fmt.Fprintf(&b, " cors=%+v", *c.Gateway)
	}
	for _, m := range p.Mirrors {
		fmt.Fprintf(&b, " mirror=%s", m.Backend.Key)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func valueMatch(v table.ValueMatch) string {
	if v.Regex != nil {
		return "~" + v.Regex.String()
	}
	return v.Value
}

func conditionLines(cs []metav1.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}

func parentRefLine(pr gatewayv1.ParentReference) string {
	s := string(pr.Name)
	if pr.Namespace != nil {
		s = string(*pr.Namespace) + "/" + s
	}
	if pr.SectionName != nil {
		s += " section " + string(*pr.SectionName)
	}
	if pr.Port != nil {
		s += fmt.Sprintf(" port %d", *pr.Port)
	}
	return s
}
