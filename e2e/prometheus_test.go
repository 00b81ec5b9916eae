//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
)

// Address pools of TestPrometheus, clear of the other tests' (the proxy's VIP on the segment,
// answered at layer 2; the others never reached by a client).
const (
	promProxyPool  = "198.51.100.200/29"
	promTinyPool   = "100.64.14.1/32" // one address: the second Service exhausts it
	promHiddenPool = "100.64.15.0/30" // advertised to no node: its VIP has no announcer
	promBGPPool    = "100.64.16.0/28"
	promPeer       = "e2e-prom-router"
)

// promListen is where the test's Prometheus listens: the loopback of node n1's network
// namespace (inside the lab; the root namespace reaches it only through that namespace).
const (
	promNode   = "n1"
	promListen = "127.0.0.1:19090"
)

const (
	rulesFile      = "../config/prometheus/metalgate-rules.yaml"
	dashboardsGlob = "../config/grafana/*.json"
)

// rateInterval replaces Grafana's $__rate_interval (and $__interval, $__range): at a 2 s scrape
// interval Grafana would pick about this, and a minute holds enough samples for rate().
const rateInterval = "1m"

// noSeriesInLab lists the queries (by the name testQueries gives them: dashboard panel or
// variable, or alert) that legitimately return no series in this lab, each with the reason.
// Every other query must return at least one, and these must return none (a stale entry
// fails).
var noSeriesInLab = map[string]string{
	"alert MetalgateIngressStatusWriteErrors":                            `no Ingress status write fails in the lab; metalgate_proxy_status_writes_total{result="error"} appears with the first failure`,
	"alert MetalgateBFDSessionDown":                                      "the lab's BGPPeer has no BFD profile (TestSpeakerBGPBFD covers BFD); metalgate_bgp_bfd_session_up has series only for peers with one",
	"alert MetalgateL2SocketErrors":                                      "no ARP/NDP socket fails in the lab; metalgate_speaker_l2_socket_errors_total appears with the first error",
	`metalgate-speaker.json panel "ARP/NDP socket errors" query A`:       "as alert MetalgateL2SocketErrors",
	`metalgate-proxy.json panel "Backend connections discarded" query A`: "the echo backends never send unread or unsolicited bytes nor break a response; metalgate_proxy_upstream_connections_discarded_total appears with the first discarded connection",
}

