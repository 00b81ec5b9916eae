//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker/election"
)

const (
	// pluginPool is on the lab segment (layer 2), clear of its hosts and of the other tests'
	// pools.
	pluginPool = "198.51.100.224/29"
	// pluginBGPPool is off the segment, clear of the other tests' pools: only BGP reaches it.
	pluginBGPPool = "100.64.12.0/28"
)

// TestPlugin runs the built kubectl-metalgate against the lab, with the speakers of
// config/speaker and a namespaced proxy (config/proxy/namespaced) serving an echo backend:
//   - announcers shows the proxy's VIP announced by layer 2 from the node the election picks;
//   - allocations shows that node as the VIP's announcer;
//   - backends shows the echo pod's endpoint, ready and healthy, in the proxy's live table;
//   - check flags an Ingress whose class names no IngressClass (exit 1), and nothing about the
//     served Ingress once the proxy has written its VIP into the status;
//   - when a rival keeps writing a node IP into an Ingress's status, the proxy stops writing
//     it after three overwrites (the rival writes at most three times, then never again), and
//     check reports the node IP, the StatusConflict events and the ForeignStatusWriter one
//     naming the rival; annotation metalgate.io/status-owner gives the Ingress back;
//   - with a BGPPeer to the lab router, announcers shows a BGP VIP from every node to that peer;
//   - the admin ports the plugin reads answer nobody else: from the node network, without a
//     token, the speakers' metrics port, the proxy's admin port and the controller's metrics
//     port say 401 (the proxy's probes stay open); a ServiceAccount bound to
//     metalgate-metrics-reader reads /metrics everywhere but no /debug path (403).
//
// Speakers and proxies are reached through the API server's pods/portforward, as a user's
// kubectl would: the forwarded connection arrives from loopback inside the pod's network
// namespace, the only caller the admin ports serve without a token.
func TestPlugin(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	cl := labClient(t, l)
	ctx := context.Background()

	bin := filepath.Join(t.TempDir(), "kubectl-metalgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kubectl-metalgate").CombinedOutput(); err != nil {
		t.Fatalf("build the plugin: %v\n%s", err, out)
	}
	plugin := func(args ...string) (string, int, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", l.KubeconfigPath())...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode(), nil
		}
		return string(out), 0, err
	}

	deploySpeaker(t, l, cs)
	pool := manualPool(t, cl, "e2e-plugin-", pluginPool)
	adv := &v1alpha1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-plugin-", Namespace: operatorNamespace},
		Spec:       v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{pool.Name}},
	}
	if err := cl.Create(ctx, adv); err != nil {
		t.Fatalf("create L2Advertisement: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), adv) })

	ns := testNamespace(t, cs, "e2e-plugin")
	// A class of its own, so no other proxy serves these Ingresses (as in TestProxy).
	controller := "metalgate.io/e2e-" + ns
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if err := cl.Create(ctx, ic); err != nil {
		t.Fatalf("create IngressClass: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), ic) })
	deployNamespacedProxy(t, l, cl, ns, pool.Name, controller)
	echoBackend(t, cl, ns, "echo")
	for _, name := range []string{"metalgate-proxy", "echo"} {
		waitDeploymentReady(t, cs, ns, name, 2*time.Minute)
	}
	vip := serviceVIP(t, cl, ns, "metalgate-proxy")

	prefix := networkingv1.PathTypePrefix
	ingress := func(name, class string) {
		t.Helper()
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: name + "." + ns + ".test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "echo", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
				}}}}}}}}
		if err := cl.Create(ctx, ing); err != nil {
			t.Fatalf("create Ingress %s: %v", name, err)
		}
	}
	ingress("echo", ns)
	lostClass := "no-such-class-" + ns
	ingress("lost", lostClass)

	var names []string
	for _, n := range lab.Nodes() {
		names = append(names, n.Name)
	}
	owner := election.Owner(vip, readyProxyNodes(t, cl, ns)) // externalTrafficPolicy Local

	t.Run("announcers", func(t *testing.T) {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(vip.String()) + `\s+` + regexp.QuoteMeta(ns+"/metalgate-proxy") + `\s+-\s+layer2\s+` + regexp.QuoteMeta(owner) + `\s+eth0\s*$`)
		var out string
		eventually(t, 30*time.Second, fmt.Sprintf("announcers shows %s announced by %s alone", vip, owner), func() error {
			var code int
			var err error
			out, code, err = plugin("announcers")
			if err != nil || code != 0 {
				return fmt.Errorf("exit %d, %v: %s", code, err, out)
			}
			if !row.MatchString(out) {
				return fmt.Errorf("no row %q in:\n%s", row, out)
			}
			if strings.Contains(out, "did not answer") {
				return fmt.Errorf("a speaker did not answer:\n%s", out)
			}
			return nil
		})
		t.Logf("kubectl metalgate announcers:\n%s", out)
	})

	t.Run("allocations", func(t *testing.T) {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(ns) + `\s+metalgate-proxy\s+` + regexp.QuoteMeta(vip.String()) + `\s+` + regexp.QuoteMeta(pool.Name) + `\s+layer2 ` + regexp.QuoteMeta(owner) + `\s`)
		out, code, err := plugin("allocations")
		if err != nil || code != 0 {
			t.Fatalf("exit %d, %v: %s", code, err, out)
		}
		if !row.MatchString(out) {
			t.Errorf("no row %q in:\n%s", row, out)
		}
		t.Logf("kubectl metalgate allocations:\n%s", out)
	})

	t.Run("backends", func(t *testing.T) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
			t.Fatalf("the echo pod: %v %+v", err, pods)
		}
		endpoint := pods.Items[0].Status.PodIP + ":8080"
		row := regexp.MustCompile(`(?m)^echo\.` + regexp.QuoteMeta(ns) + `\.test\s+/ \(Prefix\)\s+` + regexp.QuoteMeta(ns+"/echo:http") + `\s+` + regexp.QuoteMeta(endpoint) + `\s+yes\s+yes\s+\d+\s*$`)
		var out string
		eventually(t, 30*time.Second, "backends shows the echo pod "+endpoint, func() error {
			var code int
			out, code, err = plugin("backends", "echo", "-n", ns)
			if err != nil || code != 0 {
				return fmt.Errorf("exit %d, %v: %s", code, err, out)
			}
			if !row.MatchString(out) {
				return fmt.Errorf("no row %q in:\n%s", row, out)
			}
			return nil
		})
		t.Logf("kubectl metalgate backends echo -n %s:\n%s", ns, out)
		out, code, err := plugin("backends", ns+"/lost")
		if err != nil || code != 1 || !strings.Contains(out, "does not serve Ingress "+ns+"/lost") {
			t.Errorf("backends of an Ingress no proxy serves: exit %d, %v:\n%s", code, err, out)
		}
	})

	t.Run("check", func(t *testing.T) {
		var out string
		eventually(t, 30*time.Second, "check flags the unknown class and nothing about the served Ingress", func() error {
			var ing networkingv1.Ingress
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "echo"}, &ing); err != nil {
				return err
			}
			if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 1 || lbs[0].IP != vip.String() {
				return fmt.Errorf("Ingress %s/echo status %+v, want the VIP %s", ns, lbs, vip)
			}
			var code int
			var err error
			out, code, err = plugin("check")
			if err != nil || code != 1 {
				return fmt.Errorf("exit %d (want 1), %v: %s", code, err, out)
			}
			want := fmt.Sprintf(`error: Ingress %s/lost: its class %q (spec.ingressClassName) names no IngressClass`, ns, lostClass)
			if !strings.Contains(out, want) {
				return fmt.Errorf("no %q in:\n%s", want, out)
			}
			if bad := "Ingress " + ns + "/echo"; strings.Contains(out, bad) {
				return fmt.Errorf("a finding about the served %s:\n%s", bad, out)
			}
			if bad := "IngressClass " + ns; strings.Contains(out, bad+":") {
				return fmt.Errorf("a finding about the served %s:\n%s", bad, out)
			}
			return nil
		})
		t.Logf("kubectl metalgate check:\n%s", out)
	})

	t.Run("admin ports", func(t *testing.T) {
		adminPortsRefuseStrangers(t, l, cs, ns)
	})

	t.Run("rival", func(t *testing.T) {
		// A foreign writer: it puts a node IP into the status whenever the status holds
		// anything else, as an ingress controller's status sync does. The proxy rewrites,
		// backs off, and at the third overwrite within 10 minutes (MaxConflicts) stops
		// writing that Ingress: the rival writes at most three times, then the status stays
		// put, and check names the other writer.
		ingress("rival", ns)
		nodeIP := lab.Nodes()[0].IPv4.String()
		wantIP := fmt.Sprintf("error: Ingress %s/rival: status.loadBalancer holds %s, which is the VIP of no metalgate proxy Service", ns, nodeIP)
		wantConflict := fmt.Sprintf("error: Ingress %s/rival: status conflict: ", ns)
		wantStopped := fmt.Sprintf(`error: Ingress %s/rival: a metalgate proxy stopped writing its status (ForeignStatusWriter, `, ns)
		wantWriter := `by field manager "e2e-rival" (now ` + nodeIP + `); this proxy (` + ns + `/metalgate-proxy`
		rivalWrites := 0
		rival := func() error {
			var ing networkingv1.Ingress
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rival"}, &ing); err != nil {
				return err
			}
			if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 1 || lbs[0].IP != nodeIP {
				ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: nodeIP}}
				if err := cl.Status().Update(ctx, &ing, client.FieldOwner("e2e-rival")); err != nil {
					return fmt.Errorf("rival write: %w", err)
				}
				rivalWrites++
			}
			return nil
		}
		// The proxy publishes the Ingress first.
		eventually(t, 30*time.Second, "the proxy publishes Ingress rival", func() error {
			var ing networkingv1.Ingress
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rival"}, &ing); err != nil {
				return err
			}
			if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 1 || lbs[0].IP != vip.String() {
				return fmt.Errorf("status %+v", lbs)
			}
			return nil
		})
		seenIP := false
		var out string
		eventually(t, 90*time.Second, "check reports the rival's node IP, the conflict, and the proxy stopping", func() error {
			if err := rival(); err != nil {
				return err
			}
			var code int
			var err error
			out, code, err = plugin("check")
			if err != nil || code != 1 {
				return fmt.Errorf("exit %d (want 1), %v: %s", code, err, out)
			}
			seenIP = seenIP || strings.Contains(out, wantIP)
			for _, want := range []string{wantConflict, wantStopped, wantWriter} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("no %q yet in:\n%s", want, out)
				}
			}
			if !seenIP {
				return fmt.Errorf("no %q yet in:\n%s", wantIP, out)
			}
			return nil
		})
		t.Logf("kubectl metalgate check:\n%s", out)
		if rivalWrites > 3 {
			t.Errorf("the rival had to write %d times, want at most 3: the proxy stops at the third overwrite (MaxConflicts)", rivalWrites)
		}
		// Stopped: for 20 s the rival, still watching, never has to write again.
		before := rivalWrites
		testenv.HoldsEvery(t, 500*time.Millisecond, 20*time.Second, "the proxy stays stopped", func() error {
			if err := rival(); err != nil {
				return err
			}
			if rivalWrites != before {
				return fmt.Errorf("the proxy wrote the status again after it stopped: the rival had to write %d more times", rivalWrites-before)
			}
			return nil
		})
		// The user gives the Ingress back to the proxy: it writes at once.
		var ing networkingv1.Ingress
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rival"}, &ing); err != nil {
			t.Fatal(err)
		}
		ing.Annotations = map[string]string{contract.AnnotationStatusOwner: ns + "/metalgate-proxy"}
		if err := cl.Update(ctx, &ing); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the proxy writes the Ingress the annotation gives it", func() error {
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rival"}, &ing); err != nil {
				return err
			}
			if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 1 || lbs[0].IP != vip.String() {
				return fmt.Errorf("status %+v", lbs)
			}
			return nil
		})
	})

	t.Run("announcers BGP", func(t *testing.T) {
		bgpPool := manualPool(t, cl, "e2e-plugin-bgp-", pluginBGPPool)
		peer := routerPeering(t, l, cl, "e2e-plugin-router", bgpPool.Name, nil)
		_, bgpVIP := webService(t, cs, cl, ns, bgpPool.Name)
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(bgpVIP.String()) + `\s+` + regexp.QuoteMeta(ns+"/web") + `\s+-\s+bgp\s+` +
			regexp.QuoteMeta(strings.Join(names, ",")) + `\s+` + regexp.QuoteMeta(peer.Name) + `\s*$`)
		var out string
		eventually(t, 60*time.Second, fmt.Sprintf("announcers shows %s announced by BGP from every node to %s", bgpVIP, peer.Name), func() error {
			var code int
			var err error
			out, code, err = plugin("announcers")
			if err != nil || code != 0 {
				return fmt.Errorf("exit %d, %v: %s", code, err, out)
			}
			if !row.MatchString(out) {
				return fmt.Errorf("no row %q in:\n%s", row, out)
			}
			return nil
		})
		t.Logf("kubectl metalgate announcers:\n%s", out)
	})
}

