//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/speaker/election"
)

// proxyPool is on the lab segment (the client ARPs for it directly), clear of the hosts and of
// the speaker tests' 198.51.100.240/29.
const proxyPool = "198.51.100.232/29"

// proxyChanges is how many routing changes the WebSocket must survive.
const proxyChanges = 100

// TestProxy: client → VIP (ARP answered by a speaker) → node (kube-proxy) → metalgate proxy →
// echo pod. One namespaced proxy from config/proxy/namespaced with its own IngressClass, two
// echo backends, then from the client's network namespace:
//   - HTTP: curl routes by Host; Ingress status holds exactly the proxy Service's VIP;
//   - TLS: two hosts, two Secrets from a test CA; curl verifies the chain and each SNI gets its
//     own certificate (compared byte for byte); an unknown name gets none of them;
//   - HTTP2: curl --http2 negotiates h2 by ALPN;
//   - WebSocket: one connection through the VIP stays open while the routing table is swapped
//     100 times (Ingresses created, deleted, switched to another backend, the WebSocket's own
//     Ingress rewritten); a message after each change comes back;
//   - TLSSessionAcrossRollout: a TLS session made at the proxy's pod resumes at the pod that
//     replaces it in a rollout (shared ticket keys).
func TestProxy(t *testing.T) {
	start := time.Now()
	l := openLab(t)
	cs := clientset(t, l)
	cl := labClient(t, l)

	deploySpeaker(t, l, cs)
	pool := manualPool(t, cl, "e2e-proxy-", proxyPool)
	l2Advertisement(t, cl, "e2e-proxy-", pool.Name)

	ns := testNamespace(t, cs, "e2e-proxy")
	class, controller := ownIngressClass(t, cl, ns)
	deployNamespacedProxy(t, l, cl, ns, pool.Name, controller)
	for _, name := range []string{"alpha", "beta"} {
		echoBackend(t, cl, ns, name)
	}
	for _, name := range []string{"metalgate-proxy", "alpha", "beta"} {
		waitDeploymentReady(t, cs, ns, name, 2*time.Minute)
	}
	vip := serviceVIP(t, cl, ns, "metalgate-proxy")
	if !netip.MustParsePrefix(proxyPool).Contains(vip) {
		t.Fatalf("proxy VIP %s is not from pool %s", vip, proxyPool)
	}
	t.Logf("proxy %s/metalgate-proxy has VIP %s (setup %s)", ns, vip, time.Since(start).Round(time.Millisecond))

	p := &proxyLab{l: l, cs: cs, cl: cl, ns: ns, class: class, vip: vip, domain: ns + ".test", dir: t.TempDir()}
	t.Run("HTTP", p.testHTTP)
	t.Run("TLS", p.testTLS)
	t.Run("HTTP2", p.testHTTP2)
	t.Run("WebSocketAcrossChanges", p.testWebSocket)
	t.Run("TLSSessionAcrossRollout", p.testSessionAcrossRollout)
	t.Logf("TestProxy took %s", time.Since(start).Round(time.Millisecond))
}

// proxyLab is what the subtests of TestProxy share.
type proxyLab struct {
	l      *lab.Lab
	cs     kubernetes.Interface
	cl     client.Client
	ns     string
	class  string
	vip    netip.Addr
	domain string // every host is <name>.<domain>
	dir    string // files the subtests share (the CA for curl)

	ca    *pemCA // set by testTLS
	caPEM string
}

func (p *proxyLab) host(name string) string { return name + "." + p.domain }

// proxyEchoReply is the part of e2e/cmd/echo's JSON the tests look at.
type proxyEchoReply struct {
	Pod       string      `json:"pod"`
	Namespace string      `json:"namespace"`
	Host      string      `json:"host"`
	Path      string      `json:"path"`
	Proto     string      `json:"proto"`
	Headers   http.Header `json:"headers"`
}