// TestPrometheus: a real Prometheus (Debian's package) runs in node n1's network namespace,
// discovers the metalgate pods through the lab API server (Kubernetes service discovery, the
// way the chart's PodMonitor selects them: label app.kubernetes.io/name=metalgate, ports
// metrics and admin) and scrapes the controller, the speakers and a proxy with the token of a
// ServiceAccount bound to the shipped ClusterRole metalgate-metrics-reader (TokenRequest). It
// loads the shipped rules (config/prometheus/metalgate-rules.yaml; the test's copy has every
// `for:` set to 0s, otherwise identical) and evaluates them every 2 s. Then:
//   - client traffic through the proxy's VIP (HTTP 200, 404, 503 without endpoints, HTTPS);
//   - pool exhausted (a /32 pool and two Services), a VIP without announcer (an
//     L2Advertisement whose node selector matches no node) and a BGP session down (the lab
//     router shuts its neighbour n1): MetalgatePoolExhausted, MetalgateVIPWithoutAnnouncer and
//     MetalgateBGPSessionDown fire (/api/v1/alerts), and resolve once each cause is removed;
//   - every query of every panel of config/grafana/*.json and every dashboard variable, and
//     every alert expression of the rules file (its comparisons made `bool`, absent(x) read as
//     x, so that it returns the series it compares) returns at least one series, except those
//     in noSeriesInLab; every rule evaluates without error; no metalgate series had a label
//     renamed to exported_* (a metric label clashing with a target label).
func TestPrometheus(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatalf("no prometheus binary (Debian package prometheus; make deps installs it): %v", err)
	}
	start := time.Now()
	l := openLab(t)
	cs := clientset(t, l)
	cl := labClient(t, l)
	ctx := context.Background()

	deploySpeaker(t, l, cs)
	proxyPool := manualPool(t, cl, "e2e-prom-proxy-", promProxyPool)
	l2Advertisement(t, cl, "e2e-prom-proxy-", proxyPool.Name)
	tinyPool := manualPool(t, cl, "e2e-prom-tiny-", promTinyPool)
	hiddenPool := manualPool(t, cl, "e2e-prom-hidden-", promHiddenPool)
	hiddenAdv := &v1alpha1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-prom-hidden-", Namespace: operatorNamespace},
		Spec: v1alpha1.L2AdvertisementSpec{
			IPAddressPools: []string{hiddenPool.Name},
			NodeSelectors:  []metav1.LabelSelector{{MatchLabels: map[string]string{"metalgate.io/e2e-prometheus": "no-such-node"}}},
		},
	}
	if err := cl.Create(ctx, hiddenAdv); err != nil {
		t.Fatalf("create L2Advertisement: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), hiddenAdv) })
	bgpPool := manualPool(t, cl, "e2e-prom-bgp-", promBGPPool)
	routerPeering(t, l, cl, promPeer, bgpPool.Name, func(s *v1alpha1.BGPPeerSpec) {
		s.ConnectTime = &metav1.Duration{Duration: time.Second}
	})
	n1 := lab.Nodes()[0]
	t.Cleanup(func() { _, _ = l.Vtysh(context.Background(), routerNeighbour(n1, false)...) })

	ns := testNamespace(t, cs, "e2e-prom")
	class, controller := ownIngressClass(t, cl, ns)
	deployNamespacedProxy(t, l, cl, ns, proxyPool.Name, controller)
	echoBackend(t, cl, ns, "alpha")
	nobody := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "nobody"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := cl.Create(ctx, nobody); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"metalgate-proxy", "alpha"} {
		waitDeploymentReady(t, cs, ns, name, 2*time.Minute)
	}
	vip := serviceVIP(t, cl, ns, "metalgate-proxy")
	p := &proxyLab{l: l, cs: cs, cl: cl, ns: ns, class: class, vip: vip, domain: ns + ".test", dir: t.TempDir()}
	routed := lbService(t, cl, ns, "routed", bgpPool.Name, "alpha")
	serviceVIP(t, cl, ns, routed.Name)
	t.Logf("proxy VIP %s, setup %s", vip, time.Since(start).Round(time.Millisecond))

	prom := startPrometheus(t, l, cs, ns)
	prom.waitTargets(t, map[string]int{"controller": 1, "speaker": lab.NodeCount, "proxy": 1})
	t.Logf("Prometheus scrapes every target, %s", time.Since(start).Round(time.Millisecond))

	sendTraffic(t, p)

	n1Speaker := net.JoinHostPort(n1.IPv4.String(), "7472")
	alerts := []struct {
		name   string
		labels map[string]string
	}{
		{"MetalgatePoolExhausted", map[string]string{"pool": tinyPool.Name, "family": "ipv4"}},
		{"MetalgateVIPWithoutAnnouncer", map[string]string{"mode": "layer2"}},
		{"MetalgateBGPSessionDown", map[string]string{"peer": promPeer, "instance": n1Speaker}},
		{"MetalgateBGPPeerInvalid", map[string]string{"peer": promPeer + "-invalid"}},
	}
	eventually(t, 60*time.Second, "Prometheus: BGP sessions with "+promPeer+" up on every node", func() error {
		return prom.expectValue(ctx, `metalgate_bgp_session_up{peer="`+promPeer+`"}`, lab.NodeCount, 1)
	})
	// None of them is active before its cause (else its firing would prove nothing).
	for _, a := range alerts {
		eventually(t, 30*time.Second, a.name+" inactive before its cause", func() error { return prom.alertState(ctx, a.name, a.labels, "") })
	}

	// The causes, all at once (each alert is told apart by its labels), and a BGPPeer no
	// speaker can configure (its password Secret does not exist).
	invalid := &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: promPeer + "-invalid", Namespace: operatorNamespace},
		Spec: v1alpha1.BGPPeerSpec{Address: lab.ControlPlane.IPv4.String(), MyASN: lab.NodeASN, ASN: lab.RouterASN,
			PasswordSecret: corev1.SecretReference{Name: promPeer + "-no-such-secret"}},
	}
	if err := cl.Create(ctx, invalid); err != nil {
		t.Fatalf("create BGPPeer: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), invalid) })
	var tiny []*corev1.Service
	for _, name := range []string{"tiny-a", "tiny-b"} {
		tiny = append(tiny, lbService(t, cl, ns, name, tinyPool.Name, "nobody"))
	}
	hidden := lbService(t, cl, ns, "hidden", hiddenPool.Name, "alpha")
	serviceVIP(t, cl, ns, hidden.Name)
	if out, err := l.Vtysh(ctx, routerNeighbour(n1, true)...); err != nil {
		t.Fatalf("shut the router's neighbour %s: %v: %s", n1.IPv4, err, shortErr(out))
	}
	for _, a := range alerts {
		eventually(t, 90*time.Second, a.name+" fires", func() error { return prom.alertState(ctx, a.name, a.labels, "firing") })
	}
	t.Logf("alerts fire, %s", time.Since(start).Round(time.Millisecond))
	// Every query, while the causes are there (the series of each exist).
	t.Run("QueriesReturnSeries", prom.testQueries)

	// Remove the causes: the Services of the /32 pool, the advertisement's node selector,
	// the invalid BGPPeer, the router's shutdown.
	for _, s := range tiny {
		if err := cl.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	base := hiddenAdv.DeepCopy()
	hiddenAdv.Spec.NodeSelectors = nil
	if err := cl.Patch(ctx, hiddenAdv, client.MergeFrom(base)); err != nil {
		t.Fatalf("let every node announce %s: %v", hiddenPool.Name, err)
	}
	if err := cl.Delete(ctx, invalid); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Vtysh(ctx, routerNeighbour(n1, false)...); err != nil {
		t.Fatalf("re-enable the router's neighbour %s: %v: %s", n1.IPv4, err, shortErr(out))
	}
	for _, a := range alerts {
		eventually(t, 90*time.Second, a.name+" resolves", func() error { return prom.alertState(ctx, a.name, a.labels, "") })
	}
	t.Logf("alerts resolved, %s", time.Since(start).Round(time.Millisecond))

	t.Run("RulesHealthy", prom.testRulesHealthy)
	t.Run("NoLabelClash", func(t *testing.T) {
		var qs []string
		for _, l := range []string{"namespace", "pod", "container", "endpoint", "instance", "job"} {
			qs = append(qs, `{__name__=~".+", exported_`+l+`=~".+"}`)
		}
		q := strings.Join(qs, " or ")
		n, err := prom.count(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d metalgate series have a label renamed exported_* (a metric label clashes with a target label): %s", n, q)
		}
	})
	t.Logf("TestPrometheus took %s", time.Since(start).Round(time.Millisecond))
}

// routerNeighbour is the vtysh commands that shut (or re-enable) the lab router's neighbour n.
func routerNeighbour(n lab.Node, shut bool) []string {
	cmd := "neighbor " + n.IPv4.String() + " shutdown"
	if !shut {
		cmd = "no " + cmd
	}
	return []string{"configure terminal", fmt.Sprintf("router bgp %d", lab.RouterASN), cmd, "end"}
}

// lbService creates a LoadBalancer Service name (port 80 → 8080) in ns, asking for pool and
// selecting the pods app=app.
func lbService(t *testing.T, cl client.Client, ns, name, pool, app string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"metalgate.io/address-pool": pool}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := cl.Create(context.Background(), svc); err != nil {
		t.Fatalf("create Service %s: %v", name, err)
	}
	return svc
}

// sendTraffic sends requests through the proxy's VIP from the lab client: routed 200s, a 404
// (no route), 503s (a backend without endpoints), 403s (a denied source range), HTTPS with a
// test CA's certificate, ARP requests, and a scrape without a token (refused).
func sendTraffic(t *testing.T, p *proxyLab) {
	t.Helper()
	ctx := context.Background()
	ca, err := newPEMCA("metalgate e2e CA " + p.ns)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	secure := p.host("secure")
	certPEM, keyPEM, _, err := ca.issue(secure)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tls-secure", Namespace: p.ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
	ings := []*networkingv1.Ingress{
		p.ingress("web", nil, ingressRule(p.host("web"), "/", "alpha")),
		p.ingress("empty", nil, ingressRule(p.host("empty"), "/", "nobody")),
		p.ingress("secure", []networkingv1.IngressTLS{{Hosts: []string{secure}, SecretName: sec.Name}}, ingressRule(secure, "/", "alpha")),
		p.ingress("denied", nil, ingressRule(p.host("denied"), "/", "alpha")),
	}
	ings[3].Annotations = map[string]string{"metalgate.io/denylist-source-range": "0.0.0.0/0,::/0"}
	for _, o := range []client.Object{sec, ings[0], ings[1], ings[2], ings[3]} {
		if err := p.cl.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	// ARP from the client, whatever its neighbour cache holds: the VIP's owner answers, and
	// every speaker sees (and drops) a request for the router's address.
	for _, target := range []string{p.vip.String(), lab.Router.IPv4.String()} {
		eventually(t, 30*time.Second, "arping "+target+" from the client", func() error {
			out, err := p.l.Exec(ctx, "client", "arping", "-c", "1", "-w", "1", "-I", "eth0", target)
			if err != nil {
				return fmt.Errorf("arping %s: %v: %s", target, err, shortErr(out))
			}
			return nil
		})
	}
	w := p.webClient()
	eventually(t, 30*time.Second, "GET "+p.host("web")+" through "+p.vip.String(), func() error {
		return w.expect(ctx, p.host("web"), "/", "alpha")
	})
	for i := 0; i < 20; i++ {
		if err := w.expect(ctx, p.host("web"), fmt.Sprintf("/%d", i), "alpha"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "GET "+p.host("empty")+": 503 (no endpoints)", func() error {
		return w.expectStatus(ctx, p.host("empty"), "/", http.StatusServiceUnavailable)
	})
	eventually(t, 30*time.Second, "GET "+p.host("denied")+": 403 (source range)", func() error {
		return w.expectStatus(ctx, p.host("denied"), "/", http.StatusForbidden)
	})
	if err := w.expectStatus(ctx, "unknown.invalid", "/", http.StatusNotFound); err != nil {
		t.Error(err)
	}
	eventually(t, 30*time.Second, "HTTPS "+secure+" verified with the test CA", func() error {
		body, info, err := p.curl(ctx, "--cacert", caFile, "--resolve", secure+":443:"+p.vip.String(), "https://"+secure+"/tls")
		if err != nil {
			return err
		}
		_, err = p.expectEcho(body, info, "alpha", secure, "/tls")
		return err
	})
	sendRetries(t, p, w)
	// A scraper without a token is refused (metalgate_admin_requests_refused_total).
	pod := p.proxyPod(t)
	out, err := p.l.Exec(ctx, promNode, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
		"http://"+net.JoinHostPort(pod.Status.PodIP, "10254")+"/metrics")
	if err != nil || strings.TrimSpace(out) != "401" {
		t.Errorf("proxy /metrics without a token: %q (%v), want 401", out, err)
	}
}

// sendRetries makes the proxy retry, so that metalgate_proxy_retries_total (a counter with a
// reason label, without a series until the first retry) has one, whatever else the lab did: a
// Service without a selector whose two EndpointSlices (labelled as the endpoint-slice
// controller's: the proxy routes to no other, and for a Service without a selector that
// controller leaves them alone) name alpha's pod twice, once on its port
// and once on a port nothing listens on (the pod answers a connect with a reset). A request that
// tries the closed port first is retried on the open one (reason connect), so every request
// still gets alpha; requests go on until the proxy's own /metrics shows a retry (alternation or
// the ejection of the closed endpoint decide which goes first; a few requests suffice).
func sendRetries(t *testing.T, p *proxyLab, w *webClient) {
	t.Helper()
	ctx := context.Background()
	pods, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=alpha"})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && pod.Status.PodIP != "" {
			ip = pod.Status.PodIP
		}
	}
	if ip == "" {
		t.Fatalf("no alpha pod with an address in %s", p.ns)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "retried", Namespace: p.ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	objs := []client.Object{svc}
	for i, port := range []int32{8080, 8089} {
		name, proto, ready := "http", corev1.ProtocolTCP, true
		objs = append(objs, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("retried-%d", i), Namespace: p.ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		})
	}
	objs = append(objs, p.ingress("retried", nil, ingressRule(p.host("retried"), "/", svc.Name)))
	for _, o := range objs {
		if err := p.cl.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	pod := p.proxyPod(t)
	eventually(t, 60*time.Second, "the proxy retries a request to "+p.host("retried")+" (metalgate_proxy_retries_total)", func() error {
		if err := w.expect(ctx, p.host("retried"), "/", "alpha"); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		raw, err := portForwardGet(pctx, p.l.RESTConfig(), p.ns, pod.Name, 10254, "/metrics", "")
		if err != nil {
			return fmt.Errorf("metrics of %s: %w", pod.Name, err)
		}
		if !strings.Contains(string(raw), "\nmetalgate_proxy_retries_total{") {
			return errors.New("no retry counted yet")
		}
		return nil
	})
}

// promServer is the test's Prometheus: its process and an HTTP client that reaches it inside
// the lab.
type promServer struct {
	l       *lab.Lab
	cs      kubernetes.Interface
	targets string // the file discovery's file
	base    string
	hc      *http.Client
	log     string
}

// startPrometheus runs prometheus in n1's network namespace, scraping the metalgate pods
// (writeTargets) with the token of a ServiceAccount of ns bound to nothing but the shipped
// ClusterRole metalgate-metrics-reader, and evaluating the shipped rules with `for: 0s`. The
// process ends with the test.
func startPrometheus(t *testing.T, l *lab.Lab, cs kubernetes.Interface, ns string) *promServer {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount: %v", err)
	}
	for _, role := range []string{"metalgate-metrics-reader"} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bind %s: %v", role, err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		})
	}
	secs := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	rules, n, err := rulesForZero(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d alerts, loaded with for: 0s", rulesFile, n)
	files := map[string][]byte{
		"token":          []byte(tr.Status.Token),
		"rules.yaml":     rules,
		"prometheus.yml": []byte(promConfig(dir)),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writeTargets(ctx, cs, filepath.Join(dir, "targets.json")); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "prometheus.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", l.Namespace(promNode), "prometheus",
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=1h",
		"--web.listen-address="+promListen,
		"--log.level=info")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("prometheus log:\n%s", tail(string(b), 60))
		}
	})
	netns := filepath.Join("/run/netns", l.Namespace(promNode))
	p := &promServer{l: l, cs: cs, targets: filepath.Join(dir, "targets.json"), base: "http://" + promListen, log: logFile, hc: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialInNetns(ctx, netns, network, addr)
		}},
	}}
	eventually(t, 60*time.Second, "Prometheus ready on "+promListen+" in "+l.Namespace(promNode), func() error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logFile)
			t.Fatalf("prometheus exited: %v\n%s", err, tail(string(b), 30))
		default:
		}
		_, err := p.get(context.Background(), "/-/ready", nil)
		return err
	})
	return p
}