// adminPortsRefuseStrangers checks, from node n2's network namespace (where a host-network
// pod or anything on the node network would stand), that the speakers' metrics ports, the
// proxy's admin port in ns and the controller's metrics port serve /metrics and /debug/* only
// to a bearer token authorised for the path, while the proxy's probe paths stay open — and,
// from n1's own loopback (any process on the node: the speaker is on the host network), that
// the speaker asks for the same token there. The token is a ServiceAccount's in ns bound to
// metalgate-metrics-reader (config/rbac): the components' own RBAC (config/) must let them
// review it; the debug reader's (config/rbac/debug-reader) may read /debug/announcements.
func adminPortsRefuseStrangers(t *testing.T, l *lab.Lab, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount: %v", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metalgate-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind metalgate-metrics-reader: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	token := tr.Status.Token

	podIP := func(ns, selector string) string {
		t.Helper()
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "status.phase=Running"})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
			t.Fatalf("no running pod %s in %s: %v", selector, ns, err)
		}
		return pods.Items[0].Status.PodIP
	}
	proxy := net.JoinHostPort(podIP(ns, "app.kubernetes.io/component=proxy"), "10254")
	controller := net.JoinHostPort(podIP(operatorNamespace, "app.kubernetes.io/component=controller"), "8080")
	speaker := net.JoinHostPort(lab.Nodes()[0].IPv4.String(), "7472") // n1's, asked from n2
	const speakerLoopback = "127.0.0.1:7472"                          // n1's, asked from n1
	debugReader, err := debugReaderToken(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}

	// code GETs url from node with bearer token tok (none when ""), and returns the HTTP status.
	code := func(node, url, tok string) (string, error) {
		args := []string{"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"}
		if tok != "" {
			args = append(args, "-H", "Authorization: Bearer "+tok)
		}
		out, err := l.Exec(ctx, node, append(args, url)...)
		return strings.TrimSpace(out), err
	}
	tests := []struct {
		name, node, url    string
		noToken, withToken string // HTTP status without a token, with the metrics reader's
		withDebugReader    string // with the debug reader's; "" not asked
	}{
		{"speaker metrics", "n2", "http://" + speaker + "/metrics", "401", "200", "200"},
		{"speaker debug", "n2", "http://" + speaker + "/debug/announcements", "401", "403", "200"},
		{"speaker metrics from the node's loopback", "n1", "http://" + speakerLoopback + "/metrics", "401", "200", "200"},
		{"speaker debug from the node's loopback", "n1", "http://" + speakerLoopback + "/debug/announcements", "401", "403", "200"},
		{"proxy metrics", "n2", "http://" + proxy + "/metrics", "401", "200", ""},
		{"proxy debug", "n2", "http://" + proxy + "/debug/backends?ingress=" + ns + "/echo", "401", "403", "403"},
		{"proxy liveness probe", "n2", "http://" + proxy + "/healthz", "200", "200", ""},
		{"proxy readiness probe", "n2", "http://" + proxy + "/readyz", "200", "200", ""},
		{"controller metrics", "n2", "http://" + controller + "/metrics", "401", "200", ""},
	}
	for _, tc := range tests {
		// The binding may reach the API server's authorizer a moment after it was created (a
		// refusal is remembered for 10 s): poll.
		eventually(t, 30*time.Second, tc.name+" from "+tc.node, func() error {
			got, err := code(tc.node, tc.url, "")
			if err != nil || got != tc.noToken {
				return fmt.Errorf("GET %s without a token: %q %v, want %s", tc.url, got, err, tc.noToken)
			}
			got, err = code(tc.node, tc.url, token)
			if err != nil || got != tc.withToken {
				return fmt.Errorf("GET %s with the metrics reader's token: %q %v, want %s", tc.url, got, err, tc.withToken)
			}
			if tc.withDebugReader == "" {
				return nil
			}
			got, err = code(tc.node, tc.url, debugReader)
			if err != nil || got != tc.withDebugReader {
				return fmt.Errorf("GET %s with the debug reader's token: %q %v, want %s", tc.url, got, err, tc.withDebugReader)
			}
			return nil
		})
	}
}