// curl runs curl in the client namespace with a 5 s limit; -w output follows the body after a
// line "@@@".
func (p *proxyLab) curl(ctx context.Context, args ...string) (body, info string, err error) {
	full := append([]string{"curl", "-sS", "--max-time", "5", "-w", "\n@@@\n" + "%{http_code} %{http_version}\n%{certs}"}, args...)
	out, err := p.l.Exec(ctx, "client", full...)
	if err != nil {
		return "", "", fmt.Errorf("curl %s: %w: %s", strings.Join(args, " "), err, shortErr(out))
	}
	body, info, ok := strings.Cut(out, "\n@@@\n")
	if !ok {
		return "", "", fmt.Errorf("curl %s: no -w output in %s", strings.Join(args, " "), shortErr(out))
	}
	return body, info, nil
}

// expectEcho checks a 200 from the echo backend name (its pod name starts with name-) with
// host and path, and returns the reply.
func (p *proxyLab) expectEcho(body, info, backend, host, path string) (proxyEchoReply, error) {
	var r proxyEchoReply
	if code, _, _ := strings.Cut(info, " "); code != "200" {
		return r, fmt.Errorf("status %s, want 200: %s", code, shortErr(body))
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return r, fmt.Errorf("not the echo's JSON: %v: %s", err, shortErr(body))
	}
	if !strings.HasPrefix(r.Pod, backend+"-") || r.Namespace != p.ns || r.Host != host || r.Path != path {
		return r, fmt.Errorf("got pod %s/%s host %q path %q, want a %s pod of %s, host %q path %q", r.Namespace, r.Pod, r.Host, r.Path, backend, p.ns, host, path)
	}
	return r, nil
}

func (p *proxyLab) testHTTP(t *testing.T) {
	ctx := context.Background()
	ing := p.ingress("web", nil, ingressRule(p.host("alpha"), "/", "alpha"), ingressRule(p.host("beta"), "/", "beta"))
	if err := p.cl.Create(ctx, ing); err != nil {
		t.Fatalf("create Ingress: %v", err)
	}
	// The VIP is announced by the speaker the election picks among the nodes with a ready
	// proxy pod (externalTrafficPolicy Local): it alone answers ARP.
	owner, err := lab.NodeByName(election.Owner(p.vip, readyProxyNodes(t, p.cl, p.ns)))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, fmt.Sprintf("arping %s answered by %s only", p.vip, owner.Name), func() error {
		return arpingOnly(ctx, p.l, p.vip, owner.MAC)
	})
	url := "http://" + p.vip.String() + "/hello/world"
	for _, be := range []string{"alpha", "beta"} {
		host := p.host(be)
		eventually(t, 60*time.Second, fmt.Sprintf("curl -H 'Host: %s' %s reaches %s", host, url, be), func() error {
			body, info, err := p.curl(ctx, "-H", "Host: "+host, url)
			if err != nil {
				return err
			}
			r, err := p.expectEcho(body, info, be, host, "/hello/world")
			if err != nil {
				return err
			}
			if r.Headers.Get("X-Forwarded-Proto") != "http" || r.Headers.Get("X-Forwarded-Host") != host {
				return fmt.Errorf("forwarded headers %v", r.Headers)
			}
			// The port the client connected to (the Service's 80), not the container's 8080.
			if got := r.Headers.Get("X-Forwarded-Port"); got != "80" {
				return fmt.Errorf("X-Forwarded-Port %q, want 80", got)
			}
			return nil
		})
	}
	// A host no Ingress names: 404 from the proxy, not a backend.
	eventually(t, 30*time.Second, "a host no Ingress names gets 404", func() error {
		body, info, err := p.curl(ctx, "-H", "Host: "+p.host("nobody"), url)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(info, "404 ") {
			return fmt.Errorf("%q, want 404: %s", info, shortErr(body))
		}
		return nil
	})

	// The Ingress status holds the proxy Service's VIP and nothing else (never a node IP).
	eventually(t, 30*time.Second, "Ingress web status is the VIP "+p.vip.String(), func() error {
		return p.statusIsVIP(ctx, "web")
	})
}

// statusIsVIP checks that an Ingress's status.loadBalancer.ingress is exactly [{ip: VIP}].
func (p *proxyLab) statusIsVIP(ctx context.Context, name string) error {
	var ing networkingv1.Ingress
	if err := p.cl.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: name}, &ing); err != nil {
		return err
	}
	got := ing.Status.LoadBalancer.Ingress
	for _, a := range got {
		for _, n := range lab.Nodes() {
			if a.IP == n.IPv4.String() || a.IP == n.IPv6.String() {
				return fmt.Errorf("status %+v holds node %s's address", got, n.Name)
			}
		}
	}
	if len(got) != 1 || got[0].IP != p.vip.String() || got[0].Hostname != "" {
		return fmt.Errorf("status.loadBalancer.ingress = %+v, want exactly [{ip: %s}]", got, p.vip)
	}
	return nil
}