// promConfig is the test Prometheus's configuration: a 2 s interval, the rules, and the
// scrape of the targets in targets.json (written by writeTargets) with the scraper's bearer
// token. Debian's prometheus is built without kubernetes_sd_configs, so the test discovers the
// pods itself, as the chart's PodMonitor selects them, and hands them over by file discovery.
func promConfig(dir string) string {
	return fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files:
  - %[1]s/rules.yaml
scrape_configs:
  - job_name: metalgate
    metrics_path: /metrics
    authorization:
      credentials_file: %[1]s/token
    file_sd_configs:
      - files: [%[1]s/targets.json]
        refresh_interval: 2s
`, dir)
}

// writeTargets writes the scrape targets of Prometheus's file discovery: what the chart's
// PodMonitor selects through the Prometheus Operator (running pods labelled
// app.kubernetes.io/name=metalgate in any namespace, their container ports named metrics or
// admin) with the target labels the operator gives (namespace, pod, container, endpoint;
// namespace dropped on the admin port, as the PodMonitor's relabeling does), and the pod's
// component label.
func writeTargets(ctx context.Context, cs kubernetes.Interface, file string) (int, error) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=metalgate", FieldSelector: "status.phase=Running"})
	if err != nil {
		return 0, err
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var groups []group
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue
		}
		for _, c := range pod.Spec.Containers {
			for _, port := range c.Ports {
				if port.Name != "metrics" && port.Name != "admin" {
					continue
				}
				labels := map[string]string{
					"namespace": pod.Namespace, "pod": pod.Name, "container": c.Name, "endpoint": port.Name,
					"component": pod.Labels["app.kubernetes.io/component"],
				}
				if port.Name == "admin" {
					delete(labels, "namespace") // the PodMonitor's labeldrop on the admin port
				}
				groups = append(groups, group{
					Targets: []string{net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(port.ContainerPort))},
					Labels:  labels,
				})
			}
		}
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return 0, err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return 0, err
	}
	return len(groups), os.Rename(tmp, file)
}

// forLine is a rule's `for:` line in the rules file.
var forLine = regexp.MustCompile(`(?m)^(\s+for:) \S+$`)

// rulesForZero returns the rules file with every `for:` duration replaced by 0s (alerts fire on
// the first evaluation that finds them true) and the number of alerts; every alert must have
// a `for:` line, so that none is left with its shipped duration.
func rulesForZero(file string) ([]byte, int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	alerts := strings.Count(string(b), "- alert: ")
	fors := len(forLine.FindAll(b, -1))
	if alerts == 0 || fors != alerts {
		return nil, 0, fmt.Errorf("%s: %d alerts, %d for: lines; want one each", file, alerts, fors)
	}
	return forLine.ReplaceAll(b, []byte("$1 0s")), alerts, nil
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// get GETs path with query parameters from Prometheus's HTTP API and returns the "data" of a
// successful answer.
func (p *promServer) get(ctx context.Context, path string, q url.Values) (json.RawMessage, error) {
	u := p.base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, shortErr(string(body)))
	}
	if path == "/-/ready" {
		return nil, nil
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("GET %s: %s", path, r.Error)
	}
	return r.Data, nil
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns its samples (a vector; a scalar counts as one).
func (p *promServer) query(ctx context.Context, q string) ([]promSample, error) {
	data, err := p.get(ctx, "/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	switch r.ResultType {
	case "vector":
		var v []promSample
		err := json.Unmarshal(r.Result, &v)
		return v, err
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(r.Result, &s); err != nil {
			return nil, err
		}
		return []promSample{{Value: s}}, nil
	default:
		return nil, fmt.Errorf("query %s: result type %s", q, r.ResultType)
	}
}

func (p *promServer) count(ctx context.Context, q string) (int, error) {
	v, err := p.query(ctx, q)
	return len(v), err
}

// expectValue: q returns n series, each of value want.
func (p *promServer) expectValue(ctx context.Context, q string, n int, want float64) error {
	v, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	if len(v) != n {
		return fmt.Errorf("%s: %d series, want %d", q, len(v), n)
	}
	for _, s := range v {
		if s.Value[1] != fmt.Sprint(want) {
			return fmt.Errorf("%s: %v = %v, want %v", q, s.Metric, s.Value[1], want)
		}
	}
	return nil
}

// waitTargets waits until Prometheus scrapes, per component label, at least want targets (the
// lab may run other tests' proxies too), every target up.
func (p *promServer) waitTargets(t *testing.T, want map[string]int) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("Prometheus scrapes %v, every target up", want), func() error {
		if _, err := writeTargets(context.Background(), p.cs, p.targets); err != nil {
			return err
		}
		data, err := p.get(context.Background(), "/api/v1/targets", url.Values{"state": {"active"}})
		if err != nil {
			return err
		}
		var r struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
				ScrapeURL string            `json:"scrapeUrl"`
			} `json:"activeTargets"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		got := map[string]int{}
		var bad []string
		for _, tg := range r.ActiveTargets {
			if tg.Health != "up" {
				bad = append(bad, fmt.Sprintf("%s %s: %s", tg.ScrapeURL, tg.Health, tg.LastError))
				continue
			}
			got[tg.Labels["component"]]++
		}
		for c, n := range want {
			if got[c] < n {
				return fmt.Errorf("up targets %v, want %v; not up: %v", got, want, bad)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("targets not up: %v", bad)
		}
		return nil
	})
}

