package config_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metalgate/metalgate/controllers/gateway"
)

// elsewhere is a namespace no install under test uses: what a component may do there, it may do
// in every namespace.
const elsewhere = "metalgate-elsewhere"

// workload is a Deployment or DaemonSet of a rendered install, with the ServiceAccount it runs
// as and what it serves.
type workload struct {
	kind, name, namespace string
	component             string // app.kubernetes.io/component: controller, speaker or proxy
	serviceAccount        string
	// watch: the namespaces a proxy serves (--watch-namespace, $(POD_NAMESPACE) resolved, plus
	// its own); nil: every namespace.
	watch []string
	// made: not in the install but made by the controller at run time (a Gateway's proxy),
	// running as the ServiceAccount the controller picks.
	made bool
}

func (w workload) String() string {
	return fmt.Sprintf("%s %s/%s (ServiceAccount %s)", w.kind, w.namespace, w.name, w.serviceAccount)
}

func (w workload) user() string {
	return "system:serviceaccount:" + w.namespace + ":" + w.serviceAccount
}

// workloads finds the metalgate components among objs (anything else, such as the demo's echo
// backend, is left out).
func workloads(t *testing.T, objs []*unstructured.Unstructured) []workload {
	t.Helper()
	var out []workload
	for _, o := range objs {
		var spec corev1.PodSpec
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			fromUnstructured(t, o, &d)
			spec = d.Spec.Template.Spec
		case "DaemonSet":
			var d appsv1.DaemonSet
			fromUnstructured(t, o, &d)
			spec = d.Spec.Template.Spec
		default:
			continue
		}
		c := o.GetLabels()["app.kubernetes.io/component"]
		if o.GetLabels()["app.kubernetes.io/name"] != "metalgate" || c == "" {
			continue
		}
		w := workload{kind: o.GetKind(), name: o.GetName(), namespace: o.GetNamespace(), component: c, serviceAccount: spec.ServiceAccountName}
		if w.serviceAccount == "" {
			t.Fatalf("%s runs as the default ServiceAccount", w)
		}
		for _, a := range spec.Containers[0].Args {
			v, ok := strings.CutPrefix(a, "--watch-namespace=")
			if !ok {
				continue
			}
			for _, ns := range strings.Split(v, ",") {
				if ns == "$(POD_NAMESPACE)" {
					ns = w.namespace
				}
				w.watch = append(w.watch, ns)
			}
		}
		if w.watch != nil && !slices.Contains(w.watch, w.namespace) {
			w.watch = append(w.watch, w.namespace) // its own Service
		}
		out = append(out, w)
		if c == "controller" {
			out = append(out, gatewayProxy(w, spec.Containers[0].Args))
		}
	}
	return out
}

// gatewayProxy is the workload of the proxies the controller w makes per Gateway, in its
// namespace, as the ServiceAccount it picks: --gateway-proxy-service-account, else by
// gateway.ProxyServiceAccountFor from its own.
func gatewayProxy(w workload, args []string) workload {
	gw := workload{kind: "Deployment", name: "(one per Gateway)", namespace: w.namespace, component: "gateway-proxy",
		serviceAccount: gateway.ProxyServiceAccountFor(w.serviceAccount), made: true}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--gateway-proxy-service-account="); ok {
			gw.serviceAccount = v
		}
	}
	return gw
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// permission is one request a component's ServiceAccount must be allowed, or refused.
type permission struct {
	namespace                                string // "" for a cluster-scoped resource
	group, resource, subresource, verb, name string
	allowed                                  bool
}

func (p permission) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.name != "" {
		r += " " + p.name
	}
	where := "cluster-wide"
	if p.namespace != "" {
		where = "in " + p.namespace
	}
	return fmt.Sprintf("%s %s %s", p.verb, r, where)
}

// source is where a component's needs are written down (paths relative to config/): the
// generated roles for the controller and the proxy, the hand-written one for the speaker.
type source struct {
	cluster []string // files whose ClusterRoles hold rules valid in every namespace
	own     []string // files whose Roles hold rules for the component's own namespace
}

var sources = map[string]source{
	"controller": {cluster: []string{"rbac/controller/role.yaml", "rbac/controller/metrics_auth_role.yaml"}, own: []string{"rbac/controller/role.yaml"}},
	"speaker":    {cluster: []string{"speaker/rbac.yaml"}, own: []string{"speaker/rbac.yaml"}},
	// One ClusterRole generated from the proxy's markers; which rules are for its own
	// namespace only is ownNamespaceOnly's job.
	"proxy": {cluster: []string{"rbac/proxy/role.yaml"}},
	// Generated from proxy/controlplane/gatewayrbac: read-only, cluster-wide.
	"gateway-proxy": {cluster: []string{"rbac/gateway-proxy/role.yaml"}},
}

// neededGrants is what a component needs, as "group/resource:verb" (see grants).
func neededGrants(t *testing.T, component string) []string {
	src := sources[component]
	return grants(append(rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", src.cluster...)),
		rulesOf(objects[rbacv1.Role](t, "Role", src.own...))...)...)
}

// ownNamespaceOnly: the proxy's rules that hold in its own namespace only, whatever it serves:
// its Lease, its own Pod, the affinity cookie key it creates, and a named object (the
// announcement on its own Service).
func ownNamespaceOnly(group, resource, verb string, names []string) bool {
	return len(names) > 0 || resource == "pods" || (group == "coordination.k8s.io" && resource == "leases") ||
		(resource == "secrets" && verb == "create")
}