func (p *proxyLab) testTLS(t *testing.T) {
	ctx := context.Background()
	ca, err := newPEMCA("metalgate e2e CA " + p.ns)
	if err != nil {
		t.Fatal(err)
	}
	p.ca = ca
	p.caPEM = filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(p.caPEM, ca.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{"a": "alpha", "b": "beta"} // TLS host → backend
	leaves := map[string]*x509.Certificate{}
	var tlsSpec []networkingv1.IngressTLS
	var rules []networkingv1.IngressRule
	for _, n := range []string{"a", "b"} {
		host := p.host(n)
		certPEM, keyPEM, leaf, err := ca.issue(host)
		if err != nil {
			t.Fatal(err)
		}
		leaves[n] = leaf
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "tls-" + n, Namespace: p.ns},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		if err := p.cl.Create(ctx, sec); err != nil {
			t.Fatalf("create Secret: %v", err)
		}
		tlsSpec = append(tlsSpec, networkingv1.IngressTLS{Hosts: []string{host}, SecretName: sec.Name})
		rules = append(rules, ingressRule(host, "/", hosts[n]))
	}
	ing := p.ingress("tls", tlsSpec, rules...)
	if err := p.cl.Create(ctx, ing); err != nil {
		t.Fatalf("create Ingress: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		host := p.host(n)
		url := "https://" + host + "/secure"
		eventually(t, 30*time.Second, fmt.Sprintf("curl --cacert <test CA> %s: chain verified, %s's own certificate", url, host), func() error {
			body, info, err := p.curl(ctx, "--http1.1", "--cacert", p.caPEM, "--resolve", host+":443:"+p.vip.String(), url)
			if err != nil {
				return err
			}
			r, err := p.expectEcho(body, info, hosts[n], host, "/secure")
			if err != nil {
				return err
			}
			if r.Headers.Get("X-Forwarded-Proto") != "https" {
				return fmt.Errorf("X-Forwarded-Proto %q, want https", r.Headers.Get("X-Forwarded-Proto"))
			}
			leaf, err := servedLeaf(info)
			if err != nil {
				return err
			}
			if !leaf.Equal(leaves[n]) {
				return fmt.Errorf("served certificate %q (serial %s), want %s's (serial %s)", leaf.Subject, leaf.SerialNumber, host, leaves[n].SerialNumber)
			}
			return nil
		})
	}
	// A name no Ingress has a certificate for gets the proxy's default certificate, which the
	// test CA did not sign: verification fails (curl exit 60).
	other := p.host("c")
	eventually(t, 30*time.Second, "SNI "+other+" (no certificate) fails verification", func() error {
		_, _, err := p.curl(ctx, "--cacert", p.caPEM, "--resolve", other+":443:"+p.vip.String(), "https://"+other+"/")
		if err == nil || !strings.Contains(err.Error(), "exit status 60") {
			return fmt.Errorf("%v, want curl exit 60 (certificate not verified)", err)
		}
		return nil
	})
	eventually(t, 30*time.Second, "Ingress tls status is the VIP", func() error { return p.statusIsVIP(ctx, "tls") })
}

// servedLeaf is the first certificate of curl's %{certs}.
func servedLeaf(info string) (*x509.Certificate, error) {
	blk, _ := pem.Decode([]byte(info[strings.Index(info, "\n")+1:]))
	if blk == nil {
		return nil, fmt.Errorf("no certificate in curl's %%{certs}: %s", shortErr(info))
	}
	return x509.ParseCertificate(blk.Bytes)
}

func (p *proxyLab) testHTTP2(t *testing.T) {
	if p.ca == nil {
		t.Fatal("needs the TLS subtest's Ingress and CA (run TestProxy whole)")
	}
	ctx := context.Background()
	host := p.host("a")
	for _, c := range []struct{ flag, want string }{{"--http2", "2"}, {"--http1.1", "1.1"}} {
		eventually(t, 30*time.Second, fmt.Sprintf("curl %s https://%s/h2 reports HTTP version %s", c.flag, host, c.want), func() error {
			body, info, err := p.curl(ctx, c.flag, "--cacert", p.caPEM, "--resolve", host+":443:"+p.vip.String(), "https://"+host+"/h2")
			if err != nil {
				return err
			}
			if _, err := p.expectEcho(body, info, "alpha", host, "/h2"); err != nil {
				return err
			}
			line, _, _ := strings.Cut(info, "\n")
			if got := strings.Fields(line); len(got) != 2 || got[1] != c.want {
				return fmt.Errorf("http_code/http_version %q, want version %s", line, c.want)
			}
			return nil
		})
	}
}

func (p *proxyLab) testWebSocket(t *testing.T) {
	ctx := context.Background()
	wsHost := p.host("ws")
	wsIng := p.ingress("ws", nil, ingressRule(wsHost, "/", "alpha"))
	flip := p.ingress("flip", nil, ingressRule(p.host("flip"), "/", "alpha"))
	for _, ing := range []*networkingv1.Ingress{wsIng, flip} {
		if err := p.cl.Create(ctx, ing); err != nil {
			t.Fatalf("create Ingress: %v", err)
		}
	}
	web := p.webClient()
	defer web.hc.CloseIdleConnections()
	eventually(t, 30*time.Second, "routes for "+wsHost+" and flip", func() error {
		if err := web.expect(ctx, wsHost, "/", "alpha"); err != nil {
			return err
		}
		return web.expect(ctx, p.host("flip"), "/", "alpha")
	})

	proxyPod := p.proxyPod(t)
	swaps0 := p.tableSwaps(t, proxyPod.Name)

	ws, err := dialWebSocket(ctx, p.l, p.vip, wsHost, "/chat")
	if err != nil {
		t.Fatalf("WebSocket through %s: %v", p.vip, err)
	}
	defer ws.conn.Close()
	if !strings.HasPrefix(ws.pod, "alpha-") {
		t.Fatalf("WebSocket answered by pod %q, want an alpha pod", ws.pod)
	}
	roundTrip := func(i int) {
		t.Helper()
		msg := fmt.Sprintf("message %d over the same connection", i)
		got, err := ws.echo(msg)
		if err != nil {
			t.Fatalf("after %d changes the WebSocket failed: %v", i, err)
		}
		if got != msg {
			t.Fatalf("after %d changes: echo %q, want %q", i, got, msg)
		}
	}
	roundTrip(0)

	begin := time.Now()
	flipTo := "alpha"
	for i := 1; i <= proxyChanges; i++ {
		var what string
		var check func() error
		switch i % 4 {
		case 1: // switch an Ingress to the other backend
			if flipTo == "alpha" {
				flipTo = "beta"
			} else {
				flipTo = "alpha"
			}
			what = "flip → " + flipTo
			err = p.patchRules(ctx, flip, ingressRule(p.host("flip"), "/", flipTo))
			check = func() error { return web.expect(ctx, p.host("flip"), "/", flipTo) }
		case 2: // a new Ingress
			host := p.host(fmt.Sprintf("extra-%d", i))
			what = "create " + host
			err = p.cl.Create(ctx, p.ingress(fmt.Sprintf("extra-%d", i), nil, ingressRule(host, "/", "beta")))
			check = func() error { return web.expect(ctx, host, "/", "beta") }
		case 3: // delete it again
			host := p.host(fmt.Sprintf("extra-%d", i-1))
			what = "delete " + host
			err = p.cl.Delete(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: fmt.Sprintf("extra-%d", i-1)}})
			check = func() error { return web.expectStatus(ctx, host, "/", http.StatusNotFound) }
		case 0: // rewrite the WebSocket's own Ingress: a new path to beta, / stays on alpha
			path := fmt.Sprintf("/v%d", i)
			what = "ws Ingress gets " + path
			r := ingressRule(wsHost, "/", "alpha")
			r.HTTP.Paths = append(r.HTTP.Paths, ingressRule(wsHost, path, "beta").HTTP.Paths[0])
			err = p.patchRules(ctx, wsIng, r)
			check = func() error {
				if err := web.expect(ctx, wsHost, path, "beta"); err != nil {
					return err
				}
				return web.expect(ctx, wsHost, fmt.Sprintf("/v%d", i-4), "alpha") // the previous path is gone
			}
		}
		if err != nil {
			t.Fatalf("change %d (%s): %v", i, what, err)
		}
		pollFast(t, 20*time.Second, fmt.Sprintf("change %d (%s) served", i, what), check)
		roundTrip(i)
	}
	took := time.Since(begin)

	// Each change was seen in the data plane before the next was made, so each needed a table
	// of its own.
	swaps := p.tableSwaps(t, proxyPod.Name) - swaps0
	if swaps < proxyChanges {
		t.Errorf("metalgate_proxy_table_swaps_total grew by %d during %d changes, want at least %d", swaps, proxyChanges, proxyChanges)
	}
	// Still the same proxy process (a restart would also have cut the connection).
	if now := p.proxyPod(t); now.Name != proxyPod.Name || podRestarts(now) != podRestarts(proxyPod) {
		t.Errorf("proxy pod %s (restarts %d) is now %s (restarts %d)", proxyPod.Name, podRestarts(proxyPod), now.Name, podRestarts(now))
	}
	if err := ws.ping("still there?"); err != nil {
		t.Errorf("ping after the changes: %v", err)
	}
	if err := ws.close(); err != nil {
		t.Errorf("close handshake: %v", err)
	}
	t.Logf("WebSocket to %s via %s held across %d changes (%d table swaps) in %s", ws.pod, p.vip, proxyChanges, swaps, took.Round(time.Millisecond))
}

