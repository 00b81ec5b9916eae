package ingress

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestPassthrough: which hosts ssl-passthrough passes through. A host belongs to one
// namespace, passthrough included: another namespace's Ingress cannot take an owned host's TLS
// by asking for passthrough; rules without a host or with a wildcard are refused with a reason.
func TestPassthrough(t *testing.T) {
	pt := func(ing *networkingv1.Ingress, ns string) *networkingv1.Ingress {
		ing.Namespace = ns
		ing.Annotations = map[string]string{"metalgate.io/ssl-passthrough": "true"}
		return ing
	}
	owner := ingress("owner", 0, path{"bank.test", "/", "Prefix", "web"})
	thief := pt(ingress("thief", 1, path{"bank.test", "/", "Prefix", "web"}), "evil")
	mine := pt(ingress("mine", 2, path{"pt.test", "/", "Prefix", "web"}, path{"", "/", "Prefix", "web"}, path{"*.wild.test", "/", "Prefix", "web"}), "ns")
	evilSvc := svc("web")
	evilSvc.Namespace = "evil"
	in := Input{Classes: []*networkingv1.IngressClass{class("metalgate")}, Ingresses: []*networkingv1.Ingress{owner, thief, mine},
		Services: []*corev1.Service{svc("web"), evilSvc}, SSLPassthrough: true}
	tab, problems := Build(in)
	if be := tab.Passthrough("bank.test"); be != nil {
		t.Errorf("another namespace took bank.test's TLS by passthrough: %s", be.Service)
	}
	if be := tab.Passthrough("PT.test."); be == nil || be.Service.String() != "ns/web" {
		t.Errorf("pt.test: %v, want ns/web", be)
	}
	var text []string
	for _, p := range problems {
		text = append(text, p.Object.NamespacedName.String()+" "+p.Reason+": "+p.Message)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"evil/thief HostConflict", `ns/mine InvalidRule: ssl-passthrough: host ""`, `ns/mine InvalidRule: ssl-passthrough: host "*.wild.test"`} {
		if !strings.Contains(all, want) {
			t.Errorf("problems:\n%s\nwant one starting %q", all, want)
		}
	}
	if !tab.HasPassthrough() {
		t.Error("HasPassthrough false")
	}
}