// alertState checks that an alert named name whose labels include labels is in state
// ("firing", "pending"), or, with state "", that there is none.
func (p *promServer) alertState(ctx context.Context, name string, labels map[string]string, state string) error {
	data, err := p.get(ctx, "/api/v1/alerts", nil)
	if err != nil {
		return err
	}
	var r struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	var seen []string
	for _, a := range r.Alerts {
		if a.Labels["alertname"] != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && a.Labels[k] == v
		}
		if !match {
			seen = append(seen, fmt.Sprintf("%v %s", a.Labels, a.State))
			continue
		}
		if state == "" {
			return fmt.Errorf("%s %v is %s, want resolved", name, a.Labels, a.State)
		}
		if a.State == state {
			return nil
		}
		seen = append(seen, fmt.Sprintf("%v %s", a.Labels, a.State))
	}
	if state == "" {
		return nil
	}
	return fmt.Errorf("no %s alert %s with %v (others: %v)", state, name, labels, seen)
}

// grafanaVar is a Grafana variable in a query: $name, ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// grafanaToPromQL replaces Grafana's variables: the interval ones by rateInterval, a
// dashboard variable by ".*" (what "All" sends: every variable is multi-value with allValue
// ".*"). The ${1} of a label_replace is not a variable and stays.
func grafanaToPromQL(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVar.FindStringSubmatch(v)[1]
		switch {
		case name == "1" || name == "2":
			return v
		case strings.HasPrefix(name, "__"):
			return rateInterval
		default:
			return ".*"
		}
	})
}