// patchRules replaces the rules of an Ingress (a merge patch: the proxy writes the status
// meanwhile, so an Update of an older copy would conflict).
func (p *proxyLab) patchRules(ctx context.Context, ing *networkingv1.Ingress, rules ...networkingv1.IngressRule) error {
	base := ing.DeepCopy()
	ing.Spec.Rules = rules
	return p.cl.Patch(ctx, ing, client.MergeFrom(base))
}

// ingress is an Ingress of the test's class.
func (p *proxyLab) ingress(name string, tls []networkingv1.IngressTLS, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec:       networkingv1.IngressSpec{IngressClassName: &p.class, TLS: tls, Rules: rules},
	}
}

// ingressRule routes host and path prefix to port http of Service backend.
func ingressRule(host, path, backend string) networkingv1.IngressRule {
	prefix := networkingv1.PathTypePrefix
	return networkingv1.IngressRule{
		Host: host,
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
			Path:     path,
			PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: backend, Port: networkingv1.ServiceBackendPort{Name: "http"},
			}},
		}}}},
	}
}

func (p *proxyLab) proxyPod(t *testing.T) corev1.Pod {
	t.Helper()
	pods, err := p.cs.CoreV1().Pods(p.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=proxy"})
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			live = append(live, pod)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d proxy pods, want 1", len(live))
	}
	return live[0]
}