// required lists what w must be allowed, and what it must be refused, in the install objs.
func (s *apiServer) required(t *testing.T, w workload, objs []*unstructured.Unstructured) []permission {
	t.Helper()
	src, ok := sources[w.component]
	if !ok {
		t.Fatalf("%s: unknown component %q", w, w.component)
	}
	var out []permission
	add := func(rules []rbacv1.PolicyRule, fromRole bool) {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, full := range r.Resources {
					res, sub, _ := strings.Cut(full, "/")
					namespaced, known := s.namespaced[g+"/"+full]
					if !known && sub != "" {
						// Discovery's preferred resources leave subresources out: a
						// subresource lives where its resource does.
						namespaced, known = s.namespaced[g+"/"+res]
					}
					if !known {
						t.Fatalf("%s: the API server does not know %s/%s", w, g, full)
					}
					for _, v := range r.Verbs {
						p := permission{group: g, resource: res, subresource: sub, verb: v, allowed: true}
						var names []string
						for _, n := range r.ResourceNames {
							names = append(names, renamed(objs, w.namespace, res, n))
						}
						switch {
						case !namespaced:
							out = append(out, p)
						case fromRole || (w.component == "proxy" && ownNamespaceOnly(g, res, v, r.ResourceNames)):
							out = append(out, own(p, w.namespace, names)...)
						case w.component == "proxy" && w.watch != nil:
							for _, ns := range w.watch {
								p.namespace = ns
								out = append(out, p)
							}
							p.namespace, p.allowed = elsewhere, false
							out = append(out, p)
						default:
							for _, ns := range []string{w.namespace, elsewhere} {
								p.namespace = ns
								out = append(out, p)
							}
						}
					}
				}
			}
		}
	}
	add(slices.Concat(rulesOf(objects[rbacv1.ClusterRole](t, "ClusterRole", src.cluster...))...), false)
	add(slices.Concat(rulesOf(objects[rbacv1.Role](t, "Role", src.own...))...), true)
	// A refusal only where no rule allows the same request.
	var want []permission
	for _, p := range out {
		if !p.allowed && slices.ContainsFunc(out, func(q permission) bool {
			return q.allowed && q.namespace == p.namespace && q.group == p.group && q.resource == p.resource &&
				q.subresource == p.subresource && q.verb == p.verb && (q.name == "" || q.name == p.name)
		}) {
			continue
		}
		want = append(want, p)
	}
	return want
}

// own is p in namespace ns (for each of names, if any), and refused elsewhere — and, for a
// named object, on another object of the same namespace.
func own(p permission, ns string, names []string) []permission {
	var out []permission
	if len(names) == 0 {
		p.namespace = ns
		out = append(out, p)
		p.namespace, p.allowed = elsewhere, false
		return append(out, p)
	}
	for _, n := range names {
		p.namespace, p.name, p.allowed = ns, n, true
		out = append(out, p)
		p.name, p.allowed = "not-"+n, false
		out = append(out, p)
		p.namespace, p.name = elsewhere, n
		out = append(out, p)
	}
	return out
}

// renamed is the name an install gave the object a role names: the object of that resource in
// ns whose name ends with name (a kustomize namePrefix, a Helm release's prefix), else the
// object named by a workload's flag (--x=<ns>/<name with that ending>: the proxy's ticket key
// Secret), else name (an object the install does not hold and names nowhere, such as the
// Secret the controller creates).
func renamed(objs []*unstructured.Unstructured, ns, resource, name string) string {
	for _, o := range objs {
		if o.GetNamespace() == ns && strings.ToLower(o.GetKind())+"s" == resource && strings.HasSuffix(o.GetName(), name) {
			return o.GetName()
		}
	}
	// An object the workload makes itself (a Secret of keys) is named by a flag of one of its
	// containers: --flag=<ns>/<name>.
	for _, o := range objs {
		if o.GetNamespace() != ns {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
			for _, a := range args {
				_, v, ok := strings.Cut(a, "="+ns+"/")
				if ok && strings.HasSuffix(v, name) && strings.HasPrefix(a, "--") {
					return v
				}
			}
		}
	}
	return name
}

// checkAccess asks the API server's authorizer (a SubjectAccessReview, what kubectl auth
// can-i --as does) about every permission, as w's ServiceAccount.
func (s *apiServer) checkAccess(ctx context.Context, t *testing.T, w workload, perms []permission) {
	t.Helper()
	if len(perms) == 0 {
		t.Fatalf("%s: nothing to check", w)
	}
	for _, p := range perms {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   w.user(),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + w.namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: p.namespace, Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource, Name: p.name,
			},
		}}
		got, err := s.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if got.Status.Allowed != p.allowed {
			if p.allowed {
				t.Errorf("%s may not %s, which it needs", w, p)
			} else {
				t.Errorf("%s may %s, which it must not", w, p)
			}
		}
	}
}

// boundGrants is everything the roles bound to w's ServiceAccount in objs grant, as
// "group/resource:verb"; a binding to a role objs does not hold is an error.
func boundGrants(t *testing.T, w workload, objs []*unstructured.Unstructured) []string {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{} // "Kind namespace/name"
	var bindings []rbacv1.RoleBinding         // a ClusterRoleBinding as a RoleBinding without namespace
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // same rules field
			fromUnstructured(t, o, &r)
			roles[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = r.Rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			fromUnstructured(t, o, &b)
			b.Namespace = o.GetNamespace()
			bindings = append(bindings, b)
		}
	}
	var rules [][]rbacv1.PolicyRule
	for _, b := range bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == w.serviceAccount && s.Namespace == w.namespace
		}) {
			continue
		}
		ns := b.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			ns = ""
		}
		r, ok := roles[b.RoleRef.Kind+" "+ns+"/"+b.RoleRef.Name]
		if !ok {
			t.Errorf("%s: binding %s/%s refers to %s %s, which the install does not hold", w, b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		rules = append(rules, r)
	}
	return grants(rules...)
}