// labelValues matches a Grafana variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// dashboardQueries returns every panel query and every variable query of config/grafana as
// PromQL, keyed by a description.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(dashboardsGlob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards %s: %v", dashboardsGlob, err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct {
				List []struct {
					Name       string `json:"name"`
					Type       string `json:"type"`
					Definition string `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		base := filepath.Base(f)
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(strings.TrimSpace(v.Definition))
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", base, v.Name, v.Definition)
				continue
			}
			out[fmt.Sprintf("%s variable %s", base, v.Name)] = fmt.Sprintf("count by (%s) (%s)", m[2], grafanaToPromQL(m[1]))
		}
		panels := d.Panels
		for len(panels) > 0 {
			pn := panels[0]
			panels = panels[1:]
			for _, raw := range pn.Panels { // panels nested in a collapsed row
				var inner panel
				if err := json.Unmarshal(raw, &inner); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				panels = append(panels, inner)
			}
			for _, q := range pn.Targets {
				out[fmt.Sprintf("%s panel %q query %s", base, pn.Title, q.RefID)] = grafanaToPromQL(q.Expr)
			}
		}
	}
	return out
}

// alertQueries returns each alert's expression of the rules file in the form that returns the
// series it compares: every comparison made `bool` (absent(x): x).
func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out["alert "+r.Alert] = seriesOf(r.Expr)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	return out
}

// seriesOf turns an alert expression into one that returns the series it compares: absent(x)
// becomes x, and each comparison operator outside label matchers and strings gets the bool
// modifier (a > 0 returns every series of a, 0 or 1, instead of filtering). A comparison of
// two vectors still needs their labels to match, so a wrong label leaves the result empty.
func seriesOf(expr string) string {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "absent(") && strings.HasSuffix(expr, ")") {
		return expr[len("absent(") : len(expr)-1]
	}
	var b strings.Builder
	braces := 0
	var quote byte
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(expr) {
				b.WriteByte(c)
				i++
				c = expr[i]
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '{':
			braces++
		case c == '}':
			braces--
		case braces == 0 && (c == '>' || c == '<' || c == '=' || c == '!'):
			op := string(c)
			if i+1 < len(expr) && expr[i+1] == '=' {
				op += "="
			}
			if op == "=" || op == "!" { // not a comparison (only matchers have them)
				break
			}
			b.WriteString(op)
			i += len(op) - 1
			if !strings.HasPrefix(strings.TrimSpace(expr[i+1:]), "bool") {
				b.WriteString(" bool")
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// testQueries: every dashboard query, every dashboard variable and every alert expression
// returns at least one series, except those noSeriesInLab names (which must then be empty: a
// stale exception fails too).
func (p *promServer) testQueries(t *testing.T) {
	qs := dashboardQueries(t)
	for k, v := range alertQueries(t) {
		qs[k] = v
	}
	names := make([]string, 0, len(qs))
	for k := range qs {
		names = append(names, k)
	}
	sort.Strings(names)
	for name := range noSeriesInLab {
		if _, ok := qs[name]; !ok {
			t.Errorf("noSeriesInLab names %s, which is no dashboard query or alert", name)
		}
	}
	ctx := context.Background()
	for _, name := range names {
		q := qs[name]
		reason, excused := noSeriesInLab[name]
		n := 0
		var err error
		// Poll briefly: a rate() needs two samples, a freshly created series one scrape.
		for deadline := time.Now().Add(15 * time.Second); ; {
			if excused {
				deadline = time.Now() // an excused query is asked once
			}
			n, err = p.count(ctx, q)
			if (err == nil && n > 0) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", name, q, err)
		case n == 0 && !excused:
			t.Errorf("%s returns no series: %s (%s)", name, q, p.seriesOf(ctx, q))
		case n > 0 && excused:
			t.Errorf("%s is listed as having no series in the lab (%s) but returns %d: %s", name, reason, n, q)
		case excused:
			t.Logf("%s: no series, as expected (%s)", name, reason)
		}
	}
	t.Logf("%d queries checked", len(names))
}

// seriesOf says, for a query that returned nothing, how many series each metric it reads has
// in Prometheus now (with its _bucket, _count or _sum suffix as written): which input was
// missing.
func (p *promServer) seriesOf(ctx context.Context, q string) string {
	var parts []string
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bmetalgate_[a-z0-9_]+`).FindAllString(q, -1) {
		if seen[m] {
			continue
		}
		seen[m] = true
		n, err := p.count(ctx, m)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d series", m, n))
	}
	return strings.Join(parts, ", ")
}

// testRulesHealthy: every rule the test's Prometheus loaded evaluates without error.
func (p *promServer) testRulesHealthy(t *testing.T) {
	data, err := p.get(context.Background(), "/api/v1/rules", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s/%s: health %s: %s", g.Name, rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus loaded no rules")
	}
}