func podRestarts(pod corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// tableSwaps reads metalgate_proxy_table_swaps_total from the proxy's admin port (through the
// API server's pods/portforward: the admin port serves /metrics to loopback callers, and to
// bearer tokens authorised for it, not to the API server's pod proxy).
func (p *proxyLab) tableSwaps(t *testing.T, pod string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := portForwardGet(ctx, p.l.RESTConfig(), p.ns, pod, 10254, "/metrics", "")
	if err != nil {
		t.Fatalf("metrics of %s: %v", pod, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "metalgate_proxy_table_swaps_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metalgate_proxy_table_swaps_total %q: %v", v, err)
			}
			return int(f)
		}
	}
	t.Fatalf("no metalgate_proxy_table_swaps_total in the metrics of %s", pod)
	return 0
}

// l2Advertisement announces pool at layer 2 (an L2Advertisement deleted when the test ends).
func l2Advertisement(t *testing.T, cl client.Client, generateName, pool string) {
	t.Helper()
	adv := &v1alpha1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, Namespace: operatorNamespace},
		Spec:       v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{pool}},
	}
	if err := cl.Create(context.Background(), adv); err != nil {
		t.Fatalf("create L2Advertisement: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), adv) })
}

// ownIngressClass creates an IngressClass of the test namespace ns's own (name = ns, controller
// metalgate.io/e2e-<ns>), so neither the demo's proxies (class metalgate) nor another test's
// see its Ingresses, nor its proxy theirs; deleted when the test ends.
func ownIngressClass(t *testing.T, cl client.Client, ns string) (class, controller string) {
	t.Helper()
	ic := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       networkingv1.IngressClassSpec{Controller: "metalgate.io/e2e-" + ns},
	}
	if err := cl.Create(context.Background(), ic); err != nil {
		t.Fatalf("create IngressClass: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), ic) })
	return ic.Name, ic.Spec.Controller
}

// deployNamespacedProxy applies config/proxy/namespaced in ns the way an overlay would (a
// ClusterRoleBinding of its own, the lab's imported image, the Service's pool) and makes the
// proxy serve controller's IngressClasses, with the proxy flags extraArgs added.
func deployNamespacedProxy(t *testing.T, l *lab.Lab, cl client.Client, ns, pool, controller string, extraArgs ...string) {
	t.Helper()
	ctx := context.Background()
	out, err := l.Kubectl(ctx, "kustomize", "../config/proxy/namespaced")
	if err != nil {
		t.Fatalf("kubectl kustomize config/proxy/namespaced: %v\n%s", err, out)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	var kinds []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read config/proxy/namespaced: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode config/proxy/namespaced: %v", err)
		}
		o, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("config/proxy/namespaced: unexpected %T", obj)
		}
		o.SetNamespace(ns)
		switch o := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			o.SetNamespace("")
			o.Name += "-" + ns
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
			t.Cleanup(func() {
				if !t.Failed() {
					_ = cl.Delete(context.Background(), o)
				}
			})
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
		case *appsv1.Deployment:
			c := &o.Spec.Template.Spec.Containers[0]
			if c.Image != lab.MetalgateImage.Ref {
				t.Fatalf("proxy image %s, the lab has %s", c.Image, lab.MetalgateImage.Ref)
			}
			c.ImagePullPolicy = corev1.PullNever
			c.Args = append(c.Args, "--controller-name="+controller)
			c.Args = append(c.Args, extraArgs...)
		case *corev1.Service:
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations["metalgate.io/address-pool"] = pool
		}
		if err := cl.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		kinds = append(kinds, gvk.Kind)
	}
	for _, want := range []string{"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"} {
		found := false
		for _, k := range kinds {
			found = found || k == want
		}
		if !found {
			t.Fatalf("config/proxy/namespaced has no %s (has %v)", want, kinds)
		}
	}
}

// echoBackend creates Deployment and Service name (port http 80 → 8080) running the echo.
func echoBackend(t *testing.T, cl client.Client, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{echoContainer(8080)}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range []client.Object{dep, svc} {
		if err := cl.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, name, err)
		}
	}
}

// serviceVIP waits for the first load-balancer address of a Service.
func serviceVIP(t *testing.T, cl client.Client, ns, name string) netip.Addr {
	t.Helper()
	var vip netip.Addr
	eventually(t, 30*time.Second, "Service "+ns+"/"+name+" gets an address", func() error {
		var svc corev1.Service
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet")
		}
		var err error
		vip, err = netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
		return err
	})
	return vip
}

// dialInNetns connects to addr from the network namespace at nsPath. The socket is created by
// an OS thread that joined the namespace and is never unlocked: the runtime ends the thread
// with the goroutine, so nothing else ever runs there. The connection stays in the namespace.
func dialInNetns(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{err: fmt.Errorf("open %s: %w", nsPath, err)}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		done <- result{conn: c, err: err}
	}()
	r := <-done
	return r.conn, r.err
}

// clientNetns is the path of the lab client's network namespace.
func clientNetns(l *lab.Lab) string { return filepath.Join("/run/netns", l.Namespace("client")) }

// webClient is an HTTP client in the lab client's namespace that sends every request to the
// VIP's port 80 with a Host header.
type webClient struct {
	p  *proxyLab
	hc *http.Client
}

func (p *proxyLab) webClient() *webClient {
	ns := clientNetns(p.l)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialInNetns(ctx, ns, network, addr)
		},
		MaxIdleConnsPerHost: 4,
	}
	return &webClient{p: p, hc: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

func (w *webClient) get(ctx context.Context, host, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.p.vip.String()+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Host = host
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// expect checks that host and path are served by backend.
func (w *webClient) expect(ctx context.Context, host, path, backend string) error {
	code, body, err := w.get(ctx, host, path)
	if err != nil {
		return err
	}
	_, err = w.p.expectEcho(string(body), strconv.Itoa(code)+" 1.1", backend, host, path)
	return err
}

func (w *webClient) expectStatus(ctx context.Context, host, path string, want int) error {
	code, body, err := w.get(ctx, host, path)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("GET %s%s: %d, want %d: %s", host, path, code, want, shortErr(string(body)))
	}
	return nil
}

// wsConn is the client end of a WebSocket (RFC 6455): masked frames out, unmasked in.
type wsConn struct {
	conn net.Conn
	r    *bufio.Reader
	pod  string // X-Echo-Pod of the handshake response
}

// dialWebSocket opens a WebSocket from the lab client to vip:80 for host and path.
func dialWebSocket(ctx context.Context, l *lab.Lab, vip netip.Addr, host, path string) (*wsConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := dialInNetns(ctx, clientNetns(l), "tcp", net.JoinHostPort(vip.String(), "80"))
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send handshake: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read handshake response: %w", err)
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		return nil, fmt.Errorf("handshake answered %s %v", resp.Status, resp.Header)
	}
	_ = conn.SetDeadline(time.Time{})
	return &wsConn{conn: conn, r: br, pod: resp.Header.Get("X-Echo-Pod")}, nil
}

func (c *wsConn) write(op byte, payload []byte) error {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	b = append(b, mask[:]...)
	for i, x := range payload {
		b = append(b, x^mask[i%4])
	}
	_, err := c.conn.Write(b)
	return err
}

func (c *wsConn) read() (op byte, payload []byte, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	if hdr[0]&0x80 == 0 || hdr[1]&0x80 != 0 {
		return 0, nil, fmt.Errorf("unexpected frame header %#x %#x (fragmented or masked)", hdr[0], hdr[1])
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0] & 0x0f, payload, nil
}

// exchange sends one frame and reads the answer within 10 s.
func (c *wsConn) exchange(op byte, payload []byte) (byte, []byte, error) {
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	if err := c.write(op, payload); err != nil {
		return 0, nil, fmt.Errorf("send: %w", err)
	}
	gotOp, got, err := c.read()
	if err != nil {
		return 0, nil, fmt.Errorf("receive: %w", err)
	}
	return gotOp, got, nil
}

// echo sends a text message and returns the text that comes back.
func (c *wsConn) echo(msg string) (string, error) {
	op, got, err := c.exchange(0x1, []byte(msg))
	if err != nil {
		return "", err
	}
	if op != 0x1 {
		return "", fmt.Errorf("answer has opcode %#x, want text", op)
	}
	return string(got), nil
}

func (c *wsConn) ping(payload string) error {
	op, got, err := c.exchange(0x9, []byte(payload))
	if err != nil {
		return err
	}
	if op != 0xa || string(got) != payload {
		return fmt.Errorf("answer opcode %#x %q, want pong %q", op, got, payload)
	}
	return nil
}

// close sends close 1000, expects it back and then the end of the stream.
func (c *wsConn) close() error {
	op, got, err := c.exchange(0x8, []byte{0x03, 0xe8})
	if err != nil {
		return err
	}
	if op != 0x8 || !bytes.Equal(got, []byte{0x03, 0xe8}) {
		return fmt.Errorf("answer opcode %#x %v, want close 1000", op, got)
	}
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after close: %v, want the end of the stream", err)
	}
	return nil
}

// pemCA is a test certificate authority.
type pemCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newPEMCA(name string) (*pemCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &pemCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue returns a server certificate for host signed by the CA, its key (PEM) and the parsed
// certificate.
func (ca *pemCA) issue(host string) (certPEM, keyPEM []byte, leaf *x509.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("key for %s: %w", host, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certificate for %s: %w", host, err)
	}
	leaf, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse certificate for %s: %w", host, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("marshal key for %s: %w", host, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), leaf, nil
}
